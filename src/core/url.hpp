// The one grammar of corolock's URLs, shared by every backend's parser
// (redis/connection/config.cpp for Redis, Sentinel and Cluster, redlock/redlock_url.cpp,
// etcd/etcd_url.cpp, zk/url.cpp):
//
//   scheme://[user[:password]@]host[:port][,host[:port]...][/path][?key=value[&key=value...]]
//
// Each parser keeps only what is its own: which schemes, whether a host
// needs a port, what the path means and which query keys exist. The rules
// they share live here once: the characters a URL may hold, where the
// authority ends (core/url_authority.hpp), that no fragment is taken, how
// user information and query values are %-decoded (core/url_text.hpp), what
// a host and a port are, and that a query key is given once.
//
// Written by hand, not on Boost.URL (Debian 12's Boost 1.81 has it): a host
// list such as "a:2379,b:2379" is no RFC 3986 authority (Boost.URL takes
// "2379,b:2379" for a port and refuses it), and that list is the heart of
// the Sentinel, Cluster, RedLock, etcd and ZooKeeper URLs. PostgreSQL URLs
// are read by libpq, whose grammar differs (pg/protocol.cpp only finds
// their secrets), so pg takes only the text rules from here.
//
// Every message names the part that is wrong and never echoes the user
// information, nor any text that may be a password. Not installed.
#pragma once

#include "core/url_authority.hpp"
#include "core/url_text.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corolock::detail {

// A URL cut into its parts, nothing decoded.
struct url_parts {
    std::string_view scheme;     // before "://", as written (compare with iequals)
    std::string_view userinfo;   // before the authority's last '@', without it
    bool has_userinfo = false;   // an '@' was there (userinfo may still be empty)
    std::string_view hosts;      // the host list, after that '@'
    std::string_view path;       // "" or from the first '/' on, without the query
    std::string_view query;      // after '?', without it ("" when there is none)
};

// scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), RFC 3986, 3.1.
bool is_url_scheme(std::string_view s) noexcept;

// Splits `url`, refusing: whitespace or a control character (the offset is
// named), no "scheme://" (text before a "://" that is no scheme is not
// echoed: "user:secret@host/x://" holds a password), an '@' after the
// authority (misplaced_at_message), and a fragment ('#'). `expected` (such
// as "redis://host[:port]") completes the "no scheme" message.
bool split_url(std::string_view url, std::string_view expected, url_parts& out, std::string& why);

// user[:password], each %-decoded strictly. A message names the part with
// a bad escape, never its text.
struct url_credentials {
    std::string user;
    std::string password;
    bool has_password = false;  // a ':' was there (the password may be empty)
};
bool decode_userinfo(std::string_view userinfo, url_credentials& out, std::string& why);

// One host[:port] of a host list. A host is a DNS or /etc/hosts name
// (letters, digits, '-', '.', '_'), an IPv4 address, or an IPv6 address in
// brackets; a port is 1 to 65535. Without a port the host gets `fallback`,
// or, with none, it is refused with "each host needs a port" (the caller's
// `example` appended, as "etcd://host:2379[,host:port...]").
struct url_host {
    std::string host;         // without brackets
    std::uint16_t port = 0;
    std::string_view text;    // the item as written ("[::1]:2379")
};
bool parse_url_host(std::string_view text, std::optional<std::uint16_t> fallback,
                    std::string_view example, url_host& out, std::string& why);

// The comma-separated host list, each item as parse_url_host reads it; an
// empty list or an empty item is refused. In a list of several, a message
// says which host: "host 3 of the URL's host list: ...".
bool parse_url_hosts(std::string_view hosts, std::optional<std::uint16_t> fallback,
                     std::string_view example, std::vector<url_host>& out, std::string& why);

// One key=value of the query, both %-decoded strictly.
struct url_param {
    std::string key;
    std::string value;
    std::string_view text;  // the item as written, for a parser that passes it on
};

// The query's items, in order. Refused: an empty item ("a=1&&b=2"), an item
// without '=', a bad %-escape, a key given twice. Values are never echoed
// (a secret may sit in the wrong key); keys are, made printable.
bool parse_url_query(std::string_view query, std::vector<url_param>& out, std::string& why);

// A query value of whole milliseconds from min to max, as every backend's
// timeouts are given; the message names the key and the bounds.
bool parse_url_milliseconds(const url_param& p, std::chrono::milliseconds min,
                            std::chrono::milliseconds max, std::chrono::milliseconds& out,
                            std::string& why);

// "unknown URL option 'KEY' (known: ...)", the key cut to 32 bytes and made
// printable.
std::string unknown_url_option(std::string_view key, std::string_view known);

}  // namespace corolock::detail
