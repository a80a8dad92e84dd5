// store_admin over ZooKeeper's and PostgreSQL's admins (src/zk/zk_admin.hpp,
// src/pg/pg_admin.hpp): run's first look and status on those URLs. Each is
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
class zk_store final : public store_admin {
public:
    zk_store(asio::any_io_executor ex, detail::zk::zk_options opts)
        : admin_(std::move(ex), std::move(opts), defaults::command_timeout) {}
    asio::awaitable<error_code> connect() override { return admin_.connect(); }
    asio::awaitable<std::tuple<error_code, store_lock_status>> status(std::string name) override {
        auto [ec, st] = co_await admin_.status(std::move(name));
        store_lock_status out;
        out.held = st.held;
        out.owner = st.owner;
        out.holder = st.holder;
        out.last_token = static_cast<std::uint64_t>(st.mzxid);
        out.waiters = st.waiters.size();
        out.node = st.node;
        co_return std::tuple<error_code, store_lock_status>{ec, std::move(out)};
    }
    std::string last_error() const override { return admin_.last_error(); }
    void stop() noexcept override { admin_.stop(); }

private:
    detail::zk::admin admin_;
};
#endif

#ifdef COROLOCK_HAVE_POSTGRESQL
class pg_store final : public store_admin {
public:
    pg_store(asio::any_io_executor ex, std::shared_ptr<const detail::pg::url_parts> url)
        : admin_(std::move(ex), std::move(url), defaults::command_timeout) {}
    asio::awaitable<error_code> connect() override { return admin_.connect(); }
    asio::awaitable<std::tuple<error_code, store_lock_status>> status(std::string name) override {
        auto [ec, st] = co_await admin_.status(std::move(name));
        store_lock_status out;
        out.held = st.report.held;
        out.owner = st.report.owner;
        out.holder = st.holder;
        out.last_token = st.report.fence;
        out.waiters = st.report.waiting;
        out.session_pid = st.report.pid;
        co_return std::tuple<error_code, store_lock_status>{ec, std::move(out)};
    }
    std::string last_error() const override { return admin_.last_error(); }
    void stop() noexcept override { admin_.stop(); }

private:
    detail::pg::admin admin_;
};
#endif

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
        return std::make_unique<zk_store>(std::move(ex), std::move(zo));
    }
#endif
#ifdef COROLOCK_HAVE_POSTGRESQL
    if (o.kind == url_kind::postgresql) {
        std::string why;
        detail::pg::backend_options po;
        if (detail::pg::parse_url(o.url, po, why)) refuse(why);
        return std::make_unique<pg_store>(std::move(ex), po.url);
    }
#endif
    (void)ex;
    refuse(std::string(service_name(o)) + " has no admin in this build");
}

}  // namespace corolock::cli
