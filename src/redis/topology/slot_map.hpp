// Redis Cluster routing, sans-I/O: the hash slot of a key, the slot map
// (from CLUSTER SHARDS, or CLUSTER SLOTS on servers without it), the
// redirection errors (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) and what to do
// about them within a command's deadline. No socket, no timer: the cluster
// backend feeds replies and the clock in, and acts on the answers.
#pragma once

#include "core/backoff.hpp"

#include <corolock/error.hpp>
#include <corolock/reply.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corolock::detail::cluster {

inline constexpr std::uint16_t slot_count = 16384;

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), as the cluster uses.
std::uint16_t crc16(std::string_view data) noexcept;

// The hash slot of a key: of its hash tag (the bytes between the first '{'
// and the first '}' after it) when that is not empty, else of the whole key.
std::uint16_t key_slot(std::string_view key) noexcept;

struct node_address {
    std::string host;
    std::uint16_t port = 0;
    friend bool operator==(const node_address&, const node_address&) = default;
};
std::string to_string(const node_address& a);
// "host:port" with the port after the last ':' (an IPv6 host keeps its
// colons). nullopt when there is no valid port. The host may be empty: the
// server does not know its own endpoint, and the sender's host is meant.
std::optional<node_address> parse_address(std::string_view text);

// Which primary serves each slot.
class slot_map {
public:
    static constexpr std::uint16_t no_node = 0xffff;

    // From a CLUSTER SHARDS reply (RESP3 maps, or RESP2 arrays of key, value
    // pairs). A shard's primary is its "master" node that is not "failed"
    // (else its first "master"); its address is "endpoint" (or "ip" when the
    // endpoint is unknown) and "tls-port" when `tls` and given, else "port".
    // `seed_host` stands in for an endpoint the server does not know ("?"
    // or empty). False with `why` set when the reply is malformed.
    static bool from_shards(const reply& r, bool tls, std::string_view seed_host, slot_map& out,
                            std::string& why);
    // From a CLUSTER SLOTS reply: {start, end, {host, port, id, ...}, replicas...}.
    static bool from_slots(const reply& r, std::string_view seed_host, slot_map& out,
                           std::string& why);

    // The primary of a slot; null when no node serves it.
    const node_address* primary_of(std::uint16_t slot) const noexcept;
    const node_address* primary_of_key(std::string_view key) const noexcept {
        return primary_of(key_slot(key));
    }
    // A MOVED answer: the slot is served by `to` now.
    void assign(std::uint16_t slot, const node_address& to);
    // The primaries serving at least one slot.
    std::vector<node_address> primaries() const;
    // Every slot has a primary.
    bool covers_all() const noexcept;
    bool empty() const noexcept { return nodes_.empty(); }

private:
    std::uint16_t add_node(const node_address& a);
    std::array<std::uint16_t, slot_count> owner_ = filled();
    std::vector<node_address> nodes_;
    static std::array<std::uint16_t, slot_count> filled() noexcept {
        std::array<std::uint16_t, slot_count> a;
        a.fill(no_node);
        return a;
    }
};

// A server's refusal that names the cluster's state rather than the command.
enum class redirect_kind : std::uint8_t {
    none,         // not a redirection: the command ran (or failed on its own)
    moved,        // the slot lives on `target` now: update the map
    ask,          // the slot is migrating: this key is on `target`, ask once
    tryagain,     // a multi-key command over a slot being migrated: retry later
    clusterdown,  // the slot has no serving primary now (failover, or down)
};
struct redirect {
    redirect_kind kind = redirect_kind::none;
    std::uint16_t slot = 0;
    node_address target;  // moved and ask; an empty host means the sender's
};
// Parses an error reply's text ("MOVED 3999 127.0.0.1:6381", "ASK ...",
// "TRYAGAIN ...", "CLUSTERDOWN ..."). kind none for anything else,
// including a MOVED or ASK whose slot or address does not parse.
redirect parse_redirect(std::string_view error_text);

// What to do with one command's answer: the retry decision. One per command
// (it counts the command's redirections); sans-I/O, the caller's clock.
class redirect_policy {
public:
    using clock = std::chrono::steady_clock;

    struct settings {
        clock::time_point deadline;  // the command's own
        clock::duration backoff_min = std::chrono::milliseconds(10);
        clock::duration backoff_max = std::chrono::milliseconds(200);
        // MOVED and ASK in a row before giving up: a map that keeps
        // changing under one command is a cluster that is reconfiguring.
        int max_redirects = 16;
    };

    enum class what : std::uint8_t {
        deliver,      // hand the answer to the caller
        retry_at,     // send again to `target` now (after MOVED: with the map updated)
        ask_at,       // send ASKING then the command to `target`, once
        retry_later,  // send again (to the slot's primary per the map) after `delay`
                      // (a jittered backoff: core/backoff.hpp)
        fail,         // give up: `ec` (cluster_down)
    };
    struct decision {
        what action = what::deliver;
        node_address target;
        clock::duration delay{};
        bool update_map = false;   // MOVED: assign(slot, target) first
        bool refresh_map = false;  // re-read the whole map in the background
        error_code ec;
    };

    explicit redirect_policy(settings s) noexcept
        : s_(s), backoff_(s.backoff_min, s.backoff_max) {}

    // An error reply's text from `from` (whose host stands in for an empty
    // one in the redirection). Not an error reply: pass decide_ok().
    decision on_error(std::string_view text, const node_address& from, clock::time_point now);
    // The node could not be reached or the connection dropped before an
    // answer: worth a retry (on the refreshed map) if time remains.
    decision on_unreachable(clock::time_point now);

    int redirects() const noexcept { return redirects_; }
    int retries() const noexcept { return retries_; }

private:
    decision later(clock::time_point now);
    settings s_;
    int redirects_ = 0;
    int retries_ = 0;
    backoff backoff_;
};

}  // namespace corolock::detail::cluster
