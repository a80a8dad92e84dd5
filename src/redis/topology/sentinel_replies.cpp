// Redis Sentinel's decisions, sans-I/O (namespace sentinel in
// sentinel.hpp): reading the Sentinels' and the servers' replies, and
// putting a failed discovery into words. Apart from sentinel_link's I/O so
// that the fuzz target links them alone (fuzz/sentinel_fuzz.cpp).
#include "redis/topology/sentinel.hpp"

#include <array>
#include <charconv>

namespace corolock::detail {

namespace sentinel {

std::string to_string(const endpoint& ep) {
    const bool v6 = ep.host.find(':') != std::string::npos;
    std::string out = v6 ? "[" + ep.host + "]" : ep.host;
    out += ':';
    out += std::to_string(ep.port);
    return out;
}

namespace {

bool parse_port(std::string_view text, std::uint16_t& port) {
    unsigned value = 0;
    const auto* end = text.data() + text.size();
    const auto [p, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc{} || p != end || value == 0 || value > 65535) return false;
    port = static_cast<std::uint16_t>(value);
    return true;
}

// A reply's text cut short for a message (the reply may come from anything
// listening on the port).
std::string shown(const reply& r) {
    std::string text = corolock::to_string(r);
    if (text.size() > 80) text = text.substr(0, 77) + "...";
    return text;
}

}  // namespace

master_addr parse_master_addr(const reply& r) {
    master_addr out;
    if (r.is_null()) {
        out.result = master_addr::status::unknown_service;
        out.why = "service unknown";
        return out;
    }
    if (r.is_error()) {
        out.result = master_addr::status::refused;
        out.why = r.str.empty() ? "an error reply without text" : r.str;
        return out;
    }
    if (r.type != resp3_type::array || r.elements.size() != 2 || !r.elements[0].is_string() ||
        !r.elements[1].is_string() || r.elements[0].str.empty() ||
        !parse_port(r.elements[1].str, out.ep.port)) {
        out.result = master_addr::status::bad_reply;
        out.why = "unexpected reply " + shown(r);
        return out;
    }
    out.ep.host = r.elements[0].str;
    out.result = master_addr::status::ok;
    return out;
}

bool role_is_master(const reply& r, std::string& role) {
    if (r.type != resp3_type::array || r.elements.empty() || !r.elements[0].is_string()) {
        role = r.is_error() ? "ROLE: " + r.str : "unexpected ROLE reply " + shown(r);
        return false;
    }
    role = r.elements[0].str;
    return role == "master";
}

std::optional<endpoint> parse_switch_master(const reply& push, std::string_view service) {
    // RESP3: >3 message +switch-master payload (a RESP2 array alike).
    if ((push.type != resp3_type::push && push.type != resp3_type::array) ||
        push.elements.size() != 3 || push.elements[0].str != "message" ||
        push.elements[1].str != "+switch-master")
        return std::nullopt;
    std::string_view payload = push.elements[2].str;
    std::array<std::string_view, 5> words;
    std::size_t n = 0;
    while (!payload.empty()) {
        const auto space = payload.find(' ');
        const auto word = payload.substr(0, space);
        if (!word.empty()) {
            if (n == words.size()) return std::nullopt;
            words[n++] = word;
        }
        if (space == std::string_view::npos) break;
        payload.remove_prefix(space + 1);
    }
    if (n != words.size() || words[0] != service) return std::nullopt;
    endpoint ep;
    ep.host = std::string(words[3]);
    if (!parse_port(words[4], ep.port)) return std::nullopt;
    return ep;
}

bool is_readonly_error(std::string_view message) noexcept {
    return message.substr(0, 8) == "READONLY";
}

void discovery_report::sentinel_failed(const endpoint& s, std::string_view why) {
    entries_.push_back("sentinel " + to_string(s) + ": " + std::string(why));
}

void discovery_report::primary_failed(const endpoint& p, std::string_view why) {
    // The handshake's own words already name the server ("... is a replica").
    const std::string name = to_string(p);
    if (why.substr(0, name.size()) == name)
        entries_.emplace_back(why);
    else
        entries_.push_back(name + ": " + std::string(why));
}

bool discovery_report::all_unknown(std::size_t sentinels) const noexcept {
    return sentinels > 0 && unknown_ == sentinels && entries_.size() == sentinels;
}

std::string discovery_report::text() const {
    std::string out;
    for (const auto& e : entries_) {
        if (!out.empty()) out += "; ";
        out += e;
    }
    return out;
}

}  // namespace sentinel

}  // namespace corolock::detail
