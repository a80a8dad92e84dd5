// What corolock status, break and list share (inspect_common.hpp), and how
// a lock's holder reads in text (cli.hpp: format_time, format_held_for,
// holder_text).
#include "inspect_common.hpp"

#include <corolock/printable.hpp>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <utility>

namespace corolock::cli {

namespace asio = boost::asio;

namespace {

// The holder record's fields as JSON members (",\"host\":...,\"since\":..."),
// null when the lock records none; with held_for_ms when asked.
std::string holder_json(const std::optional<lock_holder>& h, bool held_for) {
    if (!h)
        return std::string(",\"host\":null,\"pid\":null,\"label\":null,\"since\":null") +
               (held_for ? ",\"held_for_ms\":null" : "");
    return ",\"host\":" + printable_json(h->host) + ",\"pid\":" + std::to_string(h->pid) +
           ",\"label\":" + printable_json(h->label) + ",\"since\":" + printable_json(format_time(h->since)) +
           (held_for ? ",\"held_for_ms\":" + std::to_string(h->held_for.count()) : "");
}

std::string etcd_key_json(const detail::etcd::lock_key& k) {
    return "{\"owner\":" + printable_json(k.owner) + ",\"value\":" + printable_json(k.value) +
           ",\"create_revision\":" + std::to_string(k.create_revision) +
           ",\"mod_revision\":" + std::to_string(k.mod_revision) +
           ",\"lease\":" + std::to_string(k.lease) + holder_json(k.holder, false) + "}";
}

}  // namespace

std::string seconds(std::chrono::milliseconds d) {
    const auto ms = d.count();
    char buf[40];
    std::snprintf(buf, sizeof buf, "%s%lld.%03lld", ms < 0 ? "-" : "",
                  static_cast<long long>(std::llabs(ms) / 1000),
                  static_cast<long long>(std::llabs(ms) % 1000));
    return buf;
}

std::string plural_levels(std::int64_t n) {
    return std::to_string(n) + (n == 1 ? " level" : " levels");
}

int with_client(const common_options& o,
                const std::function<asio::awaitable<int>(client&)>& body) {
    return with_service<client>(
        [&](const asio::any_io_executor& ex) { return std::make_unique<client>(ex, tool_config(o)); },
        body);
}

asio::awaitable<error_code> first_check(client& c) { co_return co_await check_reachable(c); }
asio::awaitable<error_code> first_check(backend&) { co_return error_code{}; }
std::string cause_of(const client& c) { return c.last_error().message; }
std::string cause_of(const backend&) { return {}; }
bool pinged(const client&) { return true; }
bool pinged(const backend&) { return false; }

int with_etcd(const common_options& o,
              const std::function<asio::awaitable<int>(detail::etcd::admin&)>& body) {
    return with_service<detail::etcd::admin>(
        [&](const asio::any_io_executor& ex) { return make_etcd_admin(ex, o); }, body);
}

int with_store(const common_options& o, const std::string& doing,
               const std::function<asio::awaitable<int>(store_admin&)>& body) {
    return with_service<store_admin>(
        [&](const asio::any_io_executor& ex) { return make_store_admin(ex, o); },
        [&](store_admin& a) -> asio::awaitable<int> {
            if (auto ec = co_await a.connect(); ec)
                co_return report_redis_failure(o, doing, ec, a.last_error());
            co_return co_await body(a);
        });
}

std::string etcd_status_json(std::string_view name, const detail::etcd::admin_lock_status& st) {
    // As on Redis: 0 when not held, -1 without a live lease.
    const long long ttl_s = st.ttl.count();
    const long long ttl_ms = !st.held ? 0 : ttl_s < 0 ? -1 : ttl_s * 1000;
    std::string line = "{\"name\":" + printable_json(name) +
                       ",\"backend\":\"etcd\",\"kind\":\"mutex\",\"held\":" +
                       (st.held ? "true" : "false") +
                       ",\"owner\":" + printable_json(st.held ? st.holder.owner : "") +
                       ",\"ttl_ms\":" + std::to_string(ttl_ms) +
                       ",\"last_token\":" + std::to_string(st.held ? st.holder.mod_revision : 0) +
                       holder_json(st.held ? st.holder.holder : std::nullopt, true) +
                       ",\"holder\":" + (st.held ? etcd_key_json(st.holder) : "null") +
                       ",\"waiters\":[";
    for (std::size_t i = 0; i < st.waiters.size(); ++i) {
        if (i > 0) line += ',';
        line += etcd_key_json(st.waiters[i]);
    }
    return line + "],\"revision\":" + std::to_string(st.revision) + "}";
}

std::string store_status_json(std::string_view name, bool zk, const store_lock_status& st) {
    std::string line = "{\"name\":" + printable_json(name) + ",\"backend\":" +
                       (zk ? "\"zk\"" : "\"postgresql\"") +
                       ",\"kind\":\"mutex\",\"held\":" + (st.held ? "true" : "false") +
                       ",\"owner\":" + printable_json(st.held ? st.owner : "") +
                       ",\"last_token\":" + std::to_string(st.last_token) +
                       holder_json(st.held ? st.holder : std::nullopt, true) +
                       ",\"waiters\":" + std::to_string(st.waiters);
    if (zk) line += ",\"node\":" + (st.held ? printable_json(st.node) : std::string("null"));
    else line += ",\"session_pid\":" + (st.held ? std::to_string(st.session_pid) : std::string("null"));
    return line + "}";
}

std::chrono::system_clock::time_point delayed_until(const lock_status& st) {
    return std::chrono::time_point_cast<std::chrono::system_clock::duration>(
        std::chrono::system_clock::now() + st.delayed_for);
}

std::string status_json(std::string_view name, const lock_status& st) {
    const std::string holder = holder_json(st.holder, true);
    std::string line =
        "{\"name\":" + printable_json(name) + ",\"held\":" + (st.held ? "true" : "false") +
        ",\"owner\":" + printable_json(st.owner) + ",\"ttl_ms\":" + std::to_string(st.ttl.count()) +
        ",\"levels\":" + std::to_string(st.levels) +
        ",\"last_token\":" + std::to_string(st.last_token) + holder +
        ",\"kind\":" + printable_json(lock_type_name(st.type)) +
        ",\"queued\":" + std::to_string(st.queued) +
        ",\"capacity\":" + std::to_string(st.capacity) +
        ",\"permits_in_use\":" + std::to_string(st.permits_in_use) +
        ",\"holder_count\":" + std::to_string(st.holder_count) +
        ",\"lock_delay_ms\":" + std::to_string(st.lock_delay.count()) +
        ",\"in_lock_delay\":" + (st.delayed_for.count() > 0 ? "true" : "false") +
        ",\"delayed_for_ms\":" + std::to_string(st.delayed_for.count()) +
        ",\"delayed_until\":" +
        (st.delayed_for.count() > 0 ? printable_json(format_time(delayed_until(st))) : "null") +
        ",\"holders\":[";
    for (std::size_t i = 0; i < st.holders.size(); ++i) {
        const auto& h = st.holders[i];
        if (i > 0) line += ',';
        line += "{\"owner\":" + printable_json(h.owner) + ",\"levels\":" + std::to_string(h.levels) +
                ",\"permits\":" + std::to_string(h.permits) +
                ",\"ttl_ms\":" + std::to_string(h.ttl.count()) + holder_json(h.holder, true) + "}";
    }
    return line + "]}";
}

// RFC 3339 in UTC with milliseconds: 2026-11-25T19:03:18.123Z.
std::string format_time(std::chrono::system_clock::time_point t) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
    const std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    if (::gmtime_r(&secs, &tm) == nullptr) return "?";
    char buf[40];
    const auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03dZ", static_cast<int>(ms % 1000));
    return std::string(buf, n) + frac;
}

// "2d 3h 4m 5s", or "12.345s" under a minute: a job stuck for days reads so.
std::string format_held_for(std::chrono::milliseconds d) {
    auto ms = d.count();
    if (ms < 60 * 1000) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%lld.%03llds", static_cast<long long>(ms / 1000),
                      static_cast<long long>(ms % 1000));
        return buf;
    }
    auto s = ms / 1000;
    std::string out;
    const std::pair<long long, const char*> units[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
    for (const auto& [per, name] : units) {
        if (s >= per || (per == 1 && out.empty())) {
            if (!out.empty()) out += ' ';
            out += std::to_string(s / per) + name;
            s %= per;
        }
    }
    return out;
}

std::string holder_text(const lock_holder& h) {
    return printable(h.host) + ":" + std::to_string(h.pid);
}

}  // namespace corolock::cli
