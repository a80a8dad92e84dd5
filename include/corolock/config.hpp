// Client configuration: an aggregate of plain values and steady_clock
// durations. Zero durations mean "use the documented default".
#pragma once

#include <corolock/export.hpp>

#include <corolock/error.hpp>
#include <corolock/lock_holder.hpp>  // max_holder_label_length

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spdlog { class logger; }

namespace corolock {

class observer;

struct COROLOCK_API tls_config {
    bool enabled = false;          // rediss:// sets this
    bool verify_peer = true;       // verification is on unless turned off explicitly
    std::string ca_file;           // PEM bundle; empty means the system's default paths
    std::string cert_file;         // client certificate (mutual TLS), optional
    std::string key_file;          // client private key, optional
    // The name the Redis servers' certificates must carry, also sent as SNI
    // (unless it is an IP address): the server of redis://, each Cluster
    // node, and the primary a Sentinel names (and the Sentinels themselves
    // unless sentinel_server_name is set). Empty: the host connected to,
    // which for a Sentinel's primary or a Cluster node is the address a
    // peer announced (docs/security.md, "Sentinel and TLS: the trust model").
    std::string server_name;
    // rediss+sentinel:// only: the name the Sentinels' certificates must
    // carry (and SNI to them). Empty: server_name when that is set (the
    // behaviour before this field existed), else each Sentinel's host as
    // configured (the URL's host list).
    std::string sentinel_server_name;

    // Whom a connection is to, for expected_name.
    enum class peer {
        data_node,  // a Redis server: single, Cluster node, Sentinel's primary
        sentinel,   // a Sentinel of config::nodes
    };
    // The one rule for the name a TLS connection's certificate is checked
    // against and its SNI: `host` is the host the connection goes to (the
    // configured one, or the address a Sentinel or Cluster announced).
    // data_node: server_name, else host. sentinel: sentinel_server_name,
    // else server_name, else host.
    std::string expected_name(peer to, std::string_view host) const;

    // Sets one option by the name it has in a rediss:// URL's query:
    // tls_ca, tls_cert, tls_key (file names), tls_server_name,
    // sentinel_tls_server_name, and tls_verify (yes or no). The CLI's
    // --tls-* options (and --sentinel-tls-server-name) set the same fields
    // through it. An unknown key or a bad value gives error::invalid_argument
    // and a why that names the key (never the value). Leaves `enabled` alone.
    error_code set(std::string_view key, std::string_view value, std::string& why);
};

// One server's address, as in a URL's host list.
struct endpoint {
    std::string host;
    std::uint16_t port = 0;
    friend bool operator==(const endpoint&, const endpoint&) = default;
};

// How the Redis servers are deployed. config::from_url sets it from the
// URL's scheme; docs/topologies.md says what each guarantees.
enum class topology {
    single,    // redis://, rediss://: host and port name the one server
    sentinel,  // redis+sentinel://: nodes are the Sentinels, service_name the
               // primary they monitor; the client follows its failovers
    cluster,   // redis+cluster://: nodes are seed nodes of a Redis Cluster
};

// The default ports of a URL's host without one.
inline constexpr std::uint16_t default_redis_port = 6379;
inline constexpr std::uint16_t default_sentinel_port = 26379;

// What config::with_defaults() puts in the fields below left zero.
struct config_defaults {
    static constexpr std::chrono::seconds connect_timeout{1};
    static constexpr std::chrono::seconds command_timeout{3};
    static constexpr std::chrono::seconds health_check_interval{2};
    static constexpr std::chrono::milliseconds reconnect_min{50};
    static constexpr std::chrono::seconds reconnect_max{2};
    static constexpr std::size_t max_bulk_length = 512u * 1024 * 1024;  // the server's proto-max-bulk-len
    static constexpr std::size_t max_nesting_depth = 32;
    static constexpr std::size_t max_aggregate_size = 16u * 1024 * 1024;
    static constexpr std::size_t max_reply_size = 64u * 1024 * 1024;
};

struct COROLOCK_API config {
    // The server, when mode is topology::single. Unused otherwise.
    std::string host = "127.0.0.1";
    std::uint16_t port = default_redis_port;
    topology mode = topology::single;
    // topology::sentinel: the Sentinels to ask for the primary, in the order
    // tried. topology::cluster: seed nodes to read the slot map from. Empty
    // for topology::single.
    std::vector<endpoint> nodes;
    // topology::sentinel: the monitored primary's name (the URL's first path
    // segment), as in the Sentinels' `sentinel monitor NAME ...`.
    std::string service_name;
    // Credentials for the Sentinels themselves, when they have any: the
    // URL's query keys sentinel_user and sentinel_password. username and
    // password below are for the Redis servers.
    std::string sentinel_username;
    std::string sentinel_password;
    std::string username;          // ACL user; empty means "default"
    std::string password;          // empty means no AUTH
    int database = 0;              // SELECT after HELLO when non-zero
    std::string client_name;       // CLIENT SETNAME (via HELLO SETNAME) when set
    // Who this client is, for people reading a held lock (corolock status,
    // corolock list, async_lock_status): stored with the host name and the
    // process id in each lock this client's handles acquire. Free text, at
    // most max_holder_label_length bytes (longer is cut); the CLI's run
    // puts its command line here.
    std::string holder_label;
    tls_config tls;

    using duration = std::chrono::steady_clock::duration;
    // Zero: config_defaults (as every zero field below). One connection attempt (resolve + TCP + TLS + HELLO +
    // SELECT) may take at most max(connect_timeout, 5 s). A client that has
    // never connected fails its commands with error::never_connected once
    // connect_timeout has passed since it started, and fails new ones at once
    // until a connection succeeds; client::last_error() names the last
    // attempt's cause. Raise it to wait longer for a server that is starting.
    duration connect_timeout{};
    // Before the first connection: when an attempt finds nothing listening
    // (ECONNREFUSED from every address the host resolves to), fail the
    // waiting commands at once with error::never_connected (last_error()
    // says "connection refused") instead of retrying until connect_timeout
    // has passed; later commands fail at once until a connection succeeds,
    // and the reconnecting goes on. For tools that answer at once, as
    // redis-cli does (the corolock tool sets it); false, the default, suits
    // a service started alongside its Redis. Applies to the single server;
    // to Sentinel when every Sentinel refuses (or the primary named does);
    // to a Cluster when no seed or node can be connected to for its first
    // slot map (the commands waiting for it fail then, not at their timeout).
    bool fail_fast_when_refused = false;
    duration command_timeout{};        // per command, from submission
    duration health_check_interval{};  // of read silence before a PING
    duration reconnect_min{};          // the first backoff step
    duration reconnect_max{};          // the backoff cap

    std::size_t max_bulk_length = 0;
    std::size_t max_nesting_depth = 0;
    std::size_t max_aggregate_size = 0;  // elements
    // The memory one reply may take once parsed: sizeof(corolock::reply) per
    // value (every element of every aggregate) plus the text it keeps. The
    // two limits above bound one string and one aggregate; this bounds the
    // whole reply, so a server cannot make the client hold hundreds of
    // megabytes with many small elements. The lock layer's
    // replies are tiny: a client used only for locks can set 1 MiB.
    std::size_t max_reply_size = 0;

    // Logger for connection events. Null means corolock's own quiet logger
    // (level off unless COROLOCK_LOG_LEVEL names one).
    std::shared_ptr<spdlog::logger> logger;

    // Told about the client's lock events as they happen (see metrics.hpp).
    // Null: none, and the events cost one branch each.
    std::shared_ptr<corolock::observer> observer;

    // Parses redis://[user[:password]@]host[:port][/db][?key=value&...] and
    // rediss://... The query holds TLS options (see tls_config::set), for
    // rediss:// only. Percent-escapes in user, password and query are
    // decoded; an IPv6 host goes in brackets.
    //
    // redis+sentinel://[user:pass@]host[:port][,host[:port]...]/SERVICE[/db]
    // (and rediss+sentinel://) names the Sentinels (port 26379 by default)
    // and the service; its query may also hold sentinel_user,
    // sentinel_password and (rediss+sentinel:// only)
    // sentinel_tls_server_name. redis+cluster://[user:pass@]host[:port][,...] (and
    // rediss+cluster://) names seed nodes (port 6379 by default); a cluster
    // has only database 0. Throws
    // boost::system::system_error(error::invalid_url) whose what() names the
    // problem.
    static config from_url(std::string_view url);

    // Non-throwing form. On failure returns error::invalid_url, leaves out
    // untouched and puts the reason in why.
    static error_code parse_url(std::string_view url, config& out, std::string& why);

    // The same configuration with every zero field replaced by its default.
    config with_defaults() const;

    // Tight reply limits for a client used only for locks: the lock layer's
    // replies are short arrays of lock names, tokens and counters, so a
    // server cannot make such a client hold more than about a megabyte.
    // max_bulk_length 64 KiB (lock names are at most 512 bytes),
    // max_aggregate_size 1024, max_nesting_depth 4, max_reply_size 1 MiB;
    // in Cluster mode (set the mode first) 32768 elements and 8 MiB, for
    // the slot map of a cluster whose slots are fragmented. Limits already
    // set are left alone. Not for clients that also read large values
    // through async_exec. A backend made from a URL or a config, and the
    // corolock tool, use these limits by default.
    config& use_lock_only_limits() noexcept;

    // Checks values that defaults cannot fix (an empty host, a negative
    // duration, reconnect_min > reconnect_max, a Sentinel or Cluster mode
    // without nodes, a Sentinel mode without a service name). Empty why on
    // success.
    error_code validate(std::string& why) const;
};

}  // namespace corolock
