// The leader record of the backends that keep it as one value (etcd's key,
// ZooKeeper's node): "<epoch> <owner> <value>", the epoch in decimal, the
// owner id without spaces, then the value's bytes as they are.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace corolock::detail {

struct leader_record {
    std::uint64_t epoch = 0;
    std::string_view owner;
    std::string_view value;
};

inline std::string encode_leader_record(std::uint64_t epoch, std::string_view owner,
                                        std::string_view value) {
    std::string r = std::to_string(epoch);
    r += ' ';
    r += owner;
    r += ' ';
    r += value;
    return r;
}

// False for anything else (an empty record: none).
inline bool decode_leader_record(std::string_view text, leader_record& out) {
    const auto sp1 = text.find(' ');
    if (sp1 == std::string_view::npos) return false;
    const auto sp2 = text.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos) return false;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + sp1, out.epoch);
    if (ec != std::errc() || p != text.data() + sp1 || out.epoch == 0) return false;
    out.owner = text.substr(sp1 + 1, sp2 - sp1 - 1);
    out.value = text.substr(sp2 + 1);
    return !out.owner.empty();
}

}  // namespace corolock::detail
