// Redis Sentinel (topology::sentinel): finding the primary and following
// its failovers. docs/topologies.md, "Redis Sentinel", describes the whole.
//
// Two parts:
//  - the decisions, sans-I/O (namespace sentinel): reading the Sentinels'
//    and the servers' replies, and putting a failed discovery into words;
//  - sentinel_link: one small connection to a Sentinel (resolve, TCP, TLS,
//    HELLO 3 with the Sentinel credentials), used by the client's connect
//    step to ask for the primary and by its +switch-master subscription.
//    On the client's strand; every call is bounded by the caller.
#pragma once

#include <corolock/config.hpp>
#include <corolock/reply.hpp>
#include "core/inner_executor.hpp"
#include "redis/resp/resp3_parser.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/strand.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace corolock {
class command;
}

namespace corolock::detail {

namespace sentinel {

// "host:port", an IPv6 host in brackets.
std::string to_string(const endpoint& ep);

// The reply to SENTINEL get-master-addr-by-name.
struct master_addr {
    enum class status {
        ok,               // ep holds the primary's address
        unknown_service,  // a nil reply: this Sentinel monitors no such name
        refused,          // an error reply (ACL, authentication, ...): why
        bad_reply,        // anything else: why
    };
    status result = status::bad_reply;
    endpoint ep;
    std::string why;
};
master_addr parse_master_addr(const reply& r);

// The reply to ROLE: true when it names a master; `role` gets the role the
// server claims ("master", "slave", "sentinel"), or a description of a
// reply that is not a ROLE reply.
bool role_is_master(const reply& r, std::string& role);

// A pub/sub message of the +switch-master channel for `service`: the new
// primary's address. nullopt for any other push, another service's switch,
// or a payload that does not parse. The payload is
// "<name> <old-ip> <old-port> <new-ip> <new-port>".
std::optional<endpoint> parse_switch_master(const reply& push, std::string_view service);

// A -READONLY reply: the server we write to has been demoted to a replica.
bool is_readonly_error(std::string_view message) noexcept;

// What each Sentinel (or the primary it named) said during one discovery,
// in order, for the log and client::last_error():
// "sentinel 127.0.0.1:26379: service unknown; 127.0.0.1:7001 is a replica".
class discovery_report {
public:
    // A Sentinel that did not name a primary.
    void sentinel_failed(const endpoint& sentinel, std::string_view why);
    // The primary a Sentinel named could not be used.
    void primary_failed(const endpoint& primary, std::string_view why);
    bool empty() const noexcept { return entries_.empty(); }
    // True when every Sentinel answered and none knew the service: the
    // service name is wrong (or not yet monitored), and retrying at once
    // will not help.
    bool all_unknown(std::size_t sentinels) const noexcept;
    std::string text() const;
    void clear() noexcept {
        entries_.clear();
        unknown_ = 0;
    }
    void note_unknown() noexcept { ++unknown_; }

private:
    std::vector<std::string> entries_;
    std::size_t unknown_ = 0;
};

}  // namespace sentinel

// One connection to a Sentinel. Not thread-safe: on the client's strand.
class sentinel_link {
public:
    using strand_type = boost::asio::strand<inner_executor>;
    template <class T> using awaitable = boost::asio::awaitable<T, strand_type>;
    using error_code = boost::system::error_code;

    // `ssl` is the client's TLS context (null without TLS): a
    // rediss+sentinel:// client talks TLS to its Sentinels too. `cfg`
    // provides the Sentinel credentials, the TLS server name and the reply
    // limits; it must outlive the link.
    sentinel_link(boost::asio::any_io_executor ex, boost::asio::ssl::context* ssl,
                  const config& cfg);
    ~sentinel_link();

    // Resolves, connects, shakes hands (TLS) and sends HELLO 3 with the
    // Sentinel credentials. On failure, `why` says what went wrong in
    // plain words. Bounded by the caller (|| a timer): cancellation closes.
    awaitable<error_code> open(const endpoint& ep, std::string& why);
    // Sends one command and returns its reply (pushes that arrive first are
    // skipped).
    awaitable<std::pair<error_code, reply>> call(const command& cmd);
    // Sends a command without waiting for anything.
    awaitable<error_code> send(const command& cmd);
    // The next reply of any kind (a subscription's pushes).
    awaitable<std::pair<error_code, reply>> read();
    // Closes the connection; pending operations end with operation_aborted.
    void close() noexcept;
    bool is_open() const noexcept;

private:
    struct stream;
    boost::asio::any_io_executor executor_;
    boost::asio::ssl::context* ssl_;
    const config& cfg_;
    boost::asio::ip::tcp::resolver resolver_;
    std::shared_ptr<stream> stream_;
    resp3_parser parser_;
};

}  // namespace corolock::detail
