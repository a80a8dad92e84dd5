// The orchestrator. Process handling is plain POSIX (fork/exec, pipes,
// poll, SIGSTOP/SIGCONT); only the store's setup and final read go through
// corolock::client.
//
// Workers are started before this process opens any socket: Asio does not
// mark sockets close-on-exec, and a worker must not inherit our Redis
// connection. Every pipe is created O_CLOEXEC for the same reason, so a
// worker's stdout reaches EOF exactly when that worker exits.
#include "orchestrator.hpp"

#include "store.hpp"

#include <corolock/corolock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace demo {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

namespace {

volatile std::sig_atomic_t interrupted = 0;
extern "C" void on_interrupt(int) { interrupted = 1; }

struct worker_proc {
    int index = 0;
    bool victim = false;
    pid_t pid = -1;
    int in_fd = -1;   // our end of the worker's stdin
    int out_fd = -1;  // our end of the worker's stdout
    std::string buf;  // a partial line
    bool ready = false;
    bool reaped = false;
    int status = 0;
};

// Everything the workers reported, merged.
struct history {
    std::map<std::int64_t, std::int64_t> acq_ns;  // token -> acquire returned
    std::map<std::int64_t, int> acq_worker;        // token -> the worker that acquired it
    std::map<std::int64_t, std::int64_t> rel_ns;  // token -> release called
    std::int64_t acquisitions = 0;
    std::int64_t duplicate_tokens = 0;
    std::int64_t sales = 0;
    struct refusal { int worker; std::int64_t token; std::int64_t fence; };
    std::vector<refusal> refused;
    struct loss { int worker; std::int64_t token; };
    std::vector<loss> lost;
    std::int64_t victim_token = -1;
    std::int64_t victim_units_read = -1;
    int done = 0;
    std::vector<std::string> failures;
};

class orchestrator {
public:
    explicit orchestrator(const scenario& sc) : sc_(sc) {}
    ~orchestrator() { kill_all(); }

    int run();

private:
    void spawn(int index, bool victim);
    void send(worker_proc& w, std::string_view line);
    void on_line(worker_proc& w, std::string_view line);
    // Reads worker output and reaps exits until pred() holds, the deadline
    // passes or we are interrupted. Returns pred()'s final value.
    // With stop_on_lost, a worker that died (rather than finished) ends the
    // wait early; otherwise the others still get to report.
    template <class Pred>
    bool pump_until(clock::time_point deadline, Pred pred, bool stop_on_lost = true);
    bool pump_for(clock::duration d) {
        const auto until = clock::now() + d;
        pump_until(until, [] { return false; });
        return !interrupted && !lost_worker_;
    }
    void reap(bool block_briefly);
    bool all_reaped() const;
    void kill_all() noexcept;
    bool freeze_victim(worker_proc& v);
    int summarize(const stock_store::totals& t, double elapsed_s);

    // Runs one coroutine against Redis on our own client, bounded in time.
    template <class F>
    void redis_call(F&& f, std::chrono::seconds limit);

    // The whole run's budget, and the workers' (a little less, so that a
    // stuck worker can still report where it is stuck before we give up).
    std::chrono::milliseconds run_budget() const { return std::chrono::milliseconds(45000) + sc_.pause; }
    std::chrono::milliseconds worker_deadline() const { return run_budget() - std::chrono::milliseconds(3000); }

    const scenario& sc_;
    std::vector<worker_proc> workers_;
    history h_;
    bool lost_worker_ = false;  // a worker exited before saying "done"
    double frozen_s_ = 0;
    // When the victim was resumed, on the shared monotonic clock.
    std::int64_t resume_ns_ = 0;
};

void orchestrator::spawn(int index, bool victim) {
    int in_pipe[2];
    int out_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
        ::close(in_pipe[0]);
        ::close(in_pipe[1]);
        throw std::runtime_error("pipe2 failed");
    }
    // Everything the child needs is prepared before fork: after it, the
    // child only calls async-signal-safe functions until exec.
    std::vector<std::string> args = {
        "corolock_demo", "worker", "--id", std::to_string(index),
        "--tasks", std::to_string(sc_.tasks),
        "--stock", std::to_string(sc_.stock),
        "--lease-ms", std::to_string(sc_.lease.count()),
        "--victim-lease-ms", std::to_string(sc_.victim_lease.count()),
        "--sku", sc_.sku,
        "--deadline-ms", std::to_string(worker_deadline().count())};
    if (victim) args.push_back("--victim");
    if (!sc_.use_lock) args.push_back("--no-lock");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The URL may carry a password: it goes in the environment, which other
    // users cannot read, instead of argv, which `ps` shows to everyone.
    std::string url_env = "COROLOCK_DEMO_WORKER_URL=" + sc_.url;
    std::vector<char*> envp;
    for (char** e = environ; *e != nullptr; ++e) {
        if (std::strncmp(*e, "COROLOCK_DEMO_WORKER_URL=", 25) != 0) envp.push_back(*e);
    }
    envp.push_back(url_env.data());
    envp.push_back(nullptr);
    const pid_t parent = ::getpid();

    const pid_t pid = ::fork();
    if (pid < 0) {
        for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) ::close(fd);
        throw std::runtime_error("fork failed");
    }
    if (pid == 0) {
        // If we die, even by SIGKILL, the workers die too; a frozen worker
        // would otherwise stay frozen forever.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        ::dup2(in_pipe[0], STDIN_FILENO);
        ::dup2(out_pipe[1], STDOUT_FILENO);
        ::execve("/proc/self/exe", argv.data(), envp.data());
        ::_exit(127);
    }
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    worker_proc w;
    w.index = index;
    w.victim = victim;
    w.pid = pid;
    w.in_fd = in_pipe[1];
    w.out_fd = out_pipe[0];
    workers_.push_back(std::move(w));
}

void orchestrator::send(worker_proc& w, std::string_view line) {
    if (w.in_fd < 0) return;
    std::string out(line);
    out.push_back('\n');
    // A few bytes into an empty pipe: one write, which cannot block.
    if (::write(w.in_fd, out.data(), out.size()) != static_cast<ssize_t>(out.size()))
        h_.failures.push_back("could not write to worker " + std::to_string(w.index));
}

void orchestrator::on_line(worker_proc& w, std::string_view line) {
    auto ev = parse_event(line);
    if (!ev) return;
    const auto& k = ev->kind;
    if (k == "ready") {
        w.ready = true;
    } else if (k == "acq" && ev->num(0) && ev->num(1)) {
        ++h_.acquisitions;
        if (!h_.acq_ns.emplace(*ev->num(0), *ev->num(1)).second) ++h_.duplicate_tokens;
        h_.acq_worker.emplace(*ev->num(0), w.index);
    } else if (k == "rel" && ev->num(0) && ev->num(1)) {
        h_.rel_ns.emplace(*ev->num(0), *ev->num(1));
    } else if (k == "sale") {
        ++h_.sales;
    } else if (k == "refused" && ev->num(0) && ev->num(1)) {
        h_.refused.push_back({w.index, *ev->num(0), *ev->num(1)});
    } else if (k == "lost" && ev->num(0)) {
        h_.lost.push_back({w.index, *ev->num(0)});
    } else if (k == "holding" && ev->num(0) && ev->num(1)) {
        h_.victim_token = *ev->num(0);
        h_.victim_units_read = *ev->num(1);
    } else if (k == "done") {
        ++h_.done;
    } else if (k == "fail") {
        h_.failures.push_back("worker " + std::to_string(w.index) + ": " +
                              std::string(line.substr(std::min<std::size_t>(5, line.size()))));
    }
}

void orchestrator::reap(bool block_briefly) {
    for (auto& w : workers_) {
        if (w.reaped || w.pid <= 0) continue;
        int status = 0;
        pid_t r = ::waitpid(w.pid, &status, WNOHANG);
        // After SIGKILL, death is prompt; give it a bounded moment.
        for (int i = 0; block_briefly && r == 0 && i < 200; ++i) {
            ::usleep(10'000);
            r = ::waitpid(w.pid, &status, WNOHANG);
        }
        if (r == w.pid) {
            w.reaped = true;
            w.status = status;
            if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) lost_worker_ = true;
        }
    }
}

bool orchestrator::all_reaped() const {
    return std::all_of(workers_.begin(), workers_.end(), [](const worker_proc& w) {
        return w.reaped && w.out_fd < 0;
    });
}

template <class Pred>
bool orchestrator::pump_until(clock::time_point deadline, Pred pred, bool stop_on_lost) {
    // Bounded by the deadline: every pass waits at most 50 ms in poll().
    while (!pred() && !interrupted && clock::now() < deadline) {
        std::vector<pollfd> fds;
        std::vector<worker_proc*> owners;
        for (auto& w : workers_) {
            if (w.out_fd < 0) continue;
            fds.push_back({w.out_fd, POLLIN, 0});
            owners.push_back(&w);
        }
        if (!fds.empty()) {
            const int n = ::poll(fds.data(), fds.size(), 50);
            if (n < 0 && errno != EINTR) throw std::runtime_error("poll failed");
        } else {
            ::usleep(20'000);
        }
        for (std::size_t i = 0; i < fds.size(); ++i) {
            if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
            auto& w = *owners[i];
            char chunk[4096];
            const auto n = ::read(w.out_fd, chunk, sizeof chunk);
            if (n > 0) {
                w.buf.append(chunk, static_cast<std::size_t>(n));
                std::size_t nl;
                while ((nl = w.buf.find('\n')) != std::string::npos) {
                    on_line(w, std::string_view(w.buf).substr(0, nl));
                    w.buf.erase(0, nl + 1);
                }
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                ::close(w.out_fd);
                w.out_fd = -1;
            }
        }
        reap(false);
        // A worker that died (not one that finished) may end the wait early.
        if (stop_on_lost && lost_worker_) return pred();
    }
    return pred();
}

void orchestrator::kill_all() noexcept {
    for (auto& w : workers_) {
        if (!w.reaped && w.pid > 0) ::kill(w.pid, SIGKILL);  // also ends a frozen one
    }
    reap(true);
    for (auto& w : workers_) {
        if (w.in_fd >= 0) ::close(w.in_fd);
        if (w.out_fd >= 0) ::close(w.out_fd);
        w.in_fd = w.out_fd = -1;
    }
}

bool orchestrator::freeze_victim(worker_proc& v) {
    if (::kill(v.pid, SIGSTOP) != 0) return false;
    // SIGSTOP is asynchronous: wait (bounded) until the kernel reports the
    // worker stopped, so the pause we report is the pause it had.
    for (int i = 0; i < 200; ++i) {
        int status = 0;
        const pid_t r = ::waitpid(v.pid, &status, WUNTRACED | WNOHANG);
        if (r == v.pid && WIFSTOPPED(status)) return true;
        if (r == v.pid) {  // it exited instead
            v.reaped = true;
            v.status = status;
            lost_worker_ = true;
            return false;
        }
        ::usleep(5'000);
    }
    return false;
}

template <class F>
void orchestrator::redis_call(F&& f, std::chrono::seconds limit) {
    asio::io_context ioc;
    auto cfg = corolock::config::from_url(sc_.url);
    cfg.client_name = "corolock-demo-orchestrator";
    corolock::client redis(ioc.get_executor(), cfg);
    auto fut = asio::co_spawn(ioc, f(redis), asio::use_future);
    const auto deadline = clock::now() + limit;
    // Bounded by the deadline; each pass runs at most 50 ms of handlers.
    while (fut.wait_for(0s) != std::future_status::ready && clock::now() < deadline)
        ioc.run_one_for(50ms);
    redis.stop();
    ioc.run_for(1s);  // let the client's own work wind down after stop()
    if (fut.wait_for(0s) != std::future_status::ready)
        throw std::runtime_error("no answer from Redis at " + corolock::config::from_url(sc_.url).host +
                                 " within " + std::to_string(limit.count()) + " s");
    fut.get();  // rethrows the coroutine's exception
}

int orchestrator::run() {
    const auto started = clock::now();
    // One deadline for the whole run, so nothing here can hang.
    const auto deadline = started + run_budget();

    for (int i = 0; i < sc_.workers; ++i) spawn(i, sc_.use_lock && i == 0);

    try {
        redis_call([this](corolock::client& redis) -> asio::awaitable<void> {
            stock_store store(redis, sc_);
            co_await store.reset(sc_.stock);
        }, 10s);
    } catch (const std::exception& ex) {
        std::cerr << "corolock demo: cannot set up the store at " << sc_.url << ": " << ex.what()
                  << "\n";
        return 2;
    }

    auto fail = [&](const std::string& why) {
        std::cerr << "corolock demo: " << why << "\n";
        for (const auto& f : h_.failures) std::cerr << "  " << f << "\n";
        kill_all();
        return interrupted ? 130 : 2;
    };

    const bool all_ready = pump_until(std::min(deadline, clock::now() + 20s), [&] {
        return std::all_of(workers_.begin(), workers_.end(),
                           [](const worker_proc& w) { return w.ready; });
    });
    if (!all_ready) return fail("the workers did not get ready (is Redis reachable?)");

    if (sc_.use_lock) {
        auto& victim = workers_.front();
        send(victim, "go");
        if (!pump_until(std::min(deadline, clock::now() + 20s), [&] { return h_.victim_token >= 0; }))
            return fail("the victim worker never reported holding the lock");
        if (!freeze_victim(victim)) return fail("could not freeze the victim worker");
        const auto frozen_at = clock::now();
        for (auto& w : workers_)
            if (!w.victim) send(w, "go");
        // While it is frozen, its lease runs out on the server and the
        // others take the lock with newer tokens.
        if (!pump_for(sc_.pause)) return fail("interrupted or a worker died during the pause");
        // Queued before it runs again, so it finds the line as soon as it wakes.
        send(victim, "continue");
        frozen_s_ = std::chrono::duration<double>(clock::now() - frozen_at).count();
        if (::kill(victim.pid, SIGCONT) != 0) return fail("could not resume the victim worker");
        resume_ns_ = mono_ns();
    } else {
        for (auto& w : workers_) send(w, "go");
    }

    pump_until(deadline, [&] { return all_reaped(); }, false);
    if (interrupted) return fail("interrupted");
    if (!all_reaped() || lost_worker_ || h_.done != sc_.workers) {
        for (const auto& w : workers_) {
            if (!w.reaped)
                h_.failures.push_back("worker " + std::to_string(w.index) + " (pid " +
                                      std::to_string(w.pid) + ") still running at the deadline");
            else if (!(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0))
                h_.failures.push_back("worker " + std::to_string(w.index) + " exited with status " +
                                      std::to_string(WIFEXITED(w.status) ? WEXITSTATUS(w.status)
                                                                          : 128 + WTERMSIG(w.status)));
        }
        return fail("the workers did not all finish");
    }

    stock_store::totals totals;
    try {
        redis_call([this, &totals](corolock::client& redis) -> asio::awaitable<void> {
            stock_store store(redis, sc_);
            totals = co_await store.read_totals();
        }, 10s);
    } catch (const std::exception& ex) {
        return fail(std::string("cannot read the store's final state: ") + ex.what());
    }
    const double elapsed = std::chrono::duration<double>(clock::now() - started).count();
    return summarize(totals, elapsed);
}

double percentile(const std::vector<double>& sorted, double p) {
    // Nearest rank: the smallest value with at least p of the data at or below it.
    const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
    return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

std::string fmt(const char* format, double v) {
    char out[64];
    std::snprintf(out, sizeof out, format, v);
    return out;
}

int orchestrator::summarize(const stock_store::totals& t, double elapsed_s) {
    // Handoff: the next token's acquire return minus this token's release
    // call, across processes, on the shared monotonic clock. The paused
    // holder never handed over (its lease expired), so it is left out.
    // So is a handoff to one of the victim's siblings released while they
    // were frozen with it: they could only take the lock once resumed.
    std::vector<double> handoffs_ms;
    int overlaps = 0;
    int spanning_pause = 0;
    for (const auto& [token, rel] : h_.rel_ns) {
        if (token == h_.victim_token) continue;
        // The next holder has the next larger token (tokens rise strictly
        // but not by one: they follow the server's clock).
        auto next = h_.acq_ns.upper_bound(token);
        if (next == h_.acq_ns.end()) continue;
        const bool to_frozen = resume_ns_ != 0 && rel < resume_ns_ &&
                               workers_[static_cast<std::size_t>(h_.acq_worker[next->first])].victim;
        if (to_frozen) {
            ++spanning_pause;
            continue;
        }
        const auto d = next->second - rel;
        // The next holder acquired before this one even called release: the
        // two held the lock at once.
        if (d < 0) ++overlaps;
        else handoffs_ms.push_back(static_cast<double>(d) / 1e6);
    }
    std::sort(handoffs_ms.begin(), handoffs_ms.end());

    const std::int64_t initial = sc_.stock;
    const bool oversold = h_.sales > initial - t.units || t.counter != h_.sales;
    const bool complete = h_.sales == initial && t.units == 0 && t.counter == h_.sales;

    int victim_refusals = 0;
    std::int64_t victim_fence = 0;
    for (const auto& r : h_.refused) {
        if (r.token == h_.victim_token) {
            ++victim_refusals;
            victim_fence = r.fence;
        }
    }
    const auto refused = static_cast<int>(h_.refused.size());
    const auto lost = static_cast<int>(h_.lost.size());

    std::cout << "corolock demo: " << sc_.workers << " workers x " << sc_.tasks
              << " coroutines selling " << sc_.stock << " units of " << sc_.lock_name()
              << (sc_.use_lock ? "" : " WITHOUT the lock") << "\n";
    std::cout << "  acquisitions        : " << h_.acquisitions << "\n";
    if (handoffs_ms.empty()) {
        std::cout << "  handoff latency     : n/a (no consecutive handoffs)\n";
    } else {
        std::cout << "  handoff latency     : p50 " << fmt("%.2f", percentile(handoffs_ms, 0.50))
                  << " ms, p99 " << fmt("%.2f", percentile(handoffs_ms, 0.99)) << " ms, max "
                  << fmt("%.2f", handoffs_ms.back()) << " ms over " << handoffs_ms.size()
                  << " handoffs";
        if (spanning_pause > 0) std::cout << " (" << spanning_pause << " spanning the pause left out)";
        std::cout << "\n";
    }
    std::cout << "  oversold            : " << (oversold ? "YES" : "no") << " (sold " << h_.sales
              << ", stock " << t.units << ", counter " << t.counter << ")\n";
    std::cout << "  stale writes refused: " << refused;
    if (victim_refusals > 0)
        std::cout << " (the paused worker's, token " << h_.victim_token << " < " << victim_fence << ")";
    if (refused > victim_refusals) std::cout << " (" << refused - victim_refusals << " by running holders!)";
    std::cout << "\n";
    std::cout << "  lost signals fired  : " << lost;
    if (lost > 0 && std::all_of(h_.lost.begin(), h_.lost.end(),
                                [&](const auto& l) { return l.token == h_.victim_token; }))
        std::cout << " (the paused worker's watchdog)";
    std::cout << "\n";
    if (sc_.use_lock) {
        std::cout << "  paused worker       : frozen " << fmt("%.2f", frozen_s_) << " s with a "
                  << fmt("%.2f", static_cast<double>(sc_.victim_lease.count()) / 1000.0)
                  << " s lease, holding token " << h_.victim_token << "\n";
    }
    if (overlaps > 0 || h_.duplicate_tokens > 0)
        std::cout << "  OVERLAPPING HOLDERS : " << overlaps << " (duplicate tokens "
                  << h_.duplicate_tokens << ")\n";
    std::cout << "  elapsed             : " << fmt("%.1f", elapsed_s) << " s\n";

    std::vector<std::string> problems;
    if (!complete) {
        problems.push_back(oversold ? "oversold: more sales than units left the stock"
                                    : "not every unit was sold");
    }
    if (victim_refusals < 1) problems.push_back("no stale write was refused");
    if (lost < 1) problems.push_back("no lost signal fired");
    if (!h_.failures.empty()) problems.push_back("a worker reported a failure");

    if (problems.empty()) {
        std::cout << "Shown: " << sc_.workers * sc_.tasks
                  << " sellers never oversold under the lock; the worker frozen past its lease "
                     "woke up and wrote with token "
                  << h_.victim_token << ", the store refused it because token " << victim_fence
                  << " had already written, and its watchdog reported the lease lost.\n";
        return 0;
    }
    std::cout << "corolock demo: FAILED:";
    for (const auto& p : problems) std::cout << " " << p << ";";
    std::cout << "\n";
    for (const auto& f : h_.failures) std::cout << "  " << f << "\n";
    if (!sc_.use_lock)
        std::cout << "(Expected: without the lock, concurrent read-then-write sells units twice.)\n";
    return 1;
}

}  // namespace

int run_orchestrator(const scenario& sc) {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: poll() returns EINTR and we notice at once
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGHUP, &sa, nullptr);
    // A worker that died leaves a closed stdin pipe; writing to it must not kill us.
    ::signal(SIGPIPE, SIG_IGN);
    try {
        orchestrator o(sc);
        return o.run();
    } catch (const std::exception& ex) {
        std::cerr << "corolock demo: " << ex.what() << "\n";
        return 2;
    }
}

}  // namespace demo
