// A lock's keys under the backend's prefix, "<prefix><len>:<name>/<owner>":
// lock_prefix (etcd_backend.hpp) writes them, split_lock_key
// (etcd_admin.hpp) reads them back. Apart from the I/O so that the fuzz
// target links them alone (fuzz/etcd_lock_key_fuzz.cpp).
#include "etcd/etcd_admin.hpp"
#include "etcd/etcd_backend.hpp"

#include <charconv>

namespace corolock::detail::etcd {

std::string lock_prefix(const std::string& prefix, std::string_view name) {
    return prefix + std::to_string(name.size()) + ":" + std::string(name) + "/";
}

bool split_lock_key(std::string_view key, std::string_view prefix, std::string_view& name,
                    std::string_view& owner) noexcept {
    if (key.substr(0, prefix.size()) != prefix) return false;
    const std::string_view tail = key.substr(prefix.size());
    const auto colon = tail.find(':');
    if (colon == 0 || colon == std::string_view::npos || tail[0] == '0') return false;
    std::size_t length = 0;
    const auto r = std::from_chars(tail.data(), tail.data() + colon, length);
    if (r.ec != std::errc() || r.ptr != tail.data() + colon) return false;
    const auto rest = tail.substr(colon + 1);
    if (rest.size() <= length + 1 || rest[length] != '/') return false;
    name = rest.substr(0, length);
    owner = rest.substr(length + 1);
    return true;
}

}  // namespace corolock::detail::etcd
