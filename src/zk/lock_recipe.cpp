#include "zk/lock_recipe.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace corolock::detail::zk {

namespace {
constexpr std::string_view protected_mark = "_c_";
constexpr std::string_view lock_mark = "-lock-";
constexpr std::size_t sequence_digits = 10;  // the ensemble's %010d

bool plain(unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; }
}  // namespace

std::string locks_root(std::string_view root) { return std::string(root) + "/locks"; }

std::string lock_dir(std::string_view root, std::string_view name) {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out = locks_root(root);
    out += '/';
    // "." and ".." are not node names: a leading '.' is escaped too.
    for (std::size_t i = 0; i < name.size(); ++i) {
        const auto c = static_cast<unsigned char>(name[i]);
        if (plain(c) && !(i == 0 && c == '.')) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 0xF];
        }
    }
    return out;
}

std::optional<std::string> unescape_name(std::string_view node) {
    std::string out;
    for (std::size_t i = 0; i < node.size(); ++i) {
        if (node[i] != '%') {
            out += node[i];
            continue;
        }
        unsigned v = 0;
        if (i + 2 >= node.size()) return std::nullopt;
        const auto r = std::from_chars(node.data() + i + 1, node.data() + i + 3, v, 16);
        if (r.ec != std::errc() || r.ptr != node.data() + i + 3) return std::nullopt;
        out += static_cast<char>(v);
        i += 2;
    }
    return out;
}

std::string attempt_id(std::string_view owner, std::uint64_t attempt) {
    std::string out(owner);
    out += '.';
    out += std::to_string(attempt);
    return out;
}

std::string owner_of(std::string_view child) {
    if (!sequence_of(child)) return {};
    const auto rest = child.substr(protected_mark.size());
    const auto end = rest.find_first_of(".-");
    return std::string(rest.substr(0, end));
}

std::string node_prefix(std::string_view attempt_id) {
    std::string out(protected_mark);
    out += attempt_id;
    out += lock_mark;
    return out;
}

std::optional<std::uint64_t> sequence_of(std::string_view child) {
    if (child.size() < sequence_digits + lock_mark.size() ||
        child.substr(0, protected_mark.size()) != protected_mark)
        return std::nullopt;
    const auto digits = child.substr(child.size() - sequence_digits);
    if (child.substr(child.size() - sequence_digits - lock_mark.size(), lock_mark.size()) !=
        lock_mark)
        return std::nullopt;
    std::uint64_t seq = 0;
    const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), seq);
    if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) return std::nullopt;
    return seq;
}

std::optional<std::string> find_attempt(const std::vector<std::string>& children,
                                        std::string_view attempt_id) {
    const auto prefix = node_prefix(attempt_id);
    for (const auto& c : children)
        if (c.size() == prefix.size() + sequence_digits && c.compare(0, prefix.size(), prefix) == 0 &&
            sequence_of(c))
            return c;
    return std::nullopt;
}

std::string lowest(const std::vector<std::string>& children) {
    const std::string* best = nullptr;
    std::uint64_t best_seq = 0;
    for (const auto& c : children) {
        const auto s = sequence_of(c);
        if (s && (!best || *s < best_seq)) {
            best = &c;
            best_seq = *s;
        }
    }
    return best ? *best : std::string{};
}

standing place_in_line(const std::vector<std::string>& children, std::string_view mine) {
    const auto my_seq = sequence_of(mine);
    if (!my_seq || std::find(children.begin(), children.end(), mine) == children.end())
        return {};
    const std::string* before = nullptr;
    std::uint64_t before_seq = 0;
    for (const auto& c : children) {
        const auto s = sequence_of(c);
        if (s && *s < *my_seq && (!before || *s > before_seq)) {
            before = &c;
            before_seq = *s;
        }
    }
    if (!before) return {standing::kind::owner, {}};
    return {standing::kind::waiting, *before};
}

}  // namespace corolock::detail::zk
