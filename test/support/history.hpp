// The multi-process history checker (see docs and testing.md "The checker").
//
// Worker processes (test/worker/lock_worker.cpp) and the fault tests write
// events as JSON lines, one flat object per line, one file per process. The
// checker loads them, rebuilds every holder's life, and checks the safety
// invariants I1, I2, I3 and I5 and the exactness of a non-atomic counter.
//
// ---------------------------------------------------------------------------
// Event format (one JSON object per line; unknown fields are ignored):
//
//   {"ev":"acquire_ok","pid":4242,"task":0,"lock":"orders","token":17,
//    "t":123456789012,"deadline":123458769012,"lease_ns":2000000000}
//
//   ev        the kind, below (string, required)
//   t         CLOCK_MONOTONIC in ns when the event was observed (required).
//             Every process on one machine shares this clock, so events of
//             different processes compare exactly.
//   pid       the process (required); task: a coroutine in it (default 0).
//             (pid, task) is one actor: its events are sequential.
//   lock      the lock name (required for lock and oracle events)
//   token     the fencing token (0 when there is none yet)
//   deadline  CLOCK_MONOTONIC ns: guard::lease_deadline() converted with
//             time_since_epoch(). On Linux with libstdc++, steady_clock *is*
//             CLOCK_MONOTONIC (the worker checks this at start-up).
//   lease_ns  the lease the acquire asked for
//   prev      the oracle's highest token before a write (oracle replies)
//   error     an error's text (acquire_failed, release_failed, write_failed)
//   permits   a semaphore grant's permits (acquire_ok; default 1)
//   capacity  the semaphore's capacity N (acquire_ok; absent or 0: a lock)
//   shared    1: a shared mutex's reader (acquire_ok; absent or 0: exclusive)
//
// Kinds written by a lock client (per actor, in this order per cycle):
//   acquire_invoked            before acquire() is called
//   acquire_ok                 token, deadline, lease_ns
//   acquire_failed             error; the cycle ends
//   lease                      token, deadline: a renewal moved the deadline
//                              (the worker polls lease_deadline(), so this is
//                              logged at most a poll period late)
//   increment_invoked          token: the GET of the non-atomic counter is sent
//   increment_ok               token: the SET counter+1 completed
//   increment_failed           token, error: the increment did not complete
//                              (it may or may not have been applied)
//   write_invoked              token: a fenced write to the oracle is sent
//   write_accepted             token, prev: the oracle took it (token > prev)
//   write_rejected             token, prev: the oracle refused it (token <= prev)
//   write_failed               token, error: outcome unknown
//   proclaim_ok, proclaim_failed   token, error: a leader's proclaim before
//                              its write (lock_worker elect-cycle); the
//                              checker only holds it to a term of its actor
//                              (the election fault tests read the outcome)
//   release_invoked            token
//   release_ok                 token
//   release_failed             token, error (e.g. "expired", "not_owner")
//   lost                       token: the lost signal fired; "from":"observer"
//                              when config::observer's on_lost logged it (a
//                              Redis lock through the worker's client), else
//                              when guard::until_lost() completed
// Kinds written by the test harness about faults it injected:
//   paused / resumed           pid: SIGSTOP / SIGCONT of a worker
//   killed                     pid: SIGKILL of a worker (its log just ends)
//   server_paused, server_resumed, server_restarted   (informational)
//
// The oracle resource is a Redis key updated by oracle_lua: it accepts a
// write only when its token is strictly greater than the highest accepted so
// far, and replies with the previous highest.
// ---------------------------------------------------------------------------
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace corolock::test::history {

struct event {
    std::string ev;
    long long t = 0;
    long long pid = 0;
    int task = 0;
    std::string lock;
    std::uint64_t token = 0;
    long long deadline = 0;
    long long lease_ns = 0;
    long long prev = -1;  // -1: absent
    std::string error;
    long long permits = 0;   // 0: absent (one)
    long long capacity = 0;  // 0: absent (a lock, not a semaphore)
    bool shared = false;     // a shared mutex's reader
    std::string source;   // "file:line", for messages (not serialized)
};

// One JSON line (no trailing newline) in the format above.
std::string to_json(const event& e);

// Parses JSON lines. A last line without its newline is a write cut short by
// a kill and is skipped (counted in *truncated when given); any other
// malformed line throws std::runtime_error naming source and line.
std::vector<event> parse_history(std::string_view jsonl, const std::string& source,
                                 int* truncated = nullptr);

// Loads one file, or every *.jsonl file of a directory, merged.
std::vector<event> load_history(const std::string& path, int* truncated = nullptr);

// Appends events to a JSON-lines file, flushing each line (for the test
// harness's fault events; the workers write the same format themselves).
class event_writer {
public:
    explicit event_writer(std::string path);
    void write(const event& e);
    // Convenience: a harness event about process pid, stamped now.
    void fault(const std::string& ev, long long pid);
    const std::string& path() const noexcept { return path_; }

private:
    std::string path_;
};

// The fenced oracle, in Lua: KEYS[1] the oracle key, ARGV[1] the token.
// Returns {1, prev} when it accepted (token > prev), {0, prev} when it
// refused; prev is the highest token accepted before (0 when none).
inline constexpr std::string_view oracle_lua =
    "local prev = tonumber(redis.call('GET', KEYS[1]) or '0')\n"
    "local token = tonumber(ARGV[1])\n"
    "if token > prev then\n"
    "  redis.call('SET', KEYS[1], ARGV[1])\n"
    "  return {1, prev}\n"
    "end\n"
    "return {0, prev}\n";

// The same rule as a model, for the checker and the unit tests.
class fenced_register {
public:
    struct outcome {
        bool accepted;
        std::uint64_t prev;
    };
    outcome write(std::uint64_t token) noexcept;
    std::uint64_t highest() const noexcept { return highest_; }

private:
    std::uint64_t highest_ = 0;
};

// The default of check_options::observe_slack_ns: 250 ms, or
// COROLOCK_LOST_ALLOWANCE_MS (a whole number of ms, >= 0) when that is set
// and not empty. Read each time, so a test may set the variable. Throws
// std::invalid_argument when the variable is set to anything else.
long long default_observe_slack_ns();

struct check_options {
    // Final value of each lock's counter, as read by the test after every
    // worker stopped. Locks without an entry are not counter-checked.
    std::map<std::string, long long> counters;

    // How far beyond a reported lease_deadline the server-side expiry lies
    // at least: corolock's deadline is (sent + lease - drift), and the server
    // cannot expire the key before (sent + lease). Default: corolock's drift,
    // lease / 100 + 2 ms.
    std::function<long long(long long lease_ns)> drift_ns;

    // How late a worker may log what it observed (a lost signal, a renewed
    // deadline) after the library made it happen: its poll period plus
    // scheduling. A lost signal is logged from the library's observer where
    // the lock has a config (the moment it fires), else when the worker's
    // coroutine resumes; a renewed deadline when its 5 ms poll sees it. A
    // busy machine delays the log, not the signal (the library's timer fired
    // on time); this is that allowance, not a tolerance for a late signal. It
    // is generous by default (250 ms) so that a loaded shared machine does
    // not fail I5, and COROLOCK_LOST_ALLOWANCE_MS overrides the default
    // (default_observe_slack_ns above). Also used as the margin around pauses.
    long long observe_slack_ns = default_observe_slack_ns();

    // Invariants to check; a test of an honest limit (a server restart
    // without persistence) turns off what that limit breaks.
    bool check_i1 = true;
    bool check_i2 = true;
    bool check_i3 = true;
    bool check_i5 = true;
    bool check_permits = true;
    bool check_readers = true;

    // A killed holder's safe window ends at its kill. Off by default: a
    // crashed holder's lock must outlive it until its lease ends, so a grant
    // before then shows a server that let a lease go early. On for a backend
    // whose lock ends with its holder's connection by design (PostgreSQL's
    // session-level advisory locks: lock_server::frees_on_disconnect()).
    bool kill_ends_window = false;
};

// One holder as the checker rebuilt it (for tests that look closer).
struct holder_info {
    long long pid = 0;
    int task = 0;
    std::string lock;
    std::uint64_t token = 0;
    long long acquire_invoked = -1;  // -1: absent
    long long acquire_ok = 0;
    long long window_end = 0;        // == acquire_ok for an empty window
    long long deadline = 0;          // the last deadline the checker accepted
    long long release_invoked = -1;
    std::string release_outcome;     // "ok", the error text, or "" (none seen)
    long long lost = -1;
    // The holder's last oracle write: "accepted", "rejected", "failed",
    // "pending" (invoked, no reply) or "" (none); a failed write's error
    // name; when it was invoked and when it completed.
    std::string write_outcome;
    std::string write_error;
    long long write_invoked = -1;
    long long write_done = -1;
};

struct check_result {
    // Human-readable violations, keyed "format", "I1", "I2", "I3", "I5",
    // "permits", "readers", "counter". Empty vectors are not stored.
    std::map<std::string, std::vector<std::string>> violations;
    // Things the checker could not decide (e.g. a counter check skipped
    // because an increment ran outside its safe window).
    std::vector<std::string> notes;

    // Figures, for reports.
    int holders = 0;              // successful acquisitions
    int completed_sections = 0;   // increment_ok events
    int releases_ok = 0;
    int lost_signals = 0;
    int writes_accepted = 0;
    int writes_rejected = 0;
    int late_writes = 0;          // writes completed outside their holder's window
    int late_writes_rejected = 0;
    // Lost signal time minus the last confirmed deadline (ns), over the
    // lost_signals_checked lost signals that were subject to I5 (not exempt
    // by a pause of their process); 0 when there were none.
    int lost_signals_checked = 0;
    long long lost_minus_deadline_min_ns = 0;
    long long lost_minus_deadline_max_ns = 0;
    std::vector<holder_info> holder_list;  // in acquire_ok order

    bool ok() const noexcept { return violations.empty(); }
    std::size_t count(const std::string& invariant) const;
    // All violations, notes and figures, one per line.
    std::string report() const;
};

// Checks the history (events of all processes, in any order).
//
// The rules, with what each can observe (times are the logged t values):
//  Holder: one acquire_ok of an actor, with every later event of that actor
//    carrying its token, up to its release_ok/release_failed (or end of log).
//  Safe window: [acquire_ok, end) where end = the first of release_invoked,
//    lost, and the first moment the holder's then-known deadline had passed
//    (the deadline of acquire_ok, moved only by lease events logged before it
//    ran out). A window can be empty.
//  I1: on one lock, no two holders' safe windows overlap.
//  permits: on a semaphore (a lock whose acquire_ok events carry a
//    capacity), at no moment do the safe windows in force hold more than N
//    permits together, N the largest capacity logged for it (the scripts
//    check each grant against its own handle's capacity). It replaces I1
//    there; and since a semaphore's holders overlap, so do the rules that
//    assume one holder at a time: I2's window order and "a write inside its
//    window is accepted", and I3 (tokens stay unique and rise in real-time
//    order; the oracle's register rules still hold).
//  readers: on a shared mutex (a lock with a reader's acquire_ok), no
//    writer's safe window overlaps another actor's window (reader or
//    writer); readers overlap freely. It replaces I1 there; I2's window
//    order and I3 then apply to the pairs of which one writes (of different
//    actors: an actor's own share taken while it writes is a downgrade).
//  I2: per lock, tokens are unique; a holder whose acquire_ok came before
//    another's acquire_invoked has the smaller token; holders with non-empty
//    windows have tokens rising in window order. Oracle: every reply obeys
//    accepted <=> token > prev; prev never lies below the largest token
//    accepted before the write was invoked (a stale write is rejected), and
//    is a token that was written (or 0); a write that ran entirely inside
//    its holder's safe window is accepted (a fresh write is accepted).
//  I3: a successful release (release_ok) of holder H is impossible if some
//    newer holder K of the lock got acquire_ok after H's acquire_ok and
//    before H's release_invoked: K's acquire proves H's key was gone, so a
//    release reporting success must have deleted K's. Likewise a lease event
//    of H whose deadline minus the lease (a lower bound on when that
//    renewal was sent) lies after K's acquire_ok renewed K's key.
//  I5: every deadline is honest: deadline <= (time it was logged) + lease.
//    A lost signal is logged no later than E + observe_slack, where E = the last
//    deadline logged before it + drift(lease) is the earliest moment the
//    server could have expired the key. A holder whose E passed without
//    release_invoked or lost, while its process kept logging beyond
//    E + observe_slack, missed its lost signal. A holder whose process was
//    paused (paused..resumed, or killed) at any time in
//    [deadline - observe_slack, lost] is exempt: a stopped process cannot
//    run its timers.
//  counter: with final value C for a lock, n = increment_ok count and
//    u = increments invoked but never confirmed (killed or failed):
//    n <= C <= n + u, provided every increment_ok ran inside its holder's
//    safe window (otherwise the check is skipped with a note: an
//    unprotected read-modify-write may lose any number of increments).
check_result check_history(const std::vector<event>& events, const check_options& options = {});

}  // namespace corolock::test::history
