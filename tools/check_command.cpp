// corolock check: the sequencer check (corolock::async_check_token) from the
// shell. Whether TOKEN is still the current holder's grant of NAME, read
// once through the backend's admin seam (public headers only).
#include "cli.hpp"

#include <corolock/admin.hpp>
#include <corolock/backend.hpp>
#include <corolock/printable.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <exception>
#include <optional>

namespace corolock::cli {

namespace asio = boost::asio;

int check_command(const check_options& o) {
    asio::io_context ioc(1);
    std::optional<backend> b;
    try {
        // Redis of any topology from the tool's config (its short bounds);
        // the other services by URL, with their own request bounds.
        if (o.common.redis())
            b.emplace(ioc.get_executor(), tool_config(o.common));
        else
            b.emplace(ioc.get_executor(), o.common.url);
    } catch (const std::exception& e) {
        report_error(std::string("bad configuration: ") + e.what());
        return exit_status::usage;
    }
    const std::string doing = "check token of lock '" + o.name + "'";
    int status = exit_status::os_error;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<int> {
            auto [ec, current] = co_await async_check_token(
                *b, o.name, o.token, asio::as_tuple(asio::use_awaitable));
            if (ec) co_return report_redis_failure(o.common, doing, ec, "");
            std::printf("token %llu is %s for lock %s\n",
                        static_cast<unsigned long long>(o.token),
                        current ? "current" : "stale", printable(o.name).c_str());
            co_return current ? exit_status::ok : exit_status::stale_token;
        },
        [&](std::exception_ptr e, int result) {
            status = e ? report_internal_error(e) : result;
            b->stop();
            ioc.stop();
        });
    ioc.run();
    return status;
}

}  // namespace corolock::cli
