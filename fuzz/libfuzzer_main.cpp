// libFuzzer's entry for one target: built once per target with
// -DCOROLOCK_FUZZ_ENTRY=corolock_fuzz_<name> (fuzz/CMakeLists.txt). The
// unit tests link the targets without it.
#include "targets.hpp"

#ifndef COROLOCK_FUZZ_ENTRY
#error "define COROLOCK_FUZZ_ENTRY as the target's entry, e.g. corolock_fuzz_resp3"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return COROLOCK_FUZZ_ENTRY(data, size);
}
