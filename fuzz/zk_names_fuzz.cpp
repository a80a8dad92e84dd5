// Fuzz target for the ZooKeeper recipe's names (zk/lock_recipe.hpp): a
// lock name's directory escapes it into one plain node name (letters,
// digits, "-_." and upper-case %XX, no leading '.') that unescape_name
// turns back into the name; unescape_name agrees with a reference decoder
// and refuses a bad escape; sequence_of accepts exactly "_c_..." +
// "-lock-" + ten decimal digits (checked against a reference), and reads
// back the sequence of a node made by node_prefix; owner_of finds the
// owner; lowest and place_in_line pick the lowest sequence and the
// predecessor, as a reference does over the same children.
#include "fuzz_check.hpp"
#include "targets.hpp"

#include "zk/lock_recipe.hpp"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace zk = corolock::detail::zk;

bool plain(char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.';
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::optional<std::string> reference_unescape(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '%') {
            out += s[i];
            continue;
        }
        if (i + 2 >= s.size() || hex_digit(s[i + 1]) < 0 || hex_digit(s[i + 2]) < 0)
            return std::nullopt;
        out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
        i += 2;
    }
    return out;
}

std::optional<std::uint64_t> reference_sequence(std::string_view child) {
    constexpr std::string_view head = "_c_", mark = "-lock-";
    if (child.size() < head.size() + mark.size() + 10 || child.substr(0, 3) != head ||
        child.substr(child.size() - 16, 6) != mark)
        return std::nullopt;
    std::uint64_t v = 0;
    for (const char c : child.substr(child.size() - 10)) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return v;
}

void check_escaping(std::string_view name) {
    const std::string dir = zk::lock_dir("/r", name);
    const std::string head = zk::locks_root("/r") + "/";
    FUZZ_REQUIRE(dir.compare(0, head.size(), head) == 0);
    const std::string_view node = std::string_view(dir).substr(head.size());
    for (std::size_t i = 0; i < node.size(); ++i) {
        if (plain(node[i]) && !(i == 0 && node[i] == '.')) continue;
        FUZZ_REQUIRE(node[i] == '%' && i + 2 < node.size());
        for (const char h : {node[i + 1], node[i + 2]})
            FUZZ_REQUIRE(hex_digit(h) >= 0 && !(h >= 'a' && h <= 'f'));
        i += 2;
    }
    const auto back = zk::unescape_name(node);
    FUZZ_REQUIRE(back && *back == name);
}

}  // namespace

int corolock_fuzz_zk_names(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    check_escaping(bytes);
    FUZZ_REQUIRE(zk::unescape_name(bytes) == reference_unescape(bytes));
    FUZZ_REQUIRE(zk::sequence_of(bytes) == reference_sequence(bytes));

    // The input's lines as a lock directory's children.
    std::vector<std::string> children;
    corolock::fuzz::input lines(data, size);
    while (!lines.empty() && children.size() < 64) children.emplace_back(lines.take_until('\n'));
    for (const auto& c : children) {
        FUZZ_REQUIRE(zk::sequence_of(c) == reference_sequence(c));
        if (!zk::sequence_of(c)) FUZZ_REQUIRE(zk::owner_of(c).empty());
    }
    const std::string* low = nullptr;
    for (const auto& c : children)
        if (const auto s = reference_sequence(c); s && (!low || *s < *reference_sequence(*low)))
            low = &c;
    FUZZ_REQUIRE(zk::lowest(children) == (low ? *low : std::string()));
    for (const auto& mine : children) {
        const auto st = zk::place_in_line(children, mine);
        const auto my_seq = reference_sequence(mine);
        if (!my_seq) {
            FUZZ_REQUIRE(st.what == zk::standing::kind::missing);
            continue;
        }
        const std::string* before = nullptr;
        for (const auto& c : children)
            if (const auto s = reference_sequence(c);
                s && *s < *my_seq && (!before || *s > *reference_sequence(*before)))
                before = &c;
        if (!before) {
            FUZZ_REQUIRE(st.what == zk::standing::kind::owner);
        } else {
            FUZZ_REQUIRE(st.what == zk::standing::kind::waiting && st.predecessor == *before);
        }
    }

    // A node this recipe creates: its owner and sequence read back.
    corolock::fuzz::input in(data, size);
    std::string owner;
    for (const char c : in.take(32)) owner += "0123456789abcdef"[static_cast<unsigned char>(c) % 16];
    if (owner.empty()) owner = "0";
    const std::uint64_t attempt = in.take_u64();
    const auto seq = static_cast<std::uint32_t>(in.take_u64() % 2147483648u);
    char digits[16];
    std::snprintf(digits, sizeof digits, "%010u", static_cast<unsigned>(seq));
    const std::string id = zk::attempt_id(owner, attempt);
    const std::string node = zk::node_prefix(id) + digits;
    FUZZ_REQUIRE(zk::sequence_of(node) == seq);
    FUZZ_REQUIRE(zk::owner_of(node) == owner);
    FUZZ_REQUIRE(zk::find_attempt({std::string("x"), node}, id) == node);
    return 0;
}
