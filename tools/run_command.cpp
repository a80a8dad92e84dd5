// corolock run: hold a lock while a child process runs.
//
// One thread, one io_context. The lock is a corolock::backend: a Redis
// client's (redis://, rediss://, redis+sentinel://), a Redis Cluster backend
// (redis+cluster://: a client is one connection), or an etcd, ZooKeeper
// or PostgreSQL backend (etcd://, etcds://, zk://, postgresql://). The
// phases, in order:
//   starting   check that the server answers (Redis: a PING; a Cluster:
//              the lock's status, on the node of its slot; etcd: a range
//              of the lock's keys; ZooKeeper: a session of the admin's own;
//              PostgreSQL: a connection of the admin's own), then acquire
//              (waiting via pub/sub on Redis, a watch on etcd and
//              ZooKeeper, the server's lock queue on PostgreSQL);
//              a signal cancels whichever of the two is in progress
//   running    the child runs; signals are passed on to it; the watchdog
//              renews; a lost lease stops the child (or is only reported)
//   finishing  the child has been reaped: release, explicitly and bounded
// A single coroutine (the signal pump) receives SIGINT/SIGTERM/SIGHUP for the
// whole life of the command and acts according to the phase, so that no
// signal is ever dropped between two waits.
//
// The child (run_child.hpp), the lock taken and held (run_lock.hpp) and the
// coroutines beside the flow (run_watch.cpp) have files of their own.

#include "cli.hpp"
#include "run_child.hpp"
#include "run_lock.hpp"
#include "run_state.hpp"

#include "etcd/etcd_admin.hpp"

#include <corolock/admin.hpp>
#include <corolock/backend.hpp>
#include <corolock/client.hpp>
#include <corolock/metrics.hpp>
#include <corolock/redlock.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <spdlog/spdlog.h>

#include <corolock/printable.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <optional>
#include <tuple>
#include <set>

namespace corolock::cli {

namespace asio = boost::asio;

namespace {

// The holder label the lock records: --label, --no-label, or COMMAND's
// program name.
std::string holder_label(const run_options& o) {
    return o.label ? *o.label : command_label(o.command);
}

// The release after a lost lease: Redis is often unreachable then (that is
// why the lease was lost), and a release that cannot happen must not keep
// corolock from exiting, so it gets this long and no more. Whatever it does
// not finish, the lease's end does.
constexpr duration lost_release_bound = std::chrono::milliseconds(200);

// The signals passed on to the child. SIGQUIT is left at its default (core
// dump of corolock itself), as the "really stop now" escape hatch.
constexpr int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP};

// Who holds a lock, for a person (-v, and a conflict's message, the line a
// cron mail shows): host:pid, since when, for how long and its label; the
// owner id when the lock records no holder (written by an older corolock).
std::string who_holds(const lock_status& st) {
    if (!st.holder) return "owner " + printable(st.owner);
    const auto& h = *st.holder;
    return holder_text(h) + " since " + format_time(h.since) + " (held for " +
           format_held_for(h.held_for) + ", " +
           (h.label.empty() ? std::string("no label") : "label '" + printable(h.label) + "'") +
           ")";
}

std::string seconds_text(std::chrono::steady_clock::duration d) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld.%03lld s", static_cast<long long>(ms / 1000),
                  static_cast<long long>(ms % 1000));
    return buf;
}

// Errors a failover causes while no primary answers yet: worth another look
// within --wait.
bool during_failover(const error_code& ec) {
    return ec == error::no_primary || ec == error::never_connected ||
           ec == error::connection_lost || ec == error::not_connected || ec == error::timeout;
}

asio::awaitable<int> run_flow(run_state& s) {
    const auto& o = s.o;
    // --wait counts from here: the reachability check below may wait out a
    // failover, and the acquire has what is left.
    const auto wait_end = o.wait ? std::chrono::steady_clock::now() + *o.wait
                                 : std::chrono::steady_clock::time_point::max();
    auto interrupted = [&](std::string_view while_doing) {
        report_error("got " + signal_name(s.pending_signal) + " while " +
                     std::string(while_doing) + "; nothing is held");
        return exit_status::signal_base + s.pending_signal;
    };

    // 1. Is the server there at all? Asked separately, so that a wrong URL
    // or a stopped server is reported within seconds instead of looking like
    // a lock that never frees up.
    run_lock lock(s.locks, o);
    const std::string& owner = lock.owner_id();
    if (s.etcd != nullptr) {
        // One range of the lock's keys: the reachability check and -v's
        // look at the holder at once. Bounded by the request timeout; a
        // signal meanwhile is acted on when it ends.
        auto [reach, st] = co_await s.etcd->status(o.names.front());
        if (s.pending_signal != 0) co_return interrupted("connecting to etcd");
        if (reach)
            co_return report_redis_failure(o.common, s.command(), reach,
                                           s.etcd->last_error().message);
        if (o.several()) {
            // Several NAMEs: the range was the reachability check only.
        } else if (st.held && st.holder.owner != owner) {
            const auto& h = st.holder.holder;
            std::string who = "owner " + printable(st.holder.owner);
            if (h)
                who = holder_text(*h) + " since " + format_time(h->since) + " (" +
                      (h->label.empty() ? std::string("no label")
                                        : "label '" + printable(h->label) + "'") +
                      ")";
            s.note("{} is held by {} (lease ends in {} s unless renewed, {} waiting); "
                   "waiting {}",
                   s.name(), who, st.ttl.count(), st.waiters.size(),
                   o.wait ? (o.wait->count() == 0 ? std::string("not at all (--no-wait)")
                                                  : "up to " + o.wait_text)
                          : std::string("until it is free"));
        } else if (!st.held) {
            s.note("{} is free (store revision {})", s.name(), st.revision);
        }
    } else if (s.store != nullptr) {
        // The admin's own session (ZooKeeper) or connection (PostgreSQL),
        // then one read of the lock for -v. Each bounded by the request
        // timeout; a signal meanwhile is acted on when it ends.
        const std::string service(service_name(o.common));
        const error_code reach = co_await s.store->connect();
        if (s.pending_signal != 0) co_return interrupted("connecting to " + service);
        if (reach)
            co_return report_redis_failure(o.common, s.command(), reach, s.store->last_error());
        if (s.log && !o.several()) {
            auto [sec, st] = co_await s.store->status(o.names.front());
            if (s.pending_signal != 0) co_return interrupted("connecting to " + service);
            if (sec) {
                s.note("could not read {}: {}", s.name(), printable(s.store->last_error()));
            } else if (st.held) {
                std::string who = "owner " + printable(st.owner);
                if (st.holder)
                    who = holder_text(*st.holder) + " since " + format_time(st.holder->since) +
                          " (" +
                          (st.holder->label.empty() ? std::string("no label")
                                                    : "label '" + printable(st.holder->label) + "'") +
                          ")";
                s.note("{} is held by {} ({} waiting); waiting {}", s.name(), who, st.waiters,
                       o.wait ? (o.wait->count() == 0 ? std::string("not at all (--no-wait)")
                                                      : "up to " + o.wait_text)
                              : std::string("until it is free"));
            } else {
                s.note("{} is free (last token {})", s.name(), st.last_token);
            }
        }
        s.store->stop();
    } else if (s.nodes != nullptr) {
        const int status = co_await check_majority_reachable(s);
        if (s.pending_signal != 0) co_return interrupted("connecting to Redis");
        if (status != exit_status::ok) co_return status;
    } else if (s.redis != nullptr) {
        // A Sentinel deployment fails over: while no Sentinel names a primary
        // (or the one named does not answer yet), the check is made again
        // through --wait, and only then is the cause reported. A single
        // server that does not answer is reported at once.
        const bool fails_over = o.common.cfg.mode == topology::sentinel;
        // Without --wait (wait until acquired) a failover still ends: a
        // minute covers Sentinel's (seconds, with its default timeouts less
        // than a minute); a deployment that names no primary for longer is
        // reported, not waited on in silence.
        const auto look_until =
            o.wait ? wait_end : std::chrono::steady_clock::now() + std::chrono::minutes(1);
        error_code reach;
        for (int look = 0; look < 1'000'000; ++look) {
            reach = co_await check_reachable(*s.redis, s.cancel_start.slot());
            s.cancel_start.slot().clear();
            if (s.pending_signal != 0) co_return interrupted("connecting to Redis");
            const auto now = std::chrono::steady_clock::now();
            if (!reach || !fails_over || !during_failover(reach) || now >= look_until) break;
            if (look == 0)
                s.note("no primary answers ({}); trying again for up to {}: the deployment may "
                       "be failing over",
                       printable(s.redis->last_error().message.empty()
                                     ? reach.message()
                                     : s.redis->last_error().message),
                       o.wait ? o.wait_text : std::string("a minute (no --wait)"));
            asio::steady_timer again(co_await asio::this_coro::executor,
                                     std::min<std::chrono::steady_clock::duration>(
                                         look_until - now, std::chrono::milliseconds(500)));
            co_await again.async_wait(
                asio::bind_cancellation_slot(s.cancel_start.slot(), use_nothrow));
            s.cancel_start.slot().clear();
            if (s.pending_signal != 0) co_return interrupted("connecting to Redis");
        }
        if (reach)
            co_return report_redis_failure(o.common, s.command(), reach,
                                           s.redis->last_error().message);
    } else {
        // A Redis Cluster: no client to PING through; the lock's status,
        // sent to the primary serving its slot, is the check (which also
        // waits for the slot map). A NOPERM there reads as rejected
        // credentials, as no PING told the two apart.
        auto [reach, st] = co_await async_lock_status(
            s.locks, o.names.front(),
            asio::bind_cancellation_slot(s.cancel_start.slot(), use_nothrow));
        s.cancel_start.slot().clear();
        if (s.pending_signal != 0) co_return interrupted("connecting to Redis");
        if (reach) co_return report_redis_failure(o.common, s.command(), reach, {});
    }

    // -v: who holds the lock, if anyone, before waiting for it: the holder
    // the lock records (host, pid, since when, its label or command), or its
    // owner id when it records none (a lock written by an older corolock).
    // (A semaphore's or shared mutex's holders are many, several NAMEs are
    // several locks, a RedLock's are on several servers: no status lookup.)
    if (s.log && o.common.redis() && !lock.has_many_holders() && !o.several() &&
        s.nodes == nullptr) {
        auto [sec, st] = co_await async_lock_status(s.locks, o.names.front(), use_nothrow);
        if (!sec && st.held && st.owner != owner) {
            const std::string who = who_holds(st);
            s.note("{} is held by {} (lease ends in {} ms unless renewed, levels {}); "
                   "waiting {}",
                   s.name(), who, st.ttl.count(), st.levels,
                   o.wait ? (o.wait->count() == 0 ? std::string("not at all (--no-wait)")
                                                  : "up to " + o.wait_text)
                          : std::string("until it is free"));
        } else if (!sec && !st.held) {
            s.note("{} is free (last token {})", s.name(), st.last_token);
        }
    }

    // 2. Acquire, waiting via the unlock channel (Redis), a watch (etcd,
    // ZooKeeper) or the server's lock queue (PostgreSQL).
    lock_options opts;
    opts.lease = o.lease;
    opts.replicas = o.replicas;
    opts.lock_delay = o.lock_delay;
    // What is left of --wait (a failover waited out above took its part).
    if (o.wait)
        opts.wait = std::chrono::duration_cast<duration>(
            std::max(wait_end - std::chrono::steady_clock::now(),
                     std::chrono::steady_clock::duration::zero()));
    const auto wait_start = std::chrono::steady_clock::now();
    error_code aec;
    held_lock g;
    std::tie(aec, g) = co_await lock.acquire(opts, s.cancel_start.slot());
    const auto waited = std::chrono::steady_clock::now() - wait_start;
    s.cancel_start.slot().clear();
    if (s.pending_signal != 0) {
        if (g)
            co_await release(g);  // granted just before the signal was seen
        else
            co_await drain_abandoned(s);
        co_return interrupted("waiting for " + s.name());
    }
    if (aec) co_await drain_abandoned(s);
    if (aec == error::wait_timeout || aec == error::lock_held) {
        s.note("gave up on {} after {}", s.name(), seconds_text(waited));
        if (!o.quiet) {
            // Who holds it, without -v: what a cron mail should say. Where
            // one status names the holder: the backend-neutral admin status,
            // on Redis, etcd, ZooKeeper and PostgreSQL alike; on RedLock the
            // first node that answers with another owner's hold (the holder
            // record is written with the grant on each node).
            std::string holder;
            if (!lock.has_many_holders() && !o.several() && s.nodes == nullptr) {
                auto [sec, st] = co_await async_lock_status(s.locks, o.names.front(), use_nothrow);
                if (!sec && st.held && st.owner != owner) holder = who_holds(st);
            } else if (!lock.has_many_holders() && !o.several()) {
                for (const auto& node : *s.nodes) {
                    auto [sec, st] = co_await async_lock_status(node, o.names.front(), use_nothrow);
                    if (sec || !st.held || st.owner == owner) continue;
                    holder = who_holds(st);
                    break;
                }
            }
            if (o.wait && o.wait->count() == 0)
                report_error(s.name() +
                             (o.several() ? " are not all free (--no-wait)"
                                          : " is held by another owner (--no-wait)") +
                             (holder.empty() ? "" : ": " + holder));
            else
                report_error(s.name() + " not acquired within " + o.wait_text +
                             (holder.empty() ? "" : "; held by " + holder));
        }
        co_return o.conflict_exit_code;
    }
    if (aec == error::wrong_type && o.common.redis() && o.capacity == 0 && !o.several() &&
        s.nodes == nullptr) {
        // The name is another kind of lock: say which, and what to add.
        auto [sec, st] = co_await async_lock_status(s.locks, o.names.front(), use_nothrow);
        if (!sec && st.type == lock_type::semaphore) {
            const std::string n = st.capacity > 0 ? std::to_string(st.capacity) : "N";
            report_error("acquire " + s.name() + ": the name is a semaphore" +
                         (st.capacity > 0 ? " of " + n + " permits" : std::string()) +
                         ", not a lock: add --capacity " + n + " to take one of its permits");
            co_return exit_status::remote_error;
        }
    }
    if (aec == error::not_supported && o.elect()) {
        report_error("elect: " + service_at(o.common) + " offers no leader election" +
                     (o.common.redlock() ? " (RedLock has no fair mutex and no fencing token)"
                                         : std::string()) +
                     "; docs/election.md lists the backends that do");
        co_return exit_status::remote_error;
    }
    if (aec == error::not_supported && o.lock_delay.count() > 0) {
        report_error("acquire " + s.name() + ": --lock-delay is not supported by " +
                     service_at(o.common) + "; run without it");
        co_return exit_status::remote_error;
    }
    if (aec)
        co_return report_redis_failure(o.common, "acquire " + s.name(), aec,
                                       // etcd: the backend's own cause is not at hand
                                       s.redis != nullptr ? s.redis->last_error().message
                                                          : std::string(),
                                       true);
    s.note("acquired {} (token {}, lease {}) after waiting {}", s.name(), g.tokens_text(),
           o.lease_text, seconds_text(waited));

    // 3. Start the command.
    close_own_descriptors_on_exec(*s.inherited_fds);
    const int spawn_error = s.child.spawn(o.command, child_environment(o, g.tokens(o)), s.spawn);
    if (spawn_error != 0) {
        s.current = phase::finishing;
        co_await release(g);
        if (spawn_error == ENOENT) {
            report_error(printable(o.command[0]) + ": command not found");
            co_return exit_status::not_found;
        }
        report_error(printable(o.command[0]) + ": " + std::strerror(spawn_error));
        if (spawn_error == EACCES || spawn_error == ENOEXEC || spawn_error == EISDIR ||
            spawn_error == EPERM)
            co_return exit_status::cannot_execute;
        co_return exit_status::os_error;
    }
    s.current = phase::running;
    s.held = &g;
    s.note("started {}: {}", s.target(), printable(o.command[0]));

    // 4. Wait for it; a lost lease is handled alongside.
    const auto ex = co_await asio::this_coro::executor;
    asio::co_spawn(ex, handle_loss(s, g), asio::detached);
    if (s.log && s.log->should_log(spdlog::level::debug))
        asio::co_spawn(ex, note_renewals(s), asio::detached);
    const int wait_status = co_await wait_for_child(s);
    s.current = phase::finishing;
    s.held = nullptr;
    const int child_status = status_of(wait_status);
    s.note("command exited with status {}", child_status);

    // 5. Release, explicitly: bounded by the command timeout, or by far less
    // once the lease is lost.
    if (s.lost) {
        if (o.on_lost == on_lost_action::kill) {
            // What the command left in its group (a background job that
            // ignored SIGTERM) must not run on without the lock either.
            s.child.kill_leftovers();
            const error_code rec = co_await bounded_release(g, lost_release_bound);
            if (rec == asio::error::operation_aborted)
                s.note("no answer to the release within {}; not waiting for it",
                       format_duration(lost_release_bound));
            report_error(s.name() + " was lost while the command ran (exit " +
                         std::to_string(exit_status::lease_lost) + ")");
            co_return exit_status::lease_lost;
        }
        co_await bounded_release(g, lost_release_bound);
        co_return child_status;
    }
    const error_code rec = co_await release(g);
    if (rec == error::expired || rec == error::not_owner) {
        report_warning("the lease on " + s.name() +
                       " had ended before the command finished (" + rec.message() +
                       "): part of its work may have run unprotected");
        if (o.on_lost == on_lost_action::kill) co_return exit_status::lease_lost;
    } else if (rec) {
        report_warning("could not confirm the release of " + s.name() + " (" +
                       rec.message() + "); " + std::string(service_name(o.common)) +
                       " frees it within " + o.lease_text +
                       " at the latest");
    } else {
        s.note("released {}", s.name());
    }
    co_return child_status;
}

// The run itself; `m` gets the client's metrics at its end.
int run_measured(const run_options& o, metrics_snapshot& m) {
    // Taken before anything of ours is open: these are passed on to COMMAND.
    const auto inherited = open_descriptors();

    asio::io_context ioc(1);
    asio::signal_set forwarded(ioc);
    for (int signo : forwarded_signals) {
        // A signal ignored when we start (nohup, or SIGINT for a background
        // job of a non-interactive shell) stays ignored, for us and for the
        // child alike, as it would without corolock in between.
        struct sigaction current {};
        if (::sigaction(signo, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
        forwarded.add(signo);
    }
    // Registered before the child exists, so its SIGCHLD cannot be missed.
    asio::signal_set sigchld(ioc, SIGCHLD);
    // A closed stderr must not kill corolock while it holds the lock and
    // supervises the child (the lock would then only free at lease end, and
    // the child would run on unsupervised). The child gets SIGPIPE's
    // default back; one that was ignored when we started stays ignored.
    bool sigpipe_was_default = false;
    if (struct sigaction current {}; ::sigaction(SIGPIPE, nullptr, &current) == 0 &&
                                     current.sa_handler == SIG_DFL) {
        sigpipe_was_default = true;
        ::signal(SIGPIPE, SIG_IGN);
    }

    // Redis: a client, whose lock backend the mutex uses; a Redis Cluster,
    // which a client cannot speak to: a backend from the same config. etcd:
    // a backend of its own, plus an admin for the first look at the lock.
    // Either way the holder label is --label, or COMMAND's program name.
    std::optional<client> redis;
    std::vector<client> nodes;  // several --url: RedLock's
    std::unique_ptr<detail::etcd::admin> etcd;
    std::unique_ptr<store_admin> store;  // zk://, postgresql://
    std::optional<backend> locks;
    std::shared_ptr<spdlog::logger> log;
    try {
        if (!o.common.redis()) {
            // etcd, ZooKeeper and PostgreSQL offer the plain mutex (and
            // multi_lock over it), each granted in order of arrival.
            const std::string at = " (" + service_at(o.common) + ")";
            const std::string service(service_name(o.common));
            std::string refused;
            if (o.capacity > 0)
                refused = "--capacity is not supported on " + service + at +
                          ": semaphores need Redis";
            else if (o.level != lock_level::mutex)
                refused = std::string(o.level == lock_level::shared ? "-s (--shared)"
                                                                    : "-x (--exclusive)") +
                          " is not supported on " + service + at + ": shared mutexes need Redis";
            else if (o.fair)
                refused = "--fair is offered on Redis only: " + service +
                          "'s lock is granted in order of arrival already";
            else if (o.replicas > 0 && o.common.kind != url_kind::etcd)
                refused = "--replicas is not supported on " + service + at +
                          ": replica acknowledgement needs Redis (" +
                          (o.common.kind == url_kind::zk
                               ? "a ZooKeeper write is committed by a quorum already"
                               : "PostgreSQL's synchronous_standby_names decides it") +
                          ")";
            if (!refused.empty()) {
                report_error(refused);
                return exit_status::usage;
            }
            log = make_logger(o.common.verbosity);
            if (o.common.kind == url_kind::etcd)
                etcd = make_etcd_admin(ioc.get_executor(), o.common);
            else
                store = make_store_admin(ioc.get_executor(), o.common);
            backend_config bc;
            bc.holder_label = holder_label(o);
            locks.emplace(ioc.get_executor(), o.common.url, bc);
        } else if (o.common.redlock()) {
            // One client per node (the reachability check PINGs each), each
            // with the tool's short bounds and logger; the RedLock backend
            // over their lock backends. Options the parser checked.
            log = make_logger(o.common.verbosity);
            std::vector<backend> node_backends;
            nodes.reserve(o.common.nodes.size());
            for (const auto& node : o.common.nodes) {
                config cfg = tool_config(node, 0);
                cfg.logger = log;
                cfg.holder_label = holder_label(o);
                nodes.emplace_back(ioc.get_executor(), cfg);
                node_backends.push_back(nodes.back().lock_backend());
            }
            redlock_settings rs;
            if (o.common.redlock_node_timeout) rs.node_timeout = *o.common.redlock_node_timeout;
            locks.emplace(open_redlock(ioc.get_executor(), std::move(node_backends), rs));
        } else {
            config cfg = tool_config(o.common);
            cfg.holder_label = holder_label(o);
            log = cfg.logger;
            if (cfg.mode == topology::cluster) {
                // Refused by the library too, but only once connected, at
                // the acquire: said here at once, as a usage error.
                if (o.replicas > 0) {
                    std::string why = "--replicas is not supported on a Redis Cluster (";
                    why += service_at(o.common);
                    why += "): replica acknowledgement needs one primary (redis:// or "
                           "redis+sentinel://)";
                    report_error(why);
                    return exit_status::usage;
                }
                locks.emplace(ioc.get_executor(), cfg);
            } else {
                redis.emplace(ioc.get_executor(), cfg);
                locks.emplace(redis->lock_backend());
            }
        }
    } catch (const std::exception& e) {
        report_error(std::string("bad configuration: ") + e.what());
        return exit_status::usage;
    }

    run_state s(o, redis ? &*redis : nullptr, etcd.get(), *locks, forwarded, sigchld);
    s.nodes = nodes.empty() ? nullptr : &nodes;
    s.store = store.get();
    s.log = log;
    s.inherited_fds = &inherited;
    s.spawn.restore_sigpipe = sigpipe_was_default;
    s.spawn.own_process_group = o.own_process_group;
    // In the foreground of a terminal, COMMAND's group gets the terminal
    // (reads, Ctrl-C, Ctrl-Z reach it as they would without corolock).
    if (o.own_process_group && ::isatty(STDIN_FILENO) == 1 &&
        ::tcgetpgrp(STDIN_FILENO) == ::getpgrp())
        s.spawn.terminal_fd = STDIN_FILENO;

    asio::co_spawn(ioc, signal_pump(s), asio::detached);
    int status = exit_status::os_error;
    asio::co_spawn(ioc, run_flow(s), [&](std::exception_ptr e, int result) {
        status = result;
        if (e) {
            status = report_internal_error(e);
            if (s.child.running()) {
                // Never leave the command running without its lock.
                s.child.signal(SIGKILL);
                int ignored = 0;
                ::waitpid(s.child.pid(), &ignored, 0);
                take_terminal_back(s.child.terminal_fd());
            }
        }
        forwarded.cancel();
        sigchld.cancel();
        if (redis) redis->stop();
        for (auto& c : nodes) c.stop();
        locks->stop();
        if (etcd) etcd->stop();
        if (store) store->stop();
        // The client's reconnect loop never runs out of work by itself.
        ioc.stop();
    });
    ioc.run();
    m = redis ? redis->metrics() : locks->metrics();
    return status;
}

}  // namespace

int run_command(const run_options& o) {
    metrics_snapshot m;
    const int status = run_measured(o, m);
    if (!o.metrics_file.empty()) {
        // Written whatever the outcome (a conflict, a failure), and never
        // changing the exit status: a cron job's metrics are secondary.
        if (auto why = write_file_atomically(o.metrics_file, run_metrics_text(o.name, m, status)))
            report_warning("could not write --metrics-file '" + o.metrics_file + "': " + *why);
    }
    return status;
}

}  // namespace corolock::cli
