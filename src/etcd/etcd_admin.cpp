#include "etcd/etcd_admin.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

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

auto async_lease_revoke(std::shared_ptr<transport> w, std::int64_t lease) {
    return asio::async_initiate<decltype(use_nothrow), void(error_code, lease_revoke_result)>(
        [](auto h, std::shared_ptr<transport> t, std::int64_t id) {
            t->lease_revoke(id, handler<lease_revoke_result>(std::move(h)));
        },
        use_nothrow, std::move(w), lease);
}

lock_key to_lock_key(const key_value& kv, const std::string& prefix) {
    lock_key k;
    k.owner = kv.key.size() >= prefix.size() ? kv.key.substr(prefix.size()) : kv.key;
    k.value = kv.value;
    k.create_revision = kv.create_revision;
    k.mod_revision = kv.mod_revision;
    k.lease = kv.lease;
    return k;
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

admin::~admin() { stop(); }

void admin::stop() noexcept {
    if (wire_) wire_->stop();
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
    for (const auto& kv : r.kvs) {
        if (!st.held) {
            st.held = true;
            st.holder = to_lock_key(kv, prefix);
        } else {
            st.waiters.push_back(to_lock_key(kv, prefix));
        }
    }
    if (!st.held) co_return std::make_tuple(error_code(), st);
    st.ttl = std::chrono::seconds(-1);
    if (st.holder.lease != 0) {
        const std::int64_t lease = st.holder.lease;
        auto [lec, ttl] = co_await async_lease_ttl(w, lease);
        if (lec) co_return std::make_tuple(lec, st);
        st.ttl = std::chrono::seconds(ttl.ttl < 0 ? -1 : ttl.ttl);
    }
    co_return std::make_tuple(error_code(), st);
}

asio::awaitable<std::tuple<error_code, admin_break_result>> admin::break_lock(std::string name) {
    admin_break_result out;
    auto [ec, st] = co_await status(name);
    if (ec && !st.held) co_return std::make_tuple(ec, out);  // a failed lease lookup is no matter here
    if (!st.held) co_return std::make_tuple(error_code(), out);
    std::shared_ptr<transport> w = wire_;
    if (st.holder.lease != 0) {
        const std::int64_t lease = st.holder.lease;
        auto [rec, rr] = co_await async_lease_revoke(w, lease);
        if (!rec) {
            out.held = true;
            out.removed = st.holder;
            out.lease_revoked = true;
            co_return std::make_tuple(error_code(), out);
        }
        // A lease already gone (its key with it, or about to be): fall
        // through to the owner-checked delete, which tells which.
        if (rec != error::server_error) co_return std::make_tuple(rec, out);
    }
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

}  // namespace corolock::detail::etcd
