#include "zk/zk_admin.hpp"

#include "core/holder_record.hpp"
#include "core/inner_executor.hpp"
#include "core/logging.hpp"
#include "zk/lock_recipe.hpp"

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

asio::awaitable<std::tuple<error_code, admin_lock_status>> admin::read_status(std::string name) {
    using result = std::tuple<error_code, admin_lock_status>;
    if (!session_ || session_->stopped()) co_return result{error::not_connected, {}};
    // The requests are not cancellable one by one: at the bound the session
    // is closed, which completes them with ZCLOSING.
    auto bound = std::make_shared<asio::steady_timer>(strand_, request_timeout_);
    auto timed_out = std::make_shared<bool>(false);
    bound->async_wait([bound, timed_out, s = session_](error_code ec) {
        if (ec) return;
        *timed_out = true;
        s->stop();
    });
    auto fail = [&](int rc) {
        bound->cancel();
        if (*timed_out) {
            why_ = "no answer within " + ms_text(request_timeout_);
            return result{error::timeout, {}};
        }
        why_ = zerror(rc);
        return result{error_of(rc), {}};
    };
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
        const auto now = std::chrono::system_clock::now().time_since_epoch();
        st.holder = parse_holder_record(
            st.value, std::chrono::duration_cast<std::chrono::microseconds>(now).count());
        st.czxid = stat.czxid;
        st.mzxid = stat.mzxid;
        for (std::size_t i = 1; i < line.size(); ++i) st.waiters.push_back(line[i].second);
        bound->cancel();
        co_return result{error_code{}, std::move(st)};
    }
    bound->cancel();
    co_return result{error_code{}, admin_lock_status{}};
}

}  // namespace corolock::detail::zk
