// A lock service for the conformance suite, whatever the backend.
//
// The conformance suite (test/conformance) runs the same cases against every
// backend. It never names a backend's server class: it asks
// start_lock_server() for the backend named by COROLOCK_CONFORMANCE_BACKEND
// and talks to it only through this interface (and to the lock only through
// the public API: backend, mutex, guard, lock_options).
//
// Each implementation starts a throwaway server (or cluster) of its own on
// free loopback ports, answers before its constructor returns, and stops
// every process it started, by PID, in its destructor (never throws). The
// Redis Sentinel and Redis Cluster backends ("sentinel", "cluster") are
// fleets of six processes that take seconds to start: they start one fleet
// per process, on the first case that asks, share it among the cases (each
// case uses lock names of its own) and stop it when the process exits.
// Their kill9/pause/resume/restart act on a primary (see lock_server.cpp).
// RedLock ("redlock") runs on three redis-servers started for each case;
// its kill9/pause/resume/restart act on the first of them (a minority).
//
// A new backend plugs in with one entry in the factory table in
// lock_server.cpp (see "Adding a backend" there).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace corolock::test {

class lock_server {
public:
    virtual ~lock_server() = default;

    // The URL a lock client opens (corolock::backend), e.g.
    // "redis://127.0.0.1:PORT" or "etcd://127.0.0.1:PORT".
    virtual std::string url() const = 0;
    // The same service reached through 127.0.0.1:port instead (a fault
    // proxy in front of port()): same scheme, same credentials and options.
    virtual std::string url_via(std::uint16_t port) const = 0;
    // The URL scheme: "redis", "etcd", "redis+sentinel", ...
    virtual std::string scheme() const = 0;
    // The backend's name in the factory table (COROLOCK_CONFORMANCE_BACKEND):
    // the scheme, unless the class says otherwise.
    virtual std::string backend() const { return scheme(); }
    // Why a proxy on url_via() would not stand in the lock traffic's path,
    // or "" when it does. The cases that need one are skipped, with this
    // reason, where it is not empty.
    virtual std::string proxy_unsupported() const { return {}; }
    // Why this backend's tokens are no fencing tokens (a later holder's
    // need not be larger, a re-entry's need not rise), or "" when they
    // are. The cases skip their token assertions, with this reason, where
    // it is not empty, and assert what the backend documents instead.
    virtual std::string tokens_unfenced() const { return {}; }
    // Why this backend ends a tenure itself once its deadline passes
    // unconfirmed (lost signal, keys given back), so that a release after
    // that answers error::lock_lost rather than the server's view
    // (error::expired, error::not_owner); "" when it does not.
    virtual std::string ends_tenure_at_deadline() const { return {}; }
    // Why a re-entry that asks for the watchdog its tenure began without is
    // refused (invalid_argument) rather than joined; "" when it is joined.
    virtual std::string reentry_cannot_add_watchdog() const { return {}; }
    // Why this backend refuses a nonzero lock_options::lock_delay
    // (error::not_supported, docs/safety.md "Lock-delay"); "" when it honours it.
    virtual std::string lock_delay_refused() const { return {}; }
    // The loopback port lock clients connect to (what a proxy forwards to).
    virtual std::uint16_t port() const = 0;
    // The server process (-1 when not running).
    virtual pid_t pid() const = 0;
    // How much later than a lease's end the server may still hold the lock
    // by its own rules (etcd, for one, rounds a lease's TTL up to whole
    // seconds with a minimum); the cases' bounds on "free again" add it.
    // Redis: none.
    virtual std::chrono::milliseconds expiry_slack() const { return std::chrono::milliseconds(0); }
    // Whether a holder's lock ends with its connection (a killed holder's
    // lock is free at once, not at its lease's end): PostgreSQL's
    // session-level advisory locks. The history checker is told
    // (check_options::kill_ends_window).
    virtual bool frees_on_disconnect() const { return false; }
    // Whether a guard can run the caller's statements on the lock's own
    // session (corolock::async_execute_locked): PostgreSQL. Its session then
    // has more states to be frozen in (inside the transaction, mid-statement).
    virtual bool runs_locked_statements() const { return false; }
    // Bytes that the first request of an acquire of lock `name` carries on
    // the wire and no request of another lock does (a raw proxy's
    // freeze_after_next() waits for them): the name itself, as Redis keys,
    // ZooKeeper paths and PostgreSQL parameters carry it; etcd sends keys
    // in base64.
    virtual std::string wire_marker(const std::string& name) const { return name; }

    // The owner ids with anything stored under lock `name` now, read from
    // the server on a connection of the fixture's own: Redis, the lock
    // hash's owner; etcd, every key under the lock's prefix (holder and
    // waiters). For "nothing of this owner is left" checks. Throws
    // std::runtime_error when the server does not answer.
    virtual std::vector<std::string> owners(const std::string& name) const = 0;

    // SIGKILL, waiting (bounded) until the process is reaped.
    virtual void kill9() = 0;
    // SIGSTOP, waiting (bounded) until the kernel reports it stopped.
    virtual void pause() = 0;
    // SIGCONT.
    virtual void resume() = 0;
    // Starts again on the same port(s) (stopping it first if it runs) and
    // waits until it answers.
    virtual void restart() = 0;
};

using lock_server_factory = std::function<std::unique_ptr<lock_server>()>;

// The backend the conformance suite runs against: COROLOCK_CONFORMANCE_BACKEND,
// else "redis".
std::string conformance_backend();

// The backends this build of the tests can start, in table order.
std::vector<std::string> lock_server_backends();

// Starts a server of the named backend. Throws std::invalid_argument for a
// name without a factory (the message lists the known ones), and whatever
// the server's start throws (std::runtime_error with its log).
std::unique_ptr<lock_server> start_lock_server(std::string_view backend);

}  // namespace corolock::test
