#include "zk/zk_admin.hpp"

#include "core/admin_call.hpp"
#include "core/glob_match.hpp"
#include "core/holder_record.hpp"
#include "core/inner_executor.hpp"
#include "core/logging.hpp"
#include "zk/lock_recipe.hpp"
#include "zk/zk_backend.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <utility>

namespace corolock::detail::zk {

namespace asio = boost::asio;

namespace {

constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

}  // namespace

admin::admin(asio::any_io_executor ex, zk_options opts, std::chrono::milliseconds request_timeout)
    : strand_(asio::make_strand(inner_executor(std::move(ex)))),
      opts_(std::move(opts)),
      request_timeout_(request_timeout),
      logger_(default_logger()) {}

admin::~admin() { stop(); }

void admin::stop() noexcept {
    if (session_) session_->stop();
}

asio::awaitable<error_code> admin::connect() {
    return asio::co_spawn(
        strand_,
        [this]() -> asio::awaitable<error_code> {
            auto wake = std::make_shared<asio::steady_timer>(strand_, request_timeout_);
            auto connected = std::make_shared<bool>(false);
            session_ = std::make_shared<session>(strand_, opts_, *logger_,
                                                 [wake, connected](session::event e) {
                                                     if (e != session::event::connected) return;
                                                     *connected = true;
                                                     wake->cancel();
                                                 });
            session_->start();
            if (!*connected) co_await wake->async_wait(nothrow);
            if (*connected) co_return error_code{};
            why_ = "no session within " + ms_text(request_timeout_);
            session_->stop();
            co_return error_code(error::not_connected);
        },
        asio::use_awaitable);
}

asio::awaitable<std::tuple<error_code, admin_lock_status>> admin::status(std::string name) {
    return asio::co_spawn(strand_, read_status(std::move(name)), asio::use_awaitable);
}

// The requests are not cancellable one by one: at the bound the session
// is closed, which completes them with ZCLOSING. Over when they are
// answered (on destruction, or at fail()): a timer completion already
// queued then does nothing (all of it runs on the strand).
class admin::request_bound {
public:
    explicit request_bound(admin& a)
        : admin_(a), timer_(std::make_shared<asio::steady_timer>(a.strand_, a.request_timeout_)) {
        timer_->async_wait([timer = timer_, state = state_, s = a.session_](error_code ec) {
            if (ec || state->over) return;
            state->timed_out = true;
            s->stop();
        });
    }
    ~request_bound() { end(); }
    request_bound(const request_bound&) = delete;
    request_bound& operator=(const request_bound&) = delete;

    // The error of a request that failed with rc; its cause in last_error().
    error_code fail(int rc) {
        end();
        if (state_->timed_out) {
            admin_.why_ = "no answer within " + ms_text(admin_.request_timeout_);
            return error::timeout;
        }
        admin_.why_ = zerror(rc);
        return error_of(rc);
    }

private:
    struct state {
        bool timed_out = false;
        bool over = false;
    };
    void end() noexcept {
        state_->over = true;
        timer_->cancel();
    }

    admin& admin_;
    std::shared_ptr<asio::steady_timer> timer_;
    std::shared_ptr<state> state_ = std::make_shared<state>();
};

asio::awaitable<std::tuple<error_code, admin_lock_status>> admin::read_status(std::string name) {
    using result = std::tuple<error_code, admin_lock_status>;
    if (!session_ || session_->stopped()) co_return result{error::not_connected, {}};
    request_bound bound(*this);
    auto fail = [&](int rc) { return result{bound.fail(rc), {}}; };
    const auto dir = lock_dir(opts_.root, name);
    // The holder may release between the listing and the read: then the
    // directory is listed again, a few times at most.
    for (int attempt = 0; attempt < 3; ++attempt) {
        auto [rc, children, dir_stat] = co_await ask<int, std::vector<std::string>, node_stat>(
            strand_, [&](auto h) { session_->children(dir, std::move(h)); });
        if (rc == ZNONODE) break;
        if (rc != ZOK) co_return fail(rc);
        std::vector<std::pair<std::uint64_t, std::string>> line;
        for (auto& c : children)
            if (auto seq = sequence_of(c)) line.emplace_back(*seq, std::move(c));
        std::sort(line.begin(), line.end());
        if (line.empty()) break;
        auto [drc, value, stat] = co_await ask<int, std::string, node_stat>(
            strand_, [&](auto h) { session_->get_data(dir + "/" + line.front().second, std::move(h)); });
        if (drc == ZNONODE) continue;
        if (drc != ZOK) co_return fail(drc);
        admin_lock_status st;
        st.held = true;
        st.node = line.front().second;
        st.owner = owner_of(st.node);
        st.value = std::move(value);
        st.holder = parse_holder_record(st.value, wall_clock_us());
        st.czxid = stat.czxid;
        st.mzxid = stat.mzxid;
        for (std::size_t i = 1; i < line.size(); ++i) st.waiters.push_back(line[i].second);
        co_return result{error_code{}, std::move(st)};
    }
    co_return result{error_code{}, admin_lock_status{}};
}

asio::awaitable<std::tuple<error_code, admin_lock_list>> admin::list(lock_list_options o) {
    return asio::co_spawn(strand_, read_list(std::move(o)), asio::use_awaitable);
}

asio::awaitable<std::tuple<error_code, admin_lock_list>> admin::read_list(lock_list_options o) {
    using result = std::tuple<error_code, admin_lock_list>;
    using steady = std::chrono::steady_clock;
    if (!session_ || session_->stopped()) co_return result{error::not_connected, {}};
    o = with_list_defaults(std::move(o));
    const auto deadline = steady::now() + o.max_time;
    admin_lock_list out;
    // The lock directories under the root, by name.
    std::vector<std::string> names;
    {
        request_bound bound(*this);
        auto [rc, children, stat] = co_await ask<int, std::vector<std::string>, node_stat>(
            strand_, [&](auto h) { session_->children(locks_root(opts_.root), std::move(h)); });
        (void)stat;
        if (rc == ZNONODE) co_return result{error_code{}, std::move(out)};  // nothing made yet
        if (rc != ZOK) co_return result{bound.fail(rc), {}};
        for (const auto& c : children) {
            auto name = unescape_name(c);
            if (!name) continue;  // not a directory corolock made
            if (!o.pattern.empty() && !glob_match(o.pattern, *name)) continue;
            names.push_back(std::move(*name));
        }
    }
    std::sort(names.begin(), names.end());
    for (auto& name : names) {
        if (steady::now() >= deadline || out.locks.size() == o.max_locks) {
            out.truncated = true;
            break;
        }
        auto [ec, st] = co_await read_status(name);
        if (ec) co_return result{ec, std::move(out)};
        if (st.held) out.locks.push_back({std::move(name), std::move(st)});
    }
    co_return result{error_code{}, std::move(out)};
}

asio::awaitable<std::tuple<error_code, admin_lock_status>> admin::break_lock(
    std::string name, std::string only_owner) {
    return asio::co_spawn(
        strand_,
        [this, name = std::move(name), only_owner = std::move(only_owner)]()
            -> asio::awaitable<std::tuple<error_code, admin_lock_status>> {
            using result = std::tuple<error_code, admin_lock_status>;
            auto [ec, st] = co_await read_status(name);
            if (ec || !st.held) co_return result{ec, admin_lock_status{}};
            // The node's name carries its owner: nobody else's is deleted.
            if (!only_owner.empty() && st.owner != only_owner)
                co_return result{error::not_owner, admin_lock_status{}};
            // The node read, and only it: a later holder's node has another
            // sequence number.
            request_bound bound(*this);
            auto [rc] = co_await ask<int>(strand_, [&](auto h) {
                session_->remove(lock_dir(opts_.root, name) + "/" + st.node, std::move(h));
            });
            if (rc == ZNONODE) co_return result{error_code{}, admin_lock_status{}};  // released meanwhile
            if (rc != ZOK) co_return result{bound.fail(rc), admin_lock_status{}};
            co_return result{error_code{}, std::move(st)};
        },
        asio::use_awaitable);
}

// The admin seam (core/backend.hpp) of the ZooKeeper backend: an admin
// with a session of its own per call, bounded by the backend's session
// timeout.
namespace {

lock_status public_status(const admin_lock_status& st) {
    lock_status out;
    out.held = st.held;
    out.queued = st.waiters.size();
    if (!st.held) return out;
    out.owner = st.owner;
    out.ttl = std::chrono::milliseconds(-1);  // the session's, which has none to read
    out.levels = 1;
    out.holder_count = 1;
    out.last_token = static_cast<std::uint64_t>(st.mzxid);
    out.holder = st.holder;
    return out;
}

auto seam_of(const zk_backend& b, const zk_options& opts) {
    auto make = [ex = b.get_executor(), opts,
                 bound = std::chrono::duration_cast<std::chrono::milliseconds>(b.connect_bound())] {
        return std::make_shared<admin>(ex, opts, bound);
    };
    return session_admin(asio::any_io_executor(b.strand()), std::move(make), &public_status);
}

}  // namespace

void zk_backend::admin_status(std::string name, status_handler handler) {
    seam_of(*this, opts_).status(std::move(name), std::move(handler));
}
void zk_backend::admin_list(lock_list_options options, list_handler handler) {
    seam_of(*this, opts_).list(std::move(options), std::move(handler));
}
void zk_backend::admin_break(std::string name, status_handler handler) {
    seam_of(*this, opts_).break_lock(std::move(name), std::move(handler));
}
void zk_backend::admin_release_owner(std::string name, std::string owner,
                                     release_handler handler) {
    seam_of(*this, opts_).release_owner(std::move(name), std::move(owner), std::move(handler));
}

}  // namespace corolock::detail::zk
