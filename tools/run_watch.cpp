// The coroutines beside corolock run's flow (run_state.hpp says what each
// does): the signal pump, the wait for the child, the loss handler, -vv's
// renewal notes, the releases and RedLock's majority check.

#include "run_state.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <signal.h>

#include <algorithm>
#include <memory>
#include <optional>

namespace corolock::cli {

namespace asio = boost::asio;

asio::awaitable<void> signal_pump(run_state& s) {
    for (;;) {
        auto [ec, signo] = co_await s.forwarded.async_wait(use_nothrow);
        if (ec) co_return;  // cancelled: the run is over
        switch (s.current) {
        case phase::starting:
            if (s.pending_signal == 0) s.pending_signal = signo;
            s.cancel_start.emit(asio::cancellation_type::terminal);
            break;
        case phase::running:
            s.note("passing {} on to {}", signal_name(signo), s.target());
            s.child.signal(signo);
            break;
        case phase::finishing:
            // The child is gone; releasing is bounded and must finish.
            s.note("{} received while releasing; finishing the release first",
                   signal_name(signo));
            break;
        }
    }
}

asio::awaitable<int> wait_for_child(run_state& s) {
    for (;;) {
        if (auto status = s.child.try_reap()) co_return *status;
        auto [ec, signo] = co_await s.sigchld.async_wait(use_nothrow);
        if (ec) {
            // Not expected; poll slowly rather than spin on a failing wait.
            asio::steady_timer poll(co_await asio::this_coro::executor, std::chrono::milliseconds(100));
            co_await poll.async_wait(use_nothrow);
        }
    }
}

asio::awaitable<void> handle_loss(run_state& s, const held_lock& g) {
    auto [ec] = co_await g.async_until_lost(use_nothrow);
    if (ec != error::lock_lost) co_return;  // released, or the client stopped: nothing to watch
    if (s.current != phase::running) {
        // Lost after the child exited: the release reports it.
        co_return;
    }
    s.lost = true;
    if (s.o.on_lost == on_lost_action::ignore) {
        report_warning("lost the lease on " + s.name() + " while " + s.target() +
                       " runs; the command is no longer protected (--on-lost ignore: letting "
                       "it run)");
        co_return;
    }
    report_warning("lost the lease on " + s.name() + "; sending SIGTERM to " + s.target());
    s.child.signal(SIGTERM);
    asio::steady_timer grace(co_await asio::this_coro::executor, s.o.grace);
    co_await grace.async_wait(use_nothrow);
    if (s.current != phase::running || !s.child.running()) co_return;  // it exited in time
    report_warning(s.target() + " still runs " + format_duration(s.o.grace) +
                   " after SIGTERM; sending SIGKILL");
    s.child.signal(SIGKILL);
}

asio::awaitable<void> note_renewals(run_state& s) {
    const auto poll_every =
        std::clamp<duration>(s.o.lease / 10, std::chrono::milliseconds(20), std::chrono::seconds(1));
    auto last = s.held != nullptr ? s.held->lease_deadline() : guard::clock::time_point{};
    asio::steady_timer tick(co_await asio::this_coro::executor);
    for (;;) {
        tick.expires_after(poll_every);
        co_await tick.async_wait(use_nothrow);
        if (s.current != phase::running || s.held == nullptr || s.lost) co_return;
        const auto deadline = s.held->lease_deadline();
        if (deadline > last) {
            last = deadline;
            s.detail("renewed the lease on {}; valid for {} ms from now", s.name(),
                     std::chrono::duration_cast<std::chrono::milliseconds>(
                         deadline - guard::clock::now())
                         .count());
        }
    }
}

asio::awaitable<error_code> release(held_lock& g) {
    auto [ec] = co_await g.async_release(use_nothrow);
    co_return ec;
}

asio::awaitable<error_code> bounded_release(held_lock& g, duration bound) {
    struct race {
        explicit race(asio::any_io_executor ex) : timer(std::move(ex)) {}
        asio::steady_timer timer;
        std::optional<error_code> result;
    };
    auto r = std::make_shared<race>(co_await asio::this_coro::executor);
    r->timer.expires_after(bound);
    g.async_release([r](error_code ec) {
        r->result = ec;
        r->timer.cancel();
    });
    if (!r->result) co_await r->timer.async_wait(use_nothrow);
    co_return r->result ? *r->result : error_code(asio::error::operation_aborted);
}

asio::awaitable<void> drain_abandoned(run_state& s) {
    auto [ec] = co_await s.locks.async_drain(request_timeout(s.o.common), use_nothrow);
    if (ec)
        report_warning("could not confirm that the abandoned acquire left nothing behind (" +
                       ec.message() + "); if it did, " + std::string(service_name(s.o.common)) +
                       " frees " + s.name() + " within " + s.o.lease_text);
}

asio::awaitable<int> check_majority_reachable(run_state& s) {
    struct tally {
        explicit tally(asio::any_io_executor ex, std::size_t n)
            : wake(std::move(ex), asio::steady_timer::time_point::max()), cancels(n) {}
        asio::steady_timer wake;  // a condition variable: cancelled at each answer
        std::size_t answered = 0;
        std::vector<std::string> failures;  // "host:port (why)"
        error_code first_error;
        std::vector<asio::cancellation_signal> cancels;
    };
    auto& nodes = *s.nodes;
    const std::size_t n = nodes.size();
    const std::size_t majority = n / 2 + 1;
    const auto ex = co_await asio::this_coro::executor;
    auto t = std::make_shared<tally>(ex, n);
    for (std::size_t i = 0; i < n; ++i) {
        asio::co_spawn(
            ex,
            [&s, t, i, c = &nodes[i]]() -> asio::awaitable<void> {
                const error_code ec = co_await check_reachable(*c, t->cancels[i].slot());
                const std::string where = describe_server(s.o.common.nodes[i]);
                if (ec) {
                    const std::string why =
                        c->last_error().message.empty() ? ec.message() : c->last_error().message;
                    if (!t->first_error) t->first_error = ec;
                    t->failures.push_back(where + " (" + why + ")");
                    s.note("RedLock node {} did not answer: {}", where, printable(why));
                } else {
                    ++t->answered;
                    s.detail("RedLock node {} answered", where);
                }
                t->wake.cancel();
            },
            asio::detached);
    }
    while (t->answered < majority && t->failures.size() <= n - majority) {
        co_await t->wake.async_wait(
            asio::bind_cancellation_slot(s.cancel_start.slot(), use_nothrow));
        s.cancel_start.slot().clear();
        if (s.pending_signal != 0) {
            for (auto& c : t->cancels) c.emit(asio::cancellation_type::terminal);
            co_return exit_status::ok;  // the caller sees the signal
        }
        t->wake.expires_at(asio::steady_timer::time_point::max());
    }
    if (t->answered >= majority) co_return exit_status::ok;
    std::string list;
    for (const auto& f : t->failures) list += (list.empty() ? "" : ", ") + f;
    report_error(s.command() + ": cannot reach a majority of the " + std::to_string(n) +
                 " RedLock nodes (" + std::to_string(majority) + " needed, " +
                 std::to_string(n - t->failures.size()) + " left): " + list);
    const int status = exit_status_for(t->first_error);
    co_return status == exit_status::ok ? exit_status::unavailable : status;
}

}  // namespace corolock::cli
