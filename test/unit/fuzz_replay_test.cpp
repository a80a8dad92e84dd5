// The RESP3 fuzz target's own checks (fuzz/resp3_parser_fuzz.cpp, linked
// into this binary without libFuzzer) over every input kept in fuzz/corpus/:
// the seeds, and each input a fuzzing run found once the bug behind it is
// fixed (scripts/fuzz.sh says to keep it there). So every ctest run, and
// the sanitizer builds' runs, replay them. A disagreement aborts this
// process, which fails the test; the last "replaying" line names the input.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

TEST_CASE("fuzz: every input kept in fuzz/corpus/ passes the fuzz target's checks", "[fuzz]") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(COROLOCK_SOURCE_DIR) / "fuzz" / "corpus";
    REQUIRE(fs::is_directory(dir));
    std::size_t replayed = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (!entry.is_regular_file()) continue;
        std::ifstream in(entry.path(), std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        REQUIRE(in.good() | in.eof());
        std::printf("replaying %s (%zu bytes)\n", entry.path().filename().c_str(), bytes.size());
        std::fflush(stdout);
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
        ++replayed;
    }
    // The seed corpus alone has 58 inputs; an empty or missing folder must
    // not pass as a clean replay.
    CHECK(replayed >= 58);
}
