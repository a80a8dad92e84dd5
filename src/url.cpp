// corolock/url.hpp: a URL read without connecting, by the scheme table
// (schemes.hpp) and each backend's own parser, as connect.cpp opens it.
#include <corolock/url.hpp>

#include "core/backend.hpp"  // left_out_backend
#include "core/credentials.hpp"
#include "core/url_authority.hpp"
#include "etcd/etcd_backend.hpp"
#include "redlock/redlock_url.hpp"
#include "schemes.hpp"
#ifdef COROLOCK_HAVE_POSTGRESQL
#include "pg/pg_admin.hpp"
#include "pg/pg_backend.hpp"
#endif
#ifdef COROLOCK_HAVE_ZOOKEEPER
#include "zk/url.hpp"
#endif

#include <boost/system/system_error.hpp>

#include <utility>

namespace corolock {

std::string url_scheme(std::string_view url) { return detail::scheme_of(url); }

url_service service_of_url(std::string_view url) {
    switch (detail::family_of(url)) {
        case detail::scheme_family::redis: return url_service::redis;
        case detail::scheme_family::redlock: return url_service::redlock;
        case detail::scheme_family::etcd: return url_service::etcd;
        case detail::scheme_family::zk: return url_service::zookeeper;
        case detail::scheme_family::postgresql: return url_service::postgresql;
        case detail::scheme_family::unknown: break;
    }
    return url_service::unknown;
}

std::string accepted_url_schemes() { return detail::accepted_schemes(); }

namespace {

// Appended piece by piece: g++ 12 at -O3 reports a false -Wstringop-overflow
// for "," + string (GCC bug 105329).
void append_endpoint(std::string& list, std::string_view endpoint) {
    if (!list.empty()) list += ',';
    list.append(endpoint);
}

error_code describe_etcd(std::string_view url, url_description& out, std::string& why) {
    detail::etcd::backend_options eo;
    if (auto ec = detail::etcd::parse_url(url, eo, why); ec) return ec;
    for (const auto& ep : eo.gateway.endpoints) append_endpoint(out.endpoints, ep);
    return {};
}

error_code describe_zk([[maybe_unused]] std::string_view url,
                       [[maybe_unused]] url_description& out, std::string& why) {
#ifdef COROLOCK_HAVE_ZOOKEEPER
    detail::zk::zk_options zo;
    if (auto ec = detail::zk::parse_url(url, zo, why); ec) return ec;
    out.endpoints = zo.hosts;
    out.authenticated = zo.authenticated();
    return {};
#else
    why = detail::left_out_backend("zk");
    return error::not_supported;
#endif
}

error_code describe_pg([[maybe_unused]] std::string_view url,
                       [[maybe_unused]] url_description& out, std::string& why) {
#ifdef COROLOCK_HAVE_POSTGRESQL
    detail::pg::backend_options po;
    if (auto ec = detail::pg::parse_url(url, po, why); ec) return ec;
    out.endpoints = detail::pg::describe_server(*po.url);
    if (!po.url->tls_warning.empty()) out.warnings.push_back(po.url->tls_warning);
    return {};
#else
    why = detail::left_out_backend("postgresql");
    return error::not_supported;
#endif
}

error_code describe_redlock(std::string_view url, url_description& out, std::string& why) {
    try {
        auto parsed = detail::parse_redlock_url(url);
        out.nodes = std::move(parsed.nodes);
        out.node_timeout =
            std::chrono::duration_cast<std::chrono::milliseconds>(parsed.options.node_timeout);
        for (const auto& node : out.nodes) {
            detail::url_pieces p;
            if (!detail::split_url_pieces(node, p)) continue;
            append_endpoint(out.endpoints, p.hosts);
        }
        return {};
    } catch (const boost::system::system_error& e) {
        // The parser's message never holds the password.
        why = e.what();
        return e.code();
    }
}

}  // namespace

error_code describe_url(std::string_view url, url_description& out, std::string& why) {
    out = {};
    why.clear();
    out.service = service_of_url(url);
    switch (out.service) {
        case url_service::etcd: return describe_etcd(url, out, why);
        case url_service::zookeeper: return describe_zk(url, out, why);
        case url_service::postgresql: return describe_pg(url, out, why);
        case url_service::redlock: return describe_redlock(url, out, why);
        case url_service::redis:
            why = "a Redis URL: config::parse_url reads it";
            return error::invalid_url;
        case url_service::unknown: break;
    }
    why = "unsupported URL scheme '";
    why += detail::scheme_of(url);
    why += "': expected ";
    why += detail::accepted_schemes();
    return error::invalid_url;
}

std::string url_without_credentials(std::string_view url) {
    detail::url_pieces p;
    if (!detail::split_url_pieces(url, p))
        return url.find('@') == std::string_view::npos ? std::string(url) : std::string();
    // An '@' past the host: a password holding '/', '?' or '#' unencoded.
    if (p.tail.find('@') != std::string_view::npos) return std::string();
    // The query may carry credentials (a Sentinel URL's sentinel_user and
    // sentinel_password, a PostgreSQL URL's password and sslpassword, the
    // key %-escaped or not): dropped. Split leniently, by hand, rather than
    // by parse_url_query (core/url.hpp), which refuses a malformed query:
    // what is scrubbed here may be a URL the parsers refused.
    std::string rest(p.tail);
    if (const auto q = rest.find('?'); q != std::string::npos) {
        std::string kept;
        std::string_view query = std::string_view(rest).substr(q + 1);
        while (!query.empty()) {
            const auto amp = query.find('&');
            const auto item = query.substr(0, amp);
            const auto key = item.substr(0, item.find('='));
            if (!detail::is_credential_query_key(detail::percent_decode(key)) && !item.empty())
                kept.append(kept.empty() ? "" : "&").append(item);
            if (amp == std::string_view::npos) break;
            query.remove_prefix(amp + 1);
        }
        rest.erase(q);
        if (!kept.empty()) rest.append("?").append(kept);
    }
    std::string out(p.head);
    out.append(p.hosts).append(rest);
    return out;
}

std::optional<std::string> url_with_password(std::string_view url, std::string_view password) {
    detail::url_pieces p;
    if (!detail::split_url_pieces(url, p) || p.userinfo.empty() || p.userinfo.front() == ':')
        return std::nullopt;
    std::string out(p.head);
    out.append(p.userinfo.substr(0, p.userinfo.find(':')))
        .append(":")
        .append(detail::percent_encode(password))
        .append("@")
        .append(p.hosts)
        .append(p.tail);
    return out;
}

}  // namespace corolock
