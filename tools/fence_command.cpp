// corolock fence install (docs/fencing.md): loads the Redis Functions
// library `corolock`, or creates the PostgreSQL schema `corolock`.
#include "cli.hpp"

#include <corolock/backend.hpp>
#include <corolock/fence.hpp>

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

// The install of the URL's own backend (corolock/fence.hpp): Redis loads
// its Functions library (a Cluster: on every primary), PostgreSQL creates
// the schema in one transaction on a connection of its own.
outcome install(const common_options& o) {
    asio::io_context ioc;
    // Redis: the config as every command's (the URL with --password-file,
    // $COROLOCK_PASSWORD and the TLS options applied), for a backend, not a
    // client: it speaks to a Cluster too.
    backend b = o.redis() ? backend{ioc.get_executor(), tool_config(o)}
                          : backend{ioc.get_executor(), o.url};
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

}  // namespace

int fence_command(const std::vector<std::string_view>& args) {
    if (args.empty()) return usage("missing SUBCOMMAND (install)");
    for (const auto a : args) {
        if (a == "-h" || a == "--help") {
            std::fputs(fence_help_text().c_str(), stdout);
            return exit_status::ok;
        }
    }
    if (args[0] != "install") return usage("unknown subcommand '" + std::string(args[0]) + "' (install)");
    // The options every command takes, parsed by their one definition
    // (connection_options.cpp), as `run` parses them.
    common_options o;
    bool help = false;
    if (auto e = parse_options_only("fence", std::vector<std::string_view>(args.begin() + 1, args.end()),
                                    o, help))
        return usage(e->message);
    if (help) {
        std::fputs(fence_help_text().c_str(), stdout);
        return exit_status::ok;
    }
    if (o.kind != url_kind::redis && o.kind != url_kind::postgresql)
        return usage("fence install takes a Redis or PostgreSQL URL (the fences live where the "
                     "data does)");
    if (o.redlock())
        return usage("fence install takes one Redis server, Sentinel set or Cluster; a RedLock's "
                     "nodes are independent servers: install on each with its own --url");
    for (const auto& w : o.warnings) report_warning(w);
    try {
        const outcome out = install(o);
        // No connection or no credentials: said as every command says it
        // (how to give a password, where the URL came from).
        if (o.redis() && (out.ec == error::auth_failed ||
                          exit_status_for(out.ec) == exit_status::unavailable))
            return report_redis_failure(o, "fence install", out.ec, out.why);
        if (out.ec) {
            report_error(out.why);
            return exit_status_for(out.ec);
        }
    } catch (const std::exception& e) {
        report_error(std::string("internal error: ") + e.what());
        return exit_status::os_error;
    }
    if (o.verbosity > 0)
        std::fputs(o.redis()
                       ? "corolock: the Redis Functions library corolock is loaded\n"
                       : "corolock: schema corolock with corolock.fence(text, bigint) is installed\n",
                   stderr);
    return exit_status::ok;
}

}  // namespace corolock::cli
