// The keys of a lock's name on Redis (scripts.hpp, "lock_keys"): one hash
// slot per name, "corolock:{NAME}" and its companions.
#include "redis/lock/scripts.hpp"

namespace corolock::detail {

namespace {
constexpr std::string_view key_prefix = "corolock:{";
constexpr std::string_view fence_suffix = "}:fence";
constexpr std::string_view channel_suffix = "}:unlock";
constexpr std::string_view queue_suffix = "}:queue";
constexpr std::string_view entries_suffix = "}:entries";
constexpr std::string_view leases_suffix = "}:leases";
}  // namespace

lock_keys::lock_keys(std::string_view name, extra_keys extra) {
    const std::size_t base = key_prefix.size() + name.size() + 1;  // "corolock:{name}"
    const std::size_t key = key_prefix.size() + name.size();
    std::size_t extra_size = 0;
    if (extra == extra_keys::queue)
        extra_size = 2 * key + queue_suffix.size() + entries_suffix.size();
    else if (extra == extra_keys::leases)
        extra_size = key + leases_suffix.size();
    buffer_.reserve(2 * key + fence_suffix.size() + channel_suffix.size() + extra_size);
    buffer_.append(key_prefix).append(name).append(fence_suffix);
    buffer_.append(key_prefix).append(name).append(channel_suffix);
    if (extra == extra_keys::queue) {
        buffer_.append(key_prefix).append(name).append(queue_suffix);
        buffer_.append(key_prefix).append(name).append(entries_suffix);
    } else if (extra == extra_keys::leases) {
        buffer_.append(key_prefix).append(name).append(leases_suffix);
    }
    // A handle's name is at most max_lock_name_length bytes; an admin call
    // builds keys before it validates the name, and never uses them if bad.
    lock_size_ = static_cast<std::uint32_t>(base);
    fence_size_ = static_cast<std::uint32_t>(base + fence_suffix.size() - 1);
}

lock_keys keys_for(std::string_view name) { return lock_keys(name); }

std::string_view lock_name_of_key(std::string_view key) noexcept {
    if (key.size() <= key_prefix.size() + 1 || key.substr(0, key_prefix.size()) != key_prefix ||
        key.back() != '}')
        return {};
    const auto name = key.substr(key_prefix.size(), key.size() - key_prefix.size() - 1);
    if (name.find_first_of("{}") != std::string_view::npos) return {};
    return name;
}

}  // namespace corolock::detail
