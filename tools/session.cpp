#include "cli.hpp"

#include "etcd/etcd_admin.hpp"

#include <corolock/client.hpp>
#include <corolock/command.hpp>
#include <corolock/printable.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>

namespace corolock::cli {

namespace asio = boost::asio;

// Log lines carry lock names, owner ids and server text: the library escapes
// its own arguments (detail/logging.hpp), and the CLI's notes pass theirs
// through printable(), so a whole-line escape here would escape them twice.
std::shared_ptr<spdlog::logger> make_logger(int verbosity) {
    if (verbosity <= 0) return nullptr;
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto logger = std::make_shared<spdlog::logger>("corolock", std::move(sink));
    logger->set_level(verbosity >= 2 ? spdlog::level::debug : spdlog::level::info);
    logger->set_pattern("corolock: [%H:%M:%S.%e] [%l] %v");
    return logger;
}

config tool_config(const common_options& o) { return tool_config(o.cfg, o.verbosity); }

config tool_config(config cfg, int verbosity) {
    // Short bounds: see defaults::command_timeout.
    if (cfg.connect_timeout.count() == 0) cfg.connect_timeout = defaults::connect_timeout;
    if (cfg.command_timeout.count() == 0) cfg.command_timeout = defaults::command_timeout;
    // A closed port is reported at once, as redis-cli does (docs/cli.md).
    cfg.fail_fast_when_refused = true;
    // The tool only takes, inspects and breaks locks: tight reply limits.
    cfg.use_lock_only_limits();
    cfg.logger = make_logger(verbosity);
    if (cfg.client_name.empty()) cfg.client_name = "corolock-cli";
    return cfg;
}

duration request_timeout(const common_options& o) {
    if (!o.redis() || o.cfg.command_timeout.count() == 0) return defaults::command_timeout;
    return std::chrono::duration_cast<duration>(o.cfg.command_timeout);
}

std::unique_ptr<detail::etcd::admin> make_etcd_admin(asio::any_io_executor ex,
                                                     const common_options& o) {
    return std::make_unique<detail::etcd::admin>(std::move(ex), o.url, defaults::connect_timeout,
                                                 defaults::command_timeout);
}


std::string service_at(const common_options& o) {
    if (o.redlock()) {
        std::string out = "RedLock on Redis at ";
        for (std::size_t i = 0; i < o.nodes.size(); ++i) {
            if (i > 0) out += ", ";
            out += describe_server(o.nodes[i]);
        }
        return out;
    }
    return std::string(service_name(o)) + " at " +
           (o.redis() ? describe_server(o.cfg) : o.endpoints);
}

asio::awaitable<error_code> check_reachable(client& c, asio::cancellation_slot slot) {
    // PING is answered in any state (even by a server still loading), so it
    // tests exactly "connected and authenticated". Idempotent: a dropped
    // connection may retry it once.
    command ping{"PING"};
    ping.idempotent();
    auto [ec, r] = co_await c.async_exec(
        std::move(ping), asio::bind_cancellation_slot(slot, asio::as_tuple(asio::use_awaitable)));
    co_return ec;
}

// Messages name locks, owners, commands and server text: every byte that
// could end the line or drive the terminal is escaped (printable.hpp).
void report_error(std::string_view message) {
    const std::string text = printable(message);
    std::fprintf(stderr, "corolock: %s\n", text.c_str());
}

int report_internal_error(std::exception_ptr e) noexcept {
    if (!e) return 0;
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        report_error(std::string("internal error: ") + ex.what());
    } catch (...) {
        report_error("internal error");
    }
    return exit_status::os_error;
}

void report_warning(std::string_view message) {
    const std::string text = printable(message);
    std::fprintf(stderr, "corolock: warning: %s\n", text.c_str());
}

int report_redis_failure(const common_options& o, std::string_view doing, const error_code& ec,
                         std::string_view cause, bool reached) {
    if (reached && ec == error::auth_failed && o.redis()) {
        // The credentials worked for the PING: this is NOPERM (an ACL that
        // denies the script or the lock's keys), which the library reports
        // as auth_failed.
        report_error(std::string(doing) + ": Redis at " + describe_server(o.cfg) +
                     " denied the command (NOPERM): the user lacks a permission corolock "
                     "needs (EVALSHA/EVAL, SUBSCRIBE/PUBLISH, keys corolock:{NAME}*)");
        return exit_status::remote_error;
    }
    const int status = exit_status_for(ec);
    // The cause names what the last attempt or the server said; it is used
    // where it explains this failure (no connection, no permission), never
    // for an unrelated code, where it could be stale.
    const bool explained = status == exit_status::unavailable || ec == error::no_permission;
    std::string why = cause.empty() || !explained ? ec.message() : std::string(cause);
    if (ec == error::no_permission) {
        if (o.redis())
            report_error(std::string(doing) + ": Redis at " + describe_server(o.cfg) +
                         " denied the command (NOPERM): " + why);
        else
            report_error(std::string(doing) + ": " + service_at(o) +
                         " refused it for lack of permission: " + why);
        return status;
    }
    if (ec == error::not_connected && (cause.empty() || !explained)) {
        why = "no connection within " + format_duration(defaults::command_timeout) + " (is " +
              std::string(service_name(o)) + " running there? -v shows each attempt)";
    }
    // What to do, where the failure says it. TLS to a server that does not
    // speak it: the handshake never completes, so no attempt ends, with no
    // cause, within the bound.
    const bool tls = o.redis() && !o.redlock() && o.cfg.tls.enabled;
    const bool no_session =
        ec == error::tls_handshake_failed ||
        ((ec == error::never_connected || ec == error::timeout) &&
         cause.find("refused") == std::string_view::npos &&
         cause.find("resolve") == std::string_view::npos);
    if (tls && status == exit_status::unavailable && no_session)
        why = "TLS failed: no TLS session within " +
              format_duration(o.cfg.connect_timeout.count() > 0
                                  ? std::chrono::duration_cast<duration>(o.cfg.connect_timeout)
                                  : defaults::connect_timeout) +
              " (is that port serving TLS? a plain Redis port takes redis://, and no --tls-* "
              "option)";
    const bool no_password = o.redis() && o.cfg.password.empty() && ec == error::auth_failed;
    std::string message = std::string(doing) + ": ";
    const std::string where = service_at(o) + " (from " + o.url_from + ")";
    if (ec == error::auth_failed)
        message += where + " rejected the credentials" +
                   (no_password ? ": it requires a password; give it in the URL "
                                  "(redis://:PASSWORD@HOST, or redis://USER:PASSWORD@HOST), "
                                  "with --password-file FILE, or in COROLOCK_PASSWORD"
                                : "");
    else if (status == exit_status::unavailable)
        message += "cannot reach " + where + ": " + why;
    else
        message += why;
    report_error(message);
    return status;
}

}  // namespace corolock::cli
