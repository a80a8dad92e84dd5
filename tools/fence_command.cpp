// corolock fence install (docs/fencing.md): loads the Redis Functions
// library `corolock`, or creates the PostgreSQL schema `corolock`.
#include "cli.hpp"

#include <corolock/backend.hpp>
#include <corolock/fence.hpp>

#ifdef COROLOCK_HAVE_POSTGRESQL
#include "pg/pg_fence.hpp"
#endif

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <cstdio>
#include <cstdlib>
#include <optional>

namespace corolock::cli {

namespace asio = boost::asio;

namespace {

struct fence_options {
    std::string url;
    bool verbose = false;
};

int usage(std::string_view message) {
    report_error("fence: " + std::string(message));
    std::fputs("Try 'corolock fence --help' for more information.\n", stderr);
    return exit_status::usage;
}

// What ran in the io_context: the error and the reason in words.
struct outcome {
    error_code ec;
    std::string why;
};

outcome install_redis(const fence_options& o) {
    asio::io_context ioc;
    config cfg;
    try {
        cfg = config::from_url(o.url);
    } catch (const boost::system::system_error& e) {
        return {error::invalid_url, std::string("fence install: ") + e.what()};
    }
    // A backend, not a client: it speaks to a Cluster too (every primary).
    backend b{ioc.get_executor(), tool_config(std::move(cfg), 0)};
    outcome out;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            auto [ec, r] = co_await async_fence_install(b, asio::as_tuple(asio::use_awaitable));
            out.ec = ec;
            if (ec) out.why = r.is_error() && !r.str.empty() ? r.str : ec.message();
            b.stop();
        },
        asio::detached);
    ioc.run();
    return out;
}

outcome install_postgresql([[maybe_unused]] const fence_options& o) {
#ifdef COROLOCK_HAVE_POSTGRESQL
    asio::io_context ioc;
    outcome out;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            auto [ec, why] = co_await detail::pg::install_fence(ioc.get_executor(), o.url,
                                                                defaults::command_timeout);
            out = {ec, std::move(why)};
        },
        asio::detached);
    ioc.run();
    return out;
#else
    return {error::invalid_url, "fence install: this corolock was built without PostgreSQL"};
#endif
}

}  // namespace

int fence_command(const std::vector<std::string_view>& args) {
    if (args.empty()) return usage("missing SUBCOMMAND (install)");
    fence_options o;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const auto a = args[i];
        if (a == "-h" || a == "--help") {
            std::fputs(fence_help_text().c_str(), stdout);
            return exit_status::ok;
        }
    }
    if (args[0] != "install") return usage("unknown subcommand '" + std::string(args[0]) + "' (install)");
    std::optional<std::string> url;
    for (std::size_t i = 1; i < args.size(); ++i) {
        const auto a = args[i];
        if (a == "-v") {
            o.verbose = true;
        } else if (a == "--url" && i + 1 < args.size()) {
            url = std::string(args[++i]);
        } else if (a.substr(0, 6) == "--url=") {
            url = std::string(a.substr(6));
        } else if (a == "--url") {
            return usage("--url needs a URL");
        } else {
            return usage("unexpected argument '" + std::string(a) + "'");
        }
    }
    if (!url) {
        const char* env = std::getenv("REDIS_URL");
        url = env != nullptr && *env != '\0' ? std::string(env) : defaults::url();
    }
    o.url = *url;
    const auto kind = kind_of_url(o.url);
    if (kind != url_kind::redis && kind != url_kind::postgresql)
        return usage("fence install takes a Redis or PostgreSQL URL (the fences live where the "
                     "data does)");
    try {
        const outcome out = kind == url_kind::redis ? install_redis(o) : install_postgresql(o);
        if (out.ec) {
            report_error(out.why);
            return exit_status_for(out.ec);
        }
    } catch (const std::exception& e) {
        report_error(std::string("internal error: ") + e.what());
        return exit_status::os_error;
    }
    if (o.verbose)
        std::fputs(kind == url_kind::redis
                       ? "corolock: the Redis Functions library corolock is loaded\n"
                       : "corolock: schema corolock with corolock.fence(text, bigint) is installed\n",
                   stderr);
    return exit_status::ok;
}

}  // namespace corolock::cli
