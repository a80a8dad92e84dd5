// Lock name patterns for `corolock list` on the backends that filter names
// themselves (etcd, ZooKeeper): Redis's SCAN MATCH rules, so that a
// pattern means the same on every backend.
#pragma once

#include <string_view>

namespace corolock::detail {

// Whether text matches a Redis glob (as SCAN MATCH): * any run of bytes,
// ? one byte, [abc] [a-z] [^abc] a class, a backslash escapes the next
// byte; every other byte matches itself. Time |pattern| * |text| at most.
bool glob_match(std::string_view pattern, std::string_view text) noexcept;

}  // namespace corolock::detail
