#include "etcd/etcd_admin.hpp"

#include "core/admin_call.hpp"
#include "core/glob_match.hpp"
#include "core/holder_record.hpp"

#include <corolock/admin.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <utility>

namespace corolock::detail::etcd {

namespace asio = boost::asio;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

// The transport's calls as awaitables. Plain functions taking named
// arguments, not lambdas with captures inside the co_await: g++ 12 can
// destroy such a temporary twice.
auto async_range(std::shared_ptr<transport> w, range_request req) {
    return asio::async_initiate<decltype(use_nothrow), void(error_code, range_result)>(
        [](auto h, std::shared_ptr<transport> t, range_request r) {
            t->range(std::move(r), handler<range_result>(std::move(h)));
        },
        use_nothrow, std::move(w), std::move(req));
}

auto async_txn(std::shared_ptr<transport> w, txn_request req) {
    return asio::async_initiate<decltype(use_nothrow), void(error_code, txn_result)>(
        [](auto h, std::shared_ptr<transport> t, txn_request r) {
            t->txn(std::move(r), handler<txn_result>(std::move(h)));
        },
        use_nothrow, std::move(w), std::move(req));
}

auto async_lease_ttl(std::shared_ptr<transport> w, std::int64_t lease) {
    return asio::async_initiate<decltype(use_nothrow), void(error_code, lease_ttl_result)>(
        [](auto h, std::shared_ptr<transport> t, std::int64_t id) {
            t->lease_timetolive(id, handler<lease_ttl_result>(std::move(h)));
        },
        use_nothrow, std::move(w), lease);
}

lock_key to_lock_key(const key_value& kv, const std::string& prefix, std::int64_t now_us) {
    lock_key k;
    k.owner = kv.key.size() >= prefix.size() ? kv.key.substr(prefix.size()) : kv.key;
    k.value = kv.value;
    k.holder = parse_holder_record(kv.value, now_us);
    k.create_revision = kv.create_revision;
    k.mod_revision = kv.mod_revision;
    k.lease = kv.lease;
    return k;
}

// The holder's lease's time to live now, into st.ttl (-1 s: no live lease).
asio::awaitable<error_code> read_holder_ttl(std::shared_ptr<transport> w, admin_lock_status& st) {
    st.ttl = std::chrono::seconds(-1);
    if (st.holder.lease == 0) co_return error_code();
    auto [ec, ttl] = co_await async_lease_ttl(std::move(w), st.holder.lease);
    if (!ec) st.ttl = std::chrono::seconds(ttl.ttl < 0 ? -1 : ttl.ttl);
    co_return ec;
}

}  // namespace

admin::admin(asio::any_io_executor ex, std::string_view url,
             std::chrono::milliseconds connect_timeout, std::chrono::milliseconds request_timeout) {
    std::string why;
    if (auto ec = parse_url(url, opts_, why); ec) throw boost::system::system_error(ec, why);
    opts_.gateway.connect_timeout = connect_timeout;
    opts_.gateway.request_timeout = request_timeout;
    wire_ = gateway::create(std::move(ex), opts_.gateway);
}

admin::admin(backend_options opts, std::shared_ptr<gateway> wire)
    : opts_(std::move(opts)), wire_(std::move(wire)), owns_wire_(false) {}

admin::~admin() { stop(); }

void admin::stop() noexcept {
    if (wire_ && owns_wire_) wire_->stop();
}

failure admin::last_error() const { return wire_->last_error(); }

std::string admin::endpoints() const {
    std::string out;
    for (const auto& ep : opts_.gateway.endpoints) {
        if (!out.empty()) out += ',';
        out += ep;
    }
    return out;
}

std::string admin::key_prefix(std::string_view name) const {
    return lock_prefix(opts_.prefix, name);
}

asio::awaitable<std::tuple<error_code, admin_lock_status>> admin::status(std::string name) {
    const std::string prefix = key_prefix(name);
    range_request req;
    req.key = prefix;
    req.range_end = prefix_end(prefix);
    req.sort_by_create_revision = true;
    std::shared_ptr<transport> w = wire_;
    auto [ec, r] = co_await async_range(w, req);
    admin_lock_status st;
    if (ec) co_return std::make_tuple(ec, st);
    st.revision = r.header.revision;
    const auto now_us = wall_clock_us();
    for (const auto& kv : r.kvs) {
        if (!st.held) {
            st.held = true;
            st.holder = to_lock_key(kv, prefix, now_us);
        } else {
            st.waiters.push_back(to_lock_key(kv, prefix, now_us));
        }
    }
    if (!st.held) co_return std::make_tuple(error_code(), st);
    const auto lec = co_await read_holder_ttl(w, st);
    co_return std::make_tuple(lec, st);
}

namespace {

// One lock's keys as read by list(), in key order.
struct key_group {
    std::string name;
    std::vector<key_value> keys;
};

}  // namespace

asio::awaitable<std::tuple<error_code, admin_lock_list>> admin::list(admin_list_options o) {
    using namespace std::chrono_literals;
    using steady = std::chrono::steady_clock;
    // The bounds Redis's list has (one home: corolock/admin.hpp).
    using defaults = lock_list_defaults;
    if (o.keys_per_page == 0) o.keys_per_page = defaults::count_per_step;
    if (o.max_pages == 0) o.max_pages = defaults::max_steps;
    if (o.max_locks == 0) o.max_locks = defaults::max_locks;
    if (o.max_time <= steady::duration::zero()) o.max_time = defaults::max_time;
    const auto deadline = steady::now() + o.max_time;
    admin_lock_list out;
    std::shared_ptr<transport> w = wire_;
    const std::string end = prefix_end(opts_.prefix);

    // A lock's keys share its lock prefix, and no lock prefix begins another
    // (the name's length comes first), so in key order they are adjacent.
    std::vector<key_group> groups;
    std::string from = opts_.prefix;
    bool last_complete = true;  // the last group cannot continue past the pages read
    for (std::size_t page = 0;; ++page) {
        if (page == o.max_pages || steady::now() >= deadline) {
            out.truncated = true;
            last_complete = false;
            break;
        }
        range_request req;
        req.key = from;
        req.range_end = end;
        req.limit = static_cast<std::int64_t>(o.keys_per_page);
        req.revision = out.revision;
        auto [ec, r] = co_await async_range(w, req);
        if (ec) co_return std::make_tuple(ec, out);
        if (out.revision == 0) out.revision = r.header.revision;
        if (!r.kvs.empty()) from = r.kvs.back().key + '\0';
        bool full = false;
        for (auto& kv : r.kvs) {
            std::string_view name, owner;
            if (!split_lock_key(kv.key, opts_.prefix, name, owner)) continue;
            if (!o.pattern.empty() && !glob_match(o.pattern, name)) continue;
            if (groups.empty() || groups.back().name != name) {
                if (groups.size() == o.max_locks) {
                    full = true;  // the last group is complete: another lock follows it
                    break;
                }
                groups.push_back({std::string(name), {}});
            }
            groups.back().keys.push_back(std::move(kv));
        }
        if (full) {
            out.truncated = true;
            break;
        }
        if (!r.more || r.kvs.empty()) break;
    }
    if (!last_complete && !groups.empty()) groups.pop_back();  // may lack keys

    const auto now_us = wall_clock_us();
    for (auto& g : groups) {
        if (steady::now() >= deadline) {
            out.truncated = true;
            break;
        }
        std::stable_sort(g.keys.begin(), g.keys.end(), [](const key_value& a, const key_value& b) {
            return a.create_revision < b.create_revision;
        });
        const std::string prefix = lock_prefix(opts_.prefix, g.name);
        admin_lock_status st;
        st.held = true;
        st.revision = out.revision;
        st.holder = to_lock_key(g.keys.front(), prefix, now_us);
        for (std::size_t i = 1; i < g.keys.size(); ++i)
            st.waiters.push_back(to_lock_key(g.keys[i], prefix, now_us));
        // The lease's time to live now, not at the listing's revision.
        if (const auto lec = co_await read_holder_ttl(w, st)) co_return std::make_tuple(lec, out);
        out.locks.push_back({std::move(g.name), std::move(st)});
    }
    co_return std::make_tuple(error_code(), out);
}

asio::awaitable<std::tuple<error_code, admin_break_result>> admin::break_lock(
    std::string name, std::string only_owner) {
    admin_break_result out;
    auto [ec, st] = co_await status(name);
    if (ec && !st.held) co_return std::make_tuple(ec, out);  // a failed lease lookup is no matter here
    if (!st.held) co_return std::make_tuple(error_code(), out);
    // The key read is that owner's own: nobody else's is touched.
    if (!only_owner.empty() && st.holder.owner != only_owner)
        co_return std::make_tuple(error_code(error::not_owner), out);
    std::shared_ptr<transport> w = wire_;
    // Never by revoking the holder's lease: the holder's backend shares it
    // with its other locks (lease_pool.hpp), which a break must not touch.
    // Delete the key only if it is still the one read (same create revision).
    const std::string key = key_prefix(name) + st.holder.owner;
    txn_request t;
    compare same;
    same.key = key;
    same.what = compare::target::create_revision;
    same.relation = compare::op::equal;
    same.operand = st.holder.create_revision;
    t.compares.push_back(same);
    delete_request del;
    del.key = key;
    t.success.push_back(del);
    auto [dec, dr] = co_await async_txn(w, t);
    if (dec) co_return std::make_tuple(dec, out);
    if (dr.succeeded && !dr.responses.empty()) {
        if (const auto* d = std::get_if<delete_result>(&dr.responses.front()); d && d->deleted > 0) {
            out.held = true;
            out.removed = st.holder;
        }
    }
    co_return std::make_tuple(error_code(), out);
}

// The admin seam (core/backend.hpp) of the etcd backend: an admin over
// its own gateway, on its strand, one per call.
namespace {

lock_status public_status(const admin_lock_status& st) {
    lock_status out;
    out.held = st.held;
    out.queued = st.waiters.size();
    if (!st.held) return out;
    out.owner = st.holder.owner;
    out.ttl = st.ttl.count() < 0 ? std::chrono::milliseconds(-1)
                                 : std::chrono::milliseconds(st.ttl);
    out.levels = 1;
    out.holder_count = 1;
    out.last_token = static_cast<std::uint64_t>(st.holder.mod_revision);
    out.holder = st.holder.holder;
    return out;
}

lock_status public_status(const admin_break_result& r) {
    admin_lock_status st;
    st.held = r.held;
    st.holder = r.removed;
    st.ttl = std::chrono::seconds(-1);
    return public_status(st);
}

}  // namespace

std::shared_ptr<admin> etcd_backend::make_admin() const {
    return std::make_shared<admin>(opts_, gateway_);
}

void etcd_backend::admin_status(std::string name, status_handler handler) {
    run_admin<lock_status>(
        asio::any_io_executor(strand_),
        [a = make_admin(), name = std::move(name)]()
            -> asio::awaitable<std::tuple<error_code, lock_status>> {
            auto [ec, st] = co_await a->status(name);
            co_return std::make_tuple(ec, ec ? lock_status{} : public_status(st));
        },
        std::move(handler));
}

void etcd_backend::admin_list(lock_list_options o, list_handler handler) {
    admin_list_options ao;
    ao.pattern = std::move(o.pattern);
    ao.keys_per_page = o.count_per_step;
    ao.max_pages = o.max_steps;
    ao.max_locks = o.max_locks;
    ao.max_time = o.max_time;
    run_admin<lock_list>(
        asio::any_io_executor(strand_),
        [a = make_admin(), ao = std::move(ao)]() -> asio::awaitable<std::tuple<error_code, lock_list>> {
            auto [ec, list] = co_await a->list(ao);
            lock_list out;
            if (!ec) {
                out.truncated = list.truncated;
                for (const auto& l : list.locks) out.locks.push_back({l.name, public_status(l.status)});
            }
            co_return std::make_tuple(ec, std::move(out));
        },
        std::move(handler));
}

void etcd_backend::admin_break(std::string name, status_handler handler) {
    run_admin<lock_status>(
        asio::any_io_executor(strand_),
        [a = make_admin(), name = std::move(name)]()
            -> asio::awaitable<std::tuple<error_code, lock_status>> {
            auto [ec, r] = co_await a->break_lock(name);
            co_return std::make_tuple(ec, ec ? lock_status{} : public_status(r));
        },
        std::move(handler));
}

void etcd_backend::admin_release_owner(std::string name, std::string owner,
                                       release_handler handler) {
    run_admin<>(
        asio::any_io_executor(strand_),
        [a = make_admin(), name = std::move(name), owner = std::move(owner)]()
            -> asio::awaitable<std::tuple<error_code>> {
            auto [ec, r] = co_await a->break_lock(name, owner);
            if (!ec && !r.held) ec = error::expired;
            co_return std::make_tuple(ec);
        },
        std::move(handler));
}

}  // namespace corolock::detail::etcd
