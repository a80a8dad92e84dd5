#include "pg/pg_admin.hpp"
#include "pg/pg_backend.hpp"

#include "core/admin_call.hpp"
#include "core/glob_match.hpp"
#include "core/holder_record.hpp"
#include "core/inner_executor.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <libpq-fe.h>

#include <set>
#include <utility>

namespace corolock::detail::pg {

namespace asio = boost::asio;

std::string describe_server(const url_parts& url) {
    PQconninfoOption* opts = PQconninfoParse(url.conninfo.c_str(), nullptr);
    if (opts == nullptr) return "the server the URL names";
    std::string host, hostaddr, port;
    for (auto* o = opts; o->keyword != nullptr; ++o) {
        const std::string_view key = o->keyword;
        const std::string value = o->val != nullptr ? o->val : "";
        if (key == "host") host = value;
        else if (key == "hostaddr") hostaddr = value;
        else if (key == "port") port = value;
    }
    PQconninfoFree(opts);
    if (host.empty()) host = hostaddr;
    if (host.empty()) host = "localhost";
    if (port.empty()) port = "5432";
    // Several hosts, and one port for all or one each.
    std::string out;
    std::size_t h = 0, p = 0;
    for (bool more = true; more;) {
        const auto hc = host.find(',', h), pc = port.find(',', p);
        if (!out.empty()) out += ',';
        const auto one = host.substr(h, hc == std::string::npos ? hc : hc - h);
        const bool v6 = one.find(':') != std::string::npos;
        out += v6 ? "[" + one + "]" : one;
        out += ':';
        out += port.substr(p, pc == std::string::npos ? pc : pc - p);
        more = hc != std::string::npos;
        h = hc + 1;
        if (pc != std::string::npos) p = pc + 1;
    }
    return out;
}

admin::admin(asio::any_io_executor ex, std::shared_ptr<const url_parts> url,
             std::chrono::milliseconds request_timeout)
    : strand_(asio::make_strand(inner_executor(std::move(ex)))),
      url_(std::move(url)),
      request_timeout_(request_timeout) {}

admin::~admin() { stop(); }

void admin::stop() noexcept {
    if (conn_) conn_->close(error::client_stopped);
}

asio::awaitable<error_code> admin::connect() {
    return asio::co_spawn(
        strand_,
        [this]() -> asio::awaitable<error_code> {
            conn_ = std::make_shared<connection>(strand_, url_);
            co_return co_await conn_->connect(request_timeout_, why_);
        },
        asio::use_awaitable);
}

asio::awaitable<std::tuple<error_code, admin_lock_status>> admin::status(std::string name) {
    return asio::co_spawn(
        strand_,
        [this, name = std::move(name)]() -> asio::awaitable<std::tuple<error_code, admin_lock_status>> {
            co_return co_await read_status(name, connection::clock::now() + request_timeout_);
        },
        asio::use_awaitable);
}

asio::awaitable<std::tuple<error_code, admin_lock_status>> admin::read_status(
    const std::string& name, connection::clock::time_point deadline) {
    using result = std::tuple<error_code, admin_lock_status>;
    if (!conn_ || !conn_->usable()) co_return result{error::not_connected, {}};
    const answer sessions = co_await conn_->exec(lock_sessions(name), deadline);
    const answer row = co_await conn_->exec(lock_row(name), deadline);
    admin_lock_status st;
    if (auto ec = decide_status(sessions, row, st.report); ec) {
        why_ = scrub(!sessions.ok() ? sessions.message : row.message, *url_);
        co_return result{ec, {}};
    }
    if (st.report.held && !st.report.holder.empty())
        st.holder = parse_holder_record(st.report.holder, st.report.server_now_us);
    co_return result{error_code{}, std::move(st)};
}

asio::awaitable<std::tuple<error_code, admin_lock_list>> admin::list(lock_list_options o) {
    return asio::co_spawn(
        strand_,
        [this, o = std::move(o)]() mutable -> asio::awaitable<std::tuple<error_code, admin_lock_list>> {
            using result = std::tuple<error_code, admin_lock_list>;
            using steady = connection::clock;
            if (!conn_ || !conn_->usable()) co_return result{error::not_connected, {}};
            o = with_list_defaults(std::move(o), 1000);  // names read 1000 a page
            const auto end = steady::now() + o.max_time;
            admin_lock_list out;
            const answer keys = co_await conn_->exec(granted_keys(), steady::now() + request_timeout_);
            if (!keys.ok()) {
                why_ = scrub(keys.message, *url_);
                co_return result{error_of(keys), std::move(out)};
            }
            std::set<std::pair<std::string, std::string>> granted;  // (classid, objid)
            for (const auto& row : keys.rows)
                if (row.size() == 2 && row[0] && row[1]) granted.emplace(*row[0], *row[1]);
            if (granted.empty()) co_return result{error_code{}, std::move(out)};
            // The names page by page (count_per_step, max_steps), and each
            // whose key is granted read as status() reads it; the bounds are
            // looked at between reads, each read has its own.
            std::string after;
            for (std::size_t step = 0;; ++step) {
                if (step == o.max_steps || steady::now() >= end) {
                    out.truncated = true;
                    break;
                }
                const answer names = co_await conn_->exec(lock_names(after, o.count_per_step),
                                                          steady::now() + request_timeout_);
                // 42P01: the table was never made, so no lock was ever taken.
                if (!names.ok() && names.sqlstate == "42P01") break;
                if (!names.ok()) {
                    why_ = scrub(names.message, *url_);
                    co_return result{error_of(names), std::move(out)};
                }
                for (const auto& row : names.rows) {
                    if (row.empty() || !row[0]) continue;
                    after = *row[0];
                    if (!o.pattern.empty() && !glob_match(o.pattern, after)) continue;
                    const auto key = advisory_key(after);
                    if (!granted.count({std::to_string(key_classid(key)),
                                        std::to_string(key_objid(key))}))
                        continue;
                    if (steady::now() >= end || out.locks.size() == o.max_locks) {
                        out.truncated = true;
                        co_return result{error_code{}, std::move(out)};
                    }
                    auto [ec, st] = co_await read_status(after, steady::now() + request_timeout_);
                    if (ec) co_return result{ec, std::move(out)};
                    if (st.report.held) out.locks.push_back({after, std::move(st)});
                }
                if (names.rows.size() < o.count_per_step) break;  // the last page
            }
            co_return result{error_code{}, std::move(out)};
        },
        asio::use_awaitable);
}

asio::awaitable<std::tuple<error_code, admin_lock_status>> admin::break_lock(
    std::string name, std::string only_owner) {
    return asio::co_spawn(
        strand_,
        [this, name = std::move(name), only_owner = std::move(only_owner)]()
            -> asio::awaitable<std::tuple<error_code, admin_lock_status>> {
            using result = std::tuple<error_code, admin_lock_status>;
            // A re-entry or a new tenure between the read and the break
            // changes the fence: read again, a few times at most.
            for (int attempt = 0; attempt < 3; ++attempt) {
                const auto deadline = connection::clock::now() + request_timeout_;
                auto [ec, st] = co_await read_status(name, deadline);
                if (ec || !st.report.held) co_return result{ec, admin_lock_status{}};
                // The session is ended only while it holds the fence read
                // (terminate_holder): that owner's tenure, nobody else's.
                if (!only_owner.empty() && st.report.owner != only_owner)
                    co_return result{error::not_owner, admin_lock_status{}};
                const answer ended = co_await conn_->exec(
                    terminate_holder(name, st.report.pid, st.report.fence), deadline);
                if (!ended.ok()) {
                    why_ = scrub(ended.message, *url_);
                    co_return result{error_of(ended), admin_lock_status{}};
                }
                if (decide_terminated(ended)) co_return result{error_code{}, std::move(st)};
            }
            why_ = "the lock changed hands (or was re-entered) at every try; try again";
            co_return result{error::lock_held, admin_lock_status{}};
        },
        asio::use_awaitable);
}

// The admin seam (core/backend.hpp) of the PostgreSQL backend: an admin
// with a connection of its own per call (the backend's sessions hold
// advisory locks), bounded by the backend's request timeout.
namespace {

lock_status public_status(const admin_lock_status& st) {
    lock_status out;
    out.held = st.report.held;
    out.last_token = st.report.fence;  // the row's, held or not
    out.queued = st.report.waiting;
    if (!out.held) return out;
    out.owner = st.report.owner;
    out.ttl = std::chrono::milliseconds(-1);  // the session's, which has none to read
    out.levels = 1;
    out.holder_count = 1;
    out.holder = st.holder;
    return out;
}

auto seam_of(const pg_backend& b) {
    auto make = [ex = b.get_executor(), url = b.options().url,
                 bound = b.options().request_timeout] {
        return std::make_shared<admin>(ex, url, bound);
    };
    return session_admin(asio::any_io_executor(b.strand()), std::move(make), &public_status);
}

}  // namespace

void pg_backend::admin_status(std::string name, status_handler handler) {
    seam_of(*this).status(std::move(name), std::move(handler));
}
void pg_backend::admin_list(lock_list_options options, list_handler handler) {
    seam_of(*this).list(std::move(options), std::move(handler));
}
void pg_backend::admin_break(std::string name, status_handler handler) {
    seam_of(*this).break_lock(std::move(name), std::move(handler));
}
void pg_backend::admin_release_owner(std::string name, std::string owner,
                                     release_handler handler) {
    seam_of(*this).release_owner(std::move(name), std::move(owner), std::move(handler));
}

}  // namespace corolock::detail::pg
