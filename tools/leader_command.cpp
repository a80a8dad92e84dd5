// corolock leader: who leads a name's election, once or (--watch) at each
// change (docs/cli.md). A reader: it never campaigns.
#include "cli.hpp"

#include <corolock/backend.hpp>
#include <corolock/election.hpp>
#include <corolock/printable.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <csignal>
#include <cstdio>
#include <optional>

namespace corolock::cli {

namespace asio = boost::asio;

namespace {

// One line: the leader, or none. Text: "leader of 'NAME': epoch N, value
// 'V', HOST:PID since TIME"; --json: one object.
std::string leader_line(const leader_options& o, const leader_state& st) {
    if (o.json) {
        std::string out = "{\"name\":" + printable_json(o.name) + ",\"leader\":" +
                          (st ? "true" : "false");
        if (st) {
            out += ",\"value\":" + printable_json(st->value) + ",\"epoch\":" +
                   std::to_string(st->epoch);
            const auto& h = st->holder;
            out += h ? ",\"host\":" + printable_json(h->host) + ",\"pid\":" + std::to_string(h->pid) +
                           ",\"label\":" + printable_json(h->label) +
                           ",\"since\":" + printable_json(format_time(h->since))
                     : std::string(",\"host\":null,\"pid\":null,\"label\":null,\"since\":null");
        }
        return out + "}\n";
    }
    if (!st) return "no leader of '" + printable(o.name) + "'\n";
    std::string out = "leader of '" + printable(o.name) + "': epoch " +
                      std::to_string(st->epoch) + ", value '" + printable(st->value) + "'";
    if (st->holder) out += ", " + holder_text(*st->holder) + " since " + format_time(st->holder->since);
    return out + "\n";
}

void print(const std::string& line) {
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);  // --watch: each change as it comes, also into a pipe
}

asio::awaitable<int> leader_flow(const leader_options& o, election& e,
                                 asio::cancellation_signal& stop, const int& stopped) {
    const std::string doing = "leader of '" + o.name + "'";
    auto failed = [&](const error_code& ec) {
        if (ec == error::not_supported) {
            report_error("leader: " + service_at(o.common) +
                         " offers no leader election; docs/election.md lists the backends that do");
            return exit_status::remote_error;
        }
        return report_redis_failure(o.common, doing, ec, {});
    };
    if (!o.watch) {
        auto [ec, st] = co_await e.async_leader(
            asio::bind_cancellation_slot(stop.slot(), use_nothrow));
        if (stopped != 0) co_return exit_status::signal_base + stopped;
        if (ec) co_return failed(ec);
        print(leader_line(o, st));
        co_return st ? exit_status::ok : exit_status::not_held;
    }
    // One line per change until a signal; bounded by the signal only.
    for (;;) {
        auto [ec, st] = co_await e.async_observe(
            asio::bind_cancellation_slot(stop.slot(), use_nothrow));
        if (stopped != 0) co_return exit_status::ok;
        if (ec) co_return failed(ec);
        print(leader_line(o, st));
    }
}

}  // namespace

int leader_command(const leader_options& o) {
    asio::io_context ioc(1);
    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    std::optional<backend> b;
    std::optional<election> e;
    try {
        if (o.common.redis())
            b.emplace(ioc.get_executor(), tool_config(o.common));
        else
            b.emplace(ioc.get_executor(), o.common.url, backend_config{});
        e.emplace(*b, o.name);
    } catch (const std::exception& ex) {
        report_error(std::string("bad configuration: ") + ex.what());
        return exit_status::usage;
    }
    asio::cancellation_signal stop;
    int stopped = 0;  // the signal received
    signals.async_wait([&](error_code ec, int signo) {
        if (ec) return;
        stopped = signo;
        stop.emit(asio::cancellation_type::terminal);
    });
    int status = exit_status::os_error;
    asio::co_spawn(ioc, leader_flow(o, *e, stop, stopped), [&](std::exception_ptr ex, int result) {
        status = ex ? report_internal_error(ex) : result;
        signals.cancel();
        b->stop();
        // The backend's reconnect loop never runs out of work by itself.
        ioc.stop();
    });
    ioc.run();
    return status;
}

}  // namespace corolock::cli
