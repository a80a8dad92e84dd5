// A worker: one corolock::client, many coroutines, each with its own
// corolock::mutex handle (one handle = one owner), selling the same SKU.
//
// Event lines printed on stdout, one per line, for the orchestrator:
//   ready                       connected; waiting for "go" on stdin
//   acq TOKEN MONO_NS           acquire returned (CLOCK_MONOTONIC)
//   rel TOKEN MONO_NS           release is about to be called
//   sale TOKEN UNITS_LEFT       a fenced write was accepted and the sale counted
//   refused TOKEN FENCE         the store refused a write as stale
//   holding TOKEN UNITS         the victim holds the lock, has read the stock and
//                               is about to be frozen (then waits for "continue")
//   lost TOKEN MONO_NS          guard.until_lost() completed with lock_lost
//   relerr TOKEN WHAT           release reported the lease was already gone
//   done SALES ACQUISITIONS     every coroutine finished
//   fail WHAT...                something went wrong; the worker exits non-zero
#include "worker.hpp"

#include "store.hpp"

#include <corolock/corolock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <variant>
#include <vector>

namespace demo {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;

namespace {

constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

// One write(2) per line: a line is far below PIPE_BUF, so lines from one
// process never interleave, and nothing waits in a stdio buffer when the
// orchestrator freezes us.
void emit(const std::string& line) {
    std::string out = line;
    out.push_back('\n');
    std::size_t done = 0;
    // Bounded: each pass writes at least one byte or gives up.
    while (done < out.size()) {
        const auto n = ::write(STDOUT_FILENO, out.data() + done, out.size() - done);
        if (n > 0)
            done += static_cast<std::size_t>(n);
        else if (n < 0 && errno == EINTR)
            continue;
        else
            return;  // the orchestrator is gone; it will not read us anyway
    }
}

std::string num(std::int64_t v) { return std::to_string(v); }
std::string num(std::uint64_t v) { return std::to_string(v); }

enum class outcome { sold, sold_out, refused };

class worker {
public:
    worker(asio::io_context& ioc, const worker_options& opt)
        : ioc_(ioc),
          opt_(opt),
          redis_(ioc.get_executor(), client_config(opt)),
          store_(redis_, opt.sc),
          in_(ioc, ::dup(STDIN_FILENO)) {}

    void start() {
        asio::co_spawn(ioc_, run(), [this](std::exception_ptr e) {
            if (e) fail("worker", e);
        });
    }

    int exit_code() const { return finished_ && failures_ == 0 ? 0 : 1; }
    bool finished() const { return finished_; }

    // At the deadline: say where each unfinished coroutine is stuck, so a
    // hang can be told apart from slowness.
    void report_stuck() const {
        for (std::size_t t = 0; t < phases_.size(); ++t) {
            if (!phases_[t].empty())
                emit("fail task " + std::to_string(t) + " stuck: " + phases_[t]);
        }
        const auto st = redis_.stats();
        emit("fail client: connected " + std::string(redis_.is_connected() ? "yes" : "no") +
             ", queued " + std::to_string(st.queued) + ", sent " + std::to_string(st.commands_sent) +
             ", replies " + std::to_string(st.replies) + ", timeouts " + std::to_string(st.timeouts) +
             ", connects " + std::to_string(st.connects));
    }

private:
    static corolock::config client_config(const worker_options& opt) {
        auto cfg = corolock::config::from_url(opt.sc.url);
        // Shows up in CLIENT LIST, so a stuck demo is easy to recognise.
        cfg.client_name = "corolock-demo-worker-" + std::to_string(opt.id);
        return cfg;
    }

    asio::awaitable<void> run() {
        // The client connects in the background; a PING through it proves
        // the connection before we tell the orchestrator we are ready.
        co_await redis_.async_exec(corolock::command().arg("PING"), asio::use_awaitable);
        emit("ready");
        auto go = co_await read_line(30s);
        if (go != "go") throw std::runtime_error("no \"go\" from the orchestrator");
        if (opt_.victim) {
            // The victim's first coroutine takes the lock before anyone else
            // is let go, then starts its siblings itself.
            spawn_task(0, true);
        } else {
            for (int t = 0; t < opt_.sc.tasks; ++t) spawn_task(t, false);
        }
    }

    void spawn_task(int task, bool victim_first) {
        ++running_;
        phases_[static_cast<std::size_t>(task)] = "starting";
        asio::co_spawn(ioc_, seller(task, victim_first), [this, task](std::exception_ptr e) {
            phases_[static_cast<std::size_t>(task)].clear();
            if (e) fail("task " + std::to_string(task), e);
            if (--running_ == 0) finish();
        });
    }

    // What a task is doing now, for report_stuck().
    void phase(int task, std::string what) { phases_[static_cast<std::size_t>(task)] = std::move(what); }

    void finish() {
        finished_ = true;
        emit("done " + num(sales_) + " " + num(acquisitions_));
        redis_.stop();
        in_.close();
    }

    void fail(const std::string& where, std::exception_ptr e) {
        ++failures_;
        std::string what = "unknown error";
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            what = ex.what();
        } catch (...) {
        }
        emit("fail " + where + ": " + what);
        if (running_ == 0 && !finished_) {
            // Nothing else will finish the worker: stop it here.
            redis_.stop();
            in_.close();
        }
    }

    // One line from the orchestrator, or nullopt on timeout or EOF.
    asio::awaitable<std::optional<std::string>> read_line(std::chrono::milliseconds timeout) {
        if (auto nl = in_buf_.find('\n'); nl == std::string::npos) {
            asio::steady_timer timer(ioc_, timeout);
            auto r = co_await (
                asio::async_read_until(in_, asio::dynamic_buffer(in_buf_), '\n', nothrow) ||
                timer.async_wait(nothrow));
            if (r.index() != 0 || std::get<0>(std::get<0>(r))) co_return std::nullopt;
        }
        const auto nl = in_buf_.find('\n');
        if (nl == std::string::npos) co_return std::nullopt;
        std::string line = in_buf_.substr(0, nl);
        in_buf_.erase(0, nl + 1);
        co_return line;
    }

    // One sale: a read, then a write of the value read minus one. Correct
    // only if no one else writes in between, which is what the lock is for.
    asio::awaitable<outcome> sell_one(int task, std::uint64_t token) {
        phase(task, "token " + num(token) + ": reading the stock");
        const auto units = co_await store_.units();
        if (units <= 0) co_return outcome::sold_out;
        if (!opt_.sc.use_lock) {
            // Some work between read and write, as real code has: without a
            // lock this is exactly where other sellers read the same units.
            asio::steady_timer work(ioc_, 2ms);
            co_await work.async_wait(nothrow);
            co_await store_.write_units_unfenced(units - 1);
        } else {
            phase(task, "token " + num(token) + ": fenced write");
            auto w = co_await store_.write_units(token, units - 1);
            if (!w.accepted) {
                emit("refused " + num(token) + " " + num(w.fence));
                co_return outcome::refused;
            }
        }
        phase(task, "token " + num(token) + ": counting the sale");
        co_await store_.count_sale();
        ++sales_;
        emit("sale " + num(token) + " " + num(units - 1));
        co_return outcome::sold;
    }

    asio::awaitable<void> seller(int task, bool victim_first) {
        corolock::mutex lock{redis_, opt_.sc.lock_name()};
        if (victim_first) co_await victim_episode(task, lock);
        // Bounded: a coroutine can sell at most the whole stock, and every
        // round either sells, finds the stock gone, or is refused (rare).
        const int max_rounds = 2 * opt_.sc.stock + 10;
        for (int round = 0; round < max_rounds; ++round) {
            if (!opt_.sc.use_lock) {
                if (co_await sell_one(task, 0) == outcome::sold_out) co_return;
                continue;
            }
            phase(task, "acquiring");
            auto guard = co_await lock.acquire({.lease = opt_.sc.lease, .wait = 20s});
            const auto token = guard.token();
            ++acquisitions_;
            emit("acq " + num(token) + " " + num(mono_ns()));
            // The library's idiom: the work is bound to the lease, so if the
            // watchdog reports the lock lost, the work is cancelled.
            auto r = co_await (sell_one(task, token) || guard.until_lost());
            if (r.index() == 1) emit("lost " + num(token) + " " + num(mono_ns()));
            emit("rel " + num(token) + " " + num(mono_ns()));
            phase(task, "token " + num(token) + ": releasing");
            if (auto ec = co_await guard.release(); ec)
                emit("relerr " + num(token) + " " + ec.message());
            if (r.index() == 0 && std::get<0>(r) == outcome::sold_out) co_return;
        }
        throw std::runtime_error("gave up after too many rounds");
    }

    // The paused holder. It takes the lock with a short lease, reads the
    // stock, and is frozen by the orchestrator (SIGSTOP) for longer than the
    // lease. Meanwhile the lease expires, the others sell with newer tokens.
    // Resumed, it carries on as if nothing happened, exactly as a process
    // after a long GC pause would: it writes with its old token. The store
    // refuses that write; the watchdog, on its own, reports the lease lost.
    asio::awaitable<void> victim_episode(int task, corolock::mutex& lock) {
        phase(task, "victim: acquiring");
        auto guard = co_await lock.acquire({.lease = opt_.sc.victim_lease, .wait = 20s});
        const auto token = guard.token();
        ++acquisitions_;
        emit("acq " + num(token) + " " + num(mono_ns()));
        // Only now may our siblings compete: the victim must hold first.
        for (int t = 1; t < opt_.sc.tasks; ++t) spawn_task(t, false);

        // The write is deliberately NOT bound to until_lost(): a pause can
        // strike between any check and the write, so a process cannot count
        // on noticing. The loss is watched alongside and reported when it
        // really happens; the wait is bounded in case it never does.
        phase(task, "victim: token " + num(token) + ": stale write, waiting for the lost signal");
        auto [lost, unused] = co_await (watch_lost(guard, 20s) && stale_write(token));
        (void)unused;
        if (!lost) emit("fail victim: no lost signal within 20 s");
        emit("rel " + num(token) + " " + num(mono_ns()));
        if (auto ec = co_await guard.release(); ec)
            emit("relerr " + num(token) + " " + ec.message());
    }

    asio::awaitable<bool> watch_lost(const corolock::guard& guard, std::chrono::milliseconds limit) {
        asio::steady_timer timer(ioc_, limit);
        auto r = co_await (guard.async_until_lost(nothrow) || timer.async_wait(nothrow));
        if (r.index() != 0 || std::get<0>(std::get<0>(r)) != corolock::error::lock_lost)
            co_return false;
        emit("lost " + num(guard.token()) + " " + num(mono_ns()));
        co_return true;
    }

    asio::awaitable<int> stale_write(std::uint64_t token) {
        const auto units = co_await store_.units();
        emit("holding " + num(token) + " " + num(units));
        // The orchestrator freezes us right after that line and queues
        // "continue" before it lets us run again.
        if (co_await read_line(30s) != "continue")
            throw std::runtime_error("no \"continue\" from the orchestrator");
        auto w = co_await store_.write_units(token, units - 1);
        if (w.accepted) {
            // Not stale after all (the pause did not outlive the lease):
            // it is an ordinary sale, so count it like one.
            co_await store_.count_sale();
            ++sales_;
            emit("sale " + num(token) + " " + num(units - 1));
        } else {
            emit("refused " + num(token) + " " + num(w.fence));
        }
        co_return 0;
    }

    asio::io_context& ioc_;
    const worker_options& opt_;
    corolock::client redis_;
    stock_store store_;
    asio::posix::stream_descriptor in_;
    std::string in_buf_;
    std::vector<std::string> phases_ = std::vector<std::string>(static_cast<std::size_t>(opt_.sc.tasks));
    int running_ = 0;
    int failures_ = 0;
    bool finished_ = false;
    std::int64_t sales_ = 0;
    std::int64_t acquisitions_ = 0;
};

}  // namespace

int run_worker(const worker_options& opt) {
    try {
        asio::io_context ioc;
        worker w(ioc, opt);
        w.start();
        // The orchestrator's deadline is shorter; this one only guarantees
        // that an orphaned worker cannot linger.
        ioc.run_for(opt.deadline);
        if (!w.finished()) {
            w.report_stuck();
            emit("fail worker " + std::to_string(opt.id) + ": did not finish in time");
            // Coroutines are still suspended on the worker's members; tearing
            // them down in order buys nothing here, so leave at once.
            std::_Exit(3);
        }
        return w.exit_code();
    } catch (const std::exception& ex) {
        emit(std::string("fail worker: ") + ex.what());
        return 2;
    }
}

}  // namespace demo
