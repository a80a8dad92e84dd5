#include "pg/pg_admin.hpp"

#include "core/holder_record.hpp"
#include "core/inner_executor.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <libpq-fe.h>

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
            using result = std::tuple<error_code, admin_lock_status>;
            if (!conn_ || !conn_->usable()) co_return result{error::not_connected, {}};
            const auto deadline = connection::clock::now() + request_timeout_;
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
        },
        asio::use_awaitable);
}

}  // namespace corolock::detail::pg
