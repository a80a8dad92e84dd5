// The etcd backend's leases, shared by its locks, without I/O.
//
// One lease per distinct lease duration (lock_options::lease), not one per
// backend: a lock's lease is what its holder asked the server to keep it
// for without us, so a 5 s lock must not sit on a 30 s lease, and a 30 s
// one gains nothing from a 5 s lease's keep-alives. Most programs use one
// duration, so most backends have one lease (etcd's concurrency.Session).
// A lock's key is put with its duration's lease by the acquire's one txn,
// and the lease is kept alive by one keep-alive per renewal interval for
// all the keys under it. Its deadline is local and monotonic: the send time
// of the last grant or keep-alive etcd confirmed, plus the shorter of the
// duration and the TTL granted, minus the drift allowance
// (watchdog_schedule). Past it, or when etcd says the lease is gone, the
// lease is lost, and with it every lock under it.
//
// Users are acquires with a key on the lease (or about to put one) and the
// tenures under it. A lease with no users is kept for an idle grace of one
// lease duration, then revoked: back-to-back cycles reuse it (no grant per
// cycle), and a program that stopped locking leaves nothing on the server
// after at most a few keep-alives.
//
// The backend (etcd_backend.cpp) does the I/O this class asks for: one
// timer per lease, set to next_wake(), and due() says what to do then.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace corolock::detail::etcd {

class lease_pool {
public:
    using clock = std::chrono::steady_clock;
    using lease_id = std::int64_t;
    using holder_id = std::uint64_t;  // a lock_state's watch_id

    // A lease's local deadline: from when its last confirmed grant or
    // keep-alive was sent, for the shorter of the duration and the TTL.
    static clock::time_point deadline_of(clock::time_point sent, clock::duration duration,
                                         std::int64_t ttl_seconds) noexcept;
    // etcd leases are whole seconds: at least the duration asked for.
    static std::int64_t ttl_seconds(clock::duration duration) noexcept;
    // Keep-alives come every third of the duration (the default renewal
    // interval); a failed one is tried again after a quarter of that.
    static clock::duration renew_every(clock::duration duration) noexcept { return duration / 3; }

    struct lease {
        clock::duration duration{};
        lease_id id = 0;  // 0 while its grant is on its way
        clock::time_point deadline{};
        clock::time_point renew_at{};  // the next keep-alive
        bool renewing = false;         // a keep-alive is on its way
        std::size_t users = 0;
        std::vector<holder_id> holders;  // the tenures under it
        clock::time_point idle_since{};  // users == 0 since then
    };

    // What an acquire of `duration` gets.
    enum class reserved {
        ready,  // the lease `id`, counted as used
        wait,   // its grant is on its way: counted; on_granted() gives the id
        grant,  // counted; the caller sends the grant (ttl_seconds(duration))
        stale,  // the lease `id` is past its deadline: not counted; the
                // caller loses it (remove()) and reserves again
    };
    reserved reserve(clock::duration duration, clock::time_point now, lease_id& id);

    // The grant sent at `sent` for `duration` was answered.
    void on_granted(clock::duration duration, lease_id id, std::int64_t ttl,
                    clock::time_point sent);
    // It failed: the lease is forgotten, and so are its users (who waited).
    void on_grant_failed(clock::duration duration) noexcept;

    // A use ends (an acquire that gave up, a tenure that ended). Unknown
    // ids (a lease lost since) are ignored.
    void release(lease_id id, clock::time_point now) noexcept;
    void add_holder(lease_id id, holder_id h);
    void remove_holder(lease_id id, holder_id h) noexcept;

    // What the lease's timer must do at `now`.
    enum class action { none, renew, lose, revoke };
    // renew marks a keep-alive on its way; lose and revoke leave the lease
    // in the pool for remove().
    action due(lease_id id, clock::time_point now);
    // When the lease next needs due() (its deadline at the latest).
    clock::time_point next_wake(lease_id id) const noexcept;

    // A keep-alive sent at `sent` was answered at `now` with `ttl` (<= 0:
    // etcd says the lease is gone). True when the lease lives on (its
    // deadline moved); false: it is lost (remove() it).
    bool on_keepalive(lease_id id, clock::time_point sent, std::int64_t ttl,
                      clock::time_point now) noexcept;
    // A keep-alive failed for a transient reason: tried again soon; the
    // deadline stays.
    void on_keepalive_failed(lease_id id, clock::time_point now) noexcept;

    // Takes the lease out (lost or revoked): its holders are the caller's
    // to lose. Nothing for an unknown id.
    std::optional<lease> remove(lease_id id) noexcept;

    const lease* find(lease_id id) const noexcept;
    // A lease known alive (in the pool, before its deadline).
    bool alive(lease_id id, clock::time_point now) const noexcept;
    std::size_t size() const noexcept { return by_duration_.size(); }

private:
    lease* find_mut(lease_id id) noexcept;
    std::map<clock::duration, lease> by_duration_;
    std::map<lease_id, clock::duration> by_id_;
};

}  // namespace corolock::detail::etcd
