#include "redis/topology/slot_map.hpp"

#include <algorithm>
#include <charconv>

namespace corolock::detail::cluster {

namespace {

constexpr std::array<std::uint16_t, 256> crc_table() noexcept {
    std::array<std::uint16_t, 256> t{};
    for (unsigned i = 0; i < 256; ++i) {
        std::uint16_t crc = static_cast<std::uint16_t>(i << 8);
        for (int b = 0; b < 8; ++b)
            crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
        t[i] = crc;
    }
    return t;
}
constexpr auto table = crc_table();

template <class Int>
bool parse_int(std::string_view s, Int& out) {
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

// The value of `key` in a map reply, or in a RESP2 array of key, value pairs.
const reply* field(const reply& r, std::string_view key) {
    if (r.type != resp3_type::map && r.type != resp3_type::array) return nullptr;
    for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2)
        if (r.elements[i].is_string() && r.elements[i].str == key) return &r.elements[i + 1];
    return nullptr;
}

std::string_view text_of(const reply* r) {
    return r != nullptr && r->is_string() ? std::string_view(r->str) : std::string_view();
}

bool port_of(const reply* r, std::uint16_t& out) {
    if (r == nullptr) return false;
    std::int64_t v = 0;
    if (r->type == resp3_type::integer)
        v = r->integer;
    else if (!r->is_string() || !parse_int(std::string_view(r->str), v))
        return false;
    if (v <= 0 || v > 65535) return false;
    out = static_cast<std::uint16_t>(v);
    return true;
}

bool slot_of(const reply& r, std::int64_t& out) {
    if (r.type != resp3_type::integer) return false;
    out = r.integer;
    return out >= 0 && out < slot_count;
}

std::string host_or_seed(std::string_view host, std::string_view seed) {
    if (host.empty() || host == "?") return std::string(seed);
    return std::string(host);
}

}  // namespace

std::uint16_t crc16(std::string_view data) noexcept {
    std::uint16_t crc = 0;
    for (unsigned char c : data)
        crc = static_cast<std::uint16_t>((crc << 8) ^ table[((crc >> 8) ^ c) & 0xff]);
    return crc;
}

std::uint16_t key_slot(std::string_view key) noexcept {
    if (const auto open = key.find('{'); open != std::string_view::npos) {
        const auto close = key.find('}', open + 1);
        if (close != std::string_view::npos && close > open + 1)
            key = key.substr(open + 1, close - open - 1);
    }
    return crc16(key) & (slot_count - 1);
}

std::string to_string(const node_address& a) {
    return a.host + ":" + std::to_string(a.port);
}

std::optional<node_address> parse_address(std::string_view text) {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    // Redis 7 may add ",hostname" after the port in some replies.
    auto port_text = text.substr(colon + 1);
    if (const auto comma = port_text.find(','); comma != std::string_view::npos)
        port_text = port_text.substr(0, comma);
    std::uint32_t port = 0;
    if (!parse_int(port_text, port) || port == 0 || port > 65535) return std::nullopt;
    return node_address{std::string(text.substr(0, colon)), static_cast<std::uint16_t>(port)};
}

// ---- the map ----

std::uint16_t slot_map::add_node(const node_address& a) {
    const auto it = std::find(nodes_.begin(), nodes_.end(), a);
    if (it != nodes_.end()) return static_cast<std::uint16_t>(it - nodes_.begin());
    nodes_.push_back(a);
    return static_cast<std::uint16_t>(nodes_.size() - 1);
}

const node_address* slot_map::primary_of(std::uint16_t slot) const noexcept {
    if (slot >= slot_count) return nullptr;
    const auto i = owner_[slot];
    return i == no_node ? nullptr : &nodes_[i];
}

void slot_map::assign(std::uint16_t slot, const node_address& to) {
    if (slot >= slot_count) return;
    owner_[slot] = add_node(to);
}

std::vector<node_address> slot_map::primaries() const {
    std::vector<bool> used(nodes_.size(), false);
    for (auto i : owner_)
        if (i != no_node) used[i] = true;
    std::vector<node_address> out;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
        if (used[i]) out.push_back(nodes_[i]);
    return out;
}

bool slot_map::covers_all() const noexcept {
    return std::none_of(owner_.begin(), owner_.end(), [](auto i) { return i == no_node; });
}

bool slot_map::from_shards(const reply& r, bool tls, std::string_view seed_host, slot_map& out,
                           std::string& why) {
    if (r.type != resp3_type::array) {
        why = "CLUSTER SHARDS: not an array";
        return false;
    }
    slot_map m;
    for (const auto& shard : r.elements) {
        const reply* slots = field(shard, "slots");
        const reply* nodes = field(shard, "nodes");
        if (slots == nullptr || nodes == nullptr || slots->type != resp3_type::array ||
            nodes->type != resp3_type::array || slots->elements.size() % 2 != 0) {
            why = "CLUSTER SHARDS: a shard without slots or nodes";
            return false;
        }
        if (slots->elements.empty()) continue;  // a shard that serves nothing
        const reply* primary = nullptr;
        for (const auto& n : nodes->elements) {
            if (text_of(field(n, "role")) != "master") continue;
            if (primary == nullptr || text_of(field(*primary, "health")) == "failed")
                primary = &n;
        }
        if (primary == nullptr) continue;  // no primary: its slots stay unserved
        node_address a;
        const std::string_view endpoint = text_of(field(*primary, "endpoint"));
        a.host = host_or_seed(endpoint.empty() || endpoint == "?" ? text_of(field(*primary, "ip"))
                                                                  : endpoint,
                              seed_host);
        if (!(tls && port_of(field(*primary, "tls-port"), a.port)) &&
            !port_of(field(*primary, "port"), a.port)) {
            why = "CLUSTER SHARDS: a primary without a port";
            return false;
        }
        const auto index = m.add_node(a);
        for (std::size_t i = 0; i < slots->elements.size(); i += 2) {
            std::int64_t first = 0, last = 0;
            if (!slot_of(slots->elements[i], first) || !slot_of(slots->elements[i + 1], last) ||
                first > last) {
                why = "CLUSTER SHARDS: a bad slot range";
                return false;
            }
            std::fill(m.owner_.begin() + first, m.owner_.begin() + last + 1, index);
        }
    }
    out = std::move(m);
    return true;
}

bool slot_map::from_slots(const reply& r, std::string_view seed_host, slot_map& out,
                          std::string& why) {
    if (r.type != resp3_type::array) {
        why = "CLUSTER SLOTS: not an array";
        return false;
    }
    slot_map m;
    for (const auto& range : r.elements) {
        std::int64_t first = 0, last = 0;
        if (range.type != resp3_type::array || range.elements.size() < 3 ||
            !slot_of(range.elements[0], first) || !slot_of(range.elements[1], last) ||
            first > last || range.elements[2].type != resp3_type::array ||
            range.elements[2].elements.size() < 2) {
            why = "CLUSTER SLOTS: a bad slot range";
            return false;
        }
        const auto& primary = range.elements[2];
        node_address a;
        a.host = host_or_seed(text_of(&primary.elements[0]), seed_host);
        if (!port_of(&primary.elements[1], a.port)) {
            why = "CLUSTER SLOTS: a primary without a port";
            return false;
        }
        const auto index = m.add_node(a);
        std::fill(m.owner_.begin() + first, m.owner_.begin() + last + 1, index);
    }
    out = std::move(m);
    return true;
}

// ---- redirections ----

redirect parse_redirect(std::string_view text) {
    redirect r;
    auto word = [&]() {
        const auto end = text.find(' ');
        const auto w = text.substr(0, end);
        text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
        return w;
    };
    const auto kind = word();
    if (kind == "TRYAGAIN") {
        r.kind = redirect_kind::tryagain;
        return r;
    }
    if (kind == "CLUSTERDOWN") {
        r.kind = redirect_kind::clusterdown;
        return r;
    }
    if (kind != "MOVED" && kind != "ASK") return r;
    std::uint32_t slot = 0;
    if (!parse_int(word(), slot) || slot >= slot_count) return r;
    const auto target = parse_address(word());
    if (!target) return r;
    r.kind = kind == "MOVED" ? redirect_kind::moved : redirect_kind::ask;
    r.slot = static_cast<std::uint16_t>(slot);
    r.target = *target;
    return r;
}

redirect_policy::decision redirect_policy::on_error(std::string_view text,
                                                    const node_address& from,
                                                    clock::time_point now) {
    auto r = parse_redirect(text);
    decision d;
    switch (r.kind) {
    case redirect_kind::none: return d;  // the command's own error: deliver
    case redirect_kind::moved:
    case redirect_kind::ask:
        if (++redirects_ > s_.max_redirects || now >= s_.deadline) {
            d.action = what::fail;
            d.ec = error::cluster_down;
            d.refresh_map = true;
            return d;
        }
        if (r.target.host.empty()) r.target.host = from.host;
        d.target = std::move(r.target);
        if (r.kind == redirect_kind::moved) {
            d.action = what::retry_at;
            d.update_map = true;
            d.refresh_map = true;  // one slot moved: others may have too
        } else {
            d.action = what::ask_at;  // the map stays: the slot is still `from`'s
        }
        return d;
    case redirect_kind::tryagain:
    case redirect_kind::clusterdown: {
        auto l = later(now);
        l.refresh_map = r.kind == redirect_kind::clusterdown;
        return l;
    }
    }
    return d;
}

redirect_policy::decision redirect_policy::on_unreachable(clock::time_point now) {
    auto d = later(now);
    d.refresh_map = true;
    return d;
}

redirect_policy::decision redirect_policy::later(clock::time_point now) {
    decision d;
    const auto delay = backoff_.next();
    // Decided on the step, the longest the delay could be, so that the
    // answer does not depend on the draw.
    if (now + backoff_.step() >= s_.deadline) {
        d.action = what::fail;
        d.ec = error::cluster_down;
        return d;
    }
    ++retries_;
    d.action = what::retry_later;
    d.delay = delay;
    return d;
}

}  // namespace corolock::detail::cluster
