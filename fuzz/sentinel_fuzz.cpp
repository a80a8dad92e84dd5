// Fuzz target for Redis Sentinel's reply readers (redis/topology/sentinel.hpp):
// parse_switch_master agrees with a reference reader of the
// +switch-master message ("<name> <old-ip> <old-port> <new-ip> <new-port>",
// words split by spaces) on every reply the RESP3 parser makes of the
// input, and reads back the new address of a message built from the
// input's fields; parse_master_addr and role_is_master never throw, and an
// address they accept has a host and a port from 1 to 65535.
#include "fuzz_check.hpp"
#include "targets.hpp"

#include "redis/resp/resp3_parser.hpp"
#include "redis/topology/sentinel.hpp"

#include <optional>
#include <string>
#include <vector>

namespace {

using corolock::endpoint;
using corolock::reply;
using corolock::resp3_type;
namespace sentinel = corolock::detail::sentinel;

constexpr std::string_view service = "mymaster";

std::optional<std::uint16_t> reference_port(std::string_view text) {
    if (text.empty()) return std::nullopt;
    unsigned long v = 0;
    for (const char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + static_cast<unsigned long>(c - '0');
        if (v > 65535) return std::nullopt;
    }
    if (v == 0) return std::nullopt;
    return static_cast<std::uint16_t>(v);
}

std::optional<endpoint> reference_switch(const reply& r, std::string_view name) {
    if (r.type != resp3_type::push && r.type != resp3_type::array) return std::nullopt;
    if (r.elements.size() != 3 || r.elements[0].str != "message" ||
        r.elements[1].str != "+switch-master")
        return std::nullopt;
    std::vector<std::string> words(1);
    for (const char c : r.elements[2].str) {
        if (c != ' ')
            words.back() += c;
        else if (!words.back().empty())
            words.emplace_back();
    }
    if (words.back().empty()) words.pop_back();
    if (words.size() != 5 || words[0] != name) return std::nullopt;
    const auto port = reference_port(words[4]);
    if (!port) return std::nullopt;
    return endpoint{words[3], *port};
}

void check(const reply& r) {
    FUZZ_REQUIRE(sentinel::parse_switch_master(r, service) == reference_switch(r, service));
    // No word is empty, so no service named "" ever switches.
    FUZZ_REQUIRE(!sentinel::parse_switch_master(r, ""));
    const auto addr = sentinel::parse_master_addr(r);
    if (addr.result == sentinel::master_addr::status::ok)
        FUZZ_REQUIRE(!addr.ep.host.empty() && addr.ep.port != 0);
    else
        FUZZ_REQUIRE(!addr.why.empty());
    std::string role;
    (void)sentinel::role_is_master(r, role);
    for (const auto& e : r.elements) check(e);
}

}  // namespace

int corolock_fuzz_sentinel(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);

    // The input as what a Sentinel sent.
    corolock::detail::resp3_parser parser({0, 8, 64, 1u << 20});
    corolock::error_code ec;
    parser.consume(bytes, ec);
    while (parser.has_reply()) check(parser.pop());

    // The input's fields as a +switch-master message: each word of it
    // (cut at NUL bytes) without spaces, joined by runs of spaces.
    corolock::fuzz::input in(data, size);
    std::string words[4];
    for (auto& w : words)
        for (const char c : in.take_until('\0')) w += c == ' ' ? '_' : c;
    const unsigned high = in.take_byte();
    const unsigned port = 1 + (high * 256u + in.take_byte()) % 65535u;
    std::string payload = std::string(service) + "  " + words[0] + " " + words[1] + " ";
    const std::string new_host = words[2].empty() ? "h" : words[2];
    payload += new_host + "   " + std::to_string(port) + (words[3].empty() ? "" : " ");
    reply push;
    push.type = resp3_type::push;
    push.elements.resize(3);
    push.elements[0].str = "message";
    push.elements[1].str = "+switch-master";
    push.elements[2].str = payload;
    const auto want = reference_switch(push, service);
    FUZZ_REQUIRE(sentinel::parse_switch_master(push, service) == want);
    if (!words[0].empty() && !words[1].empty())
        FUZZ_REQUIRE((want == endpoint{new_host, static_cast<std::uint16_t>(port)}));
    return 0;
}
