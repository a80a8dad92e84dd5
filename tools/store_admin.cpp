// store_admin over ZooKeeper's and PostgreSQL's admins (src/zk/zk_admin.hpp,
// src/pg/pg_admin.hpp): run's first look, status, list and break on those
// URLs. Each is
// built only with its backend; the parser refuses a URL of a backend left
// out, so make_store_admin never sees one.
#include "cli.hpp"

#ifdef COROLOCK_HAVE_POSTGRESQL
#include "pg/pg_admin.hpp"
#include "pg/pg_backend.hpp"
#endif
#ifdef COROLOCK_HAVE_ZOOKEEPER
#include "zk/zk_admin.hpp"
#endif

#include <boost/system/system_error.hpp>

namespace corolock::cli {

namespace asio = boost::asio;

namespace {

#ifdef COROLOCK_HAVE_ZOOKEEPER
store_lock_status convert(const detail::zk::admin_lock_status& st) {
    store_lock_status out;
    out.held = st.held;
    out.owner = st.owner;
    out.holder = st.holder;
    out.last_token = static_cast<std::uint64_t>(st.mzxid);
    out.waiters = st.waiters.size();
    out.node = st.node;
    return out;
}
#endif

#ifdef COROLOCK_HAVE_POSTGRESQL
store_lock_status convert(const detail::pg::admin_lock_status& st) {
    store_lock_status out;
    out.held = st.report.held;
    out.owner = st.report.owner;
    out.holder = st.holder;
    out.last_token = st.report.fence;
    out.waiters = st.report.waiting;
    out.session_pid = st.report.pid;
    return out;
}
#endif

// The one store_admin over an admin of either kind; convert() reads its
// status into the tool's.
template <class Admin>
class admin_store final : public store_admin {
public:
    template <class Where>
    admin_store(asio::any_io_executor ex, Where where)
        : admin_(std::move(ex), std::move(where), defaults::command_timeout) {}
    asio::awaitable<error_code> connect() override { return admin_.connect(); }
    asio::awaitable<std::tuple<error_code, store_lock_status>> status(std::string name) override {
        auto [ec, st] = co_await admin_.status(std::move(name));
        co_return std::tuple<error_code, store_lock_status>{ec, convert(st)};
    }
    asio::awaitable<std::tuple<error_code, store_lock_list>> list(std::string pattern) override {
        lock_list_options o;
        o.pattern = std::move(pattern);
        auto [ec, list] = co_await admin_.list(std::move(o));
        store_lock_list out;
        out.truncated = list.truncated;
        for (auto& l : list.locks) out.locks.push_back({std::move(l.name), convert(l.status)});
        co_return std::tuple<error_code, store_lock_list>{ec, std::move(out)};
    }
    asio::awaitable<std::tuple<error_code, store_lock_status>> break_lock(std::string name) override {
        auto [ec, st] = co_await admin_.break_lock(std::move(name));
        co_return std::tuple<error_code, store_lock_status>{ec, convert(st)};
    }
    std::string last_error() const override { return admin_.last_error(); }
    void stop() noexcept override { admin_.stop(); }

private:
    Admin admin_;
};

[[noreturn]] void refuse(const std::string& why) {
    throw boost::system::system_error(make_error_code(error::invalid_url), why);
}

}  // namespace

std::unique_ptr<store_admin> make_store_admin(asio::any_io_executor ex, const common_options& o) {
#ifdef COROLOCK_HAVE_ZOOKEEPER
    if (o.kind == url_kind::zk) {
        std::string why;
        detail::zk::zk_options zo;
        if (detail::zk::parse_url(o.url, zo, why)) refuse(why);
        return std::make_unique<admin_store<detail::zk::admin>>(std::move(ex), std::move(zo));
    }
#endif
#ifdef COROLOCK_HAVE_POSTGRESQL
    if (o.kind == url_kind::postgresql) {
        std::string why;
        detail::pg::backend_options po;
        if (detail::pg::parse_url(o.url, po, why)) refuse(why);
        return std::make_unique<admin_store<detail::pg::admin>>(std::move(ex), po.url);
    }
#endif
    (void)ex;
    refuse(std::string(service_name(o)) + " has no admin in this build");
}

}  // namespace corolock::cli
