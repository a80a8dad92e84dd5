// The history checker against hand-made histories: each kind of violation
// must be caught (and only it), and valid histories, faults included, pass.
#include "support/history.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace h = corolock::test::history;

namespace {

constexpr long long base_ns = 1'000'000'000'000LL;  // a plausible CLOCK_MONOTONIC
constexpr long long lease_ms = 1000;

long long at(double ms) { return base_ns + static_cast<long long>(ms * 1e6); }

// A history under construction; times in ms after base_ns.
struct builder {
    std::vector<h::event> evs;

    h::event& add(const std::string& ev, long long pid, std::uint64_t token, double t_ms,
                  const std::string& lock = "L") {
        h::event e;
        e.ev = ev;
        e.pid = pid;
        e.lock = lock;
        e.token = token;
        e.t = at(t_ms);
        e.source = "test:" + std::to_string(evs.size() + 1);
        evs.push_back(e);
        return evs.back();
    }
    // acquire_invoked at inv, acquire_ok at ok with deadline ok - 1 + lease - 12 ms
    // (as if the successful attempt was sent 1 ms before its reply, with
    // corolock's 12 ms drift for a 1 s lease).
    void acquire(long long pid, std::uint64_t token, double inv, double ok, const std::string& lock = "L",
                 double deadline_ms = -1) {
        add("acquire_invoked", pid, 0, inv, lock);
        auto& e = add("acquire_ok", pid, token, ok, lock);
        e.lease_ns = lease_ms * 1'000'000;
        e.deadline = at(deadline_ms >= 0 ? deadline_ms : ok - 1 + lease_ms - 12);
    }
    // A semaphore grant: acquire() with permits of a capacity.
    void grant(long long pid, std::uint64_t token, double inv, double ok, long long permits,
               long long capacity) {
        acquire(pid, token, inv, ok);
        evs.back().permits = permits;
        evs.back().capacity = capacity;
    }
    // A shared mutex's reader: acquire() marked shared.
    void read(long long pid, std::uint64_t token, double inv, double ok) {
        acquire(pid, token, inv, ok);
        evs.back().shared = true;
    }
    void lease(long long pid, std::uint64_t token, double t, double deadline_ms) {
        add("lease", pid, token, t).deadline = at(deadline_ms);
    }
    void increment(long long pid, std::uint64_t token, double inv, double ok) {
        add("increment_invoked", pid, token, inv);
        if (ok >= 0) add("increment_ok", pid, token, ok);
    }
    void write(long long pid, std::uint64_t token, double inv, double done, bool accepted, long long prev) {
        add("write_invoked", pid, token, inv);
        add(accepted ? "write_accepted" : "write_rejected", pid, token, done).prev = prev;
    }
    void release(long long pid, std::uint64_t token, double inv, double done, const std::string& error = "") {
        add("release_invoked", pid, token, inv);
        auto& e = add(error.empty() ? "release_ok" : "release_failed", pid, token, done);
        e.error = error;
    }
    // A full, well-behaved critical section.
    void section(long long pid, std::uint64_t token, double inv, double ok, long long prev) {
        acquire(pid, token, inv, ok);
        increment(pid, token, ok + 1, ok + 2);
        write(pid, token, ok + 3, ok + 4, true, prev);
        release(pid, token, ok + 5, ok + 6);
    }
    void fault(const std::string& ev, long long pid, double t) {
        h::event e;
        e.ev = ev;
        e.pid = pid;
        e.task = -1;
        e.t = at(t);
        e.source = "harness";
        evs.push_back(e);
    }
};

// Exactly one invariant is violated, and it is `inv`.
void require_only(const h::check_result& r, const std::string& inv) {
    INFO(r.report());
    REQUIRE(r.count(inv) >= 1);
    REQUIRE(r.violations.size() == 1);
}

// Some violation of `inv` says `phrase`: pins the rule that caught it when
// one bad history breaks several rules at once.
void require_message(const h::check_result& r, const std::string& inv, const std::string& phrase) {
    INFO(r.report());
    const auto it = r.violations.find(inv);
    REQUIRE(it != r.violations.end());
    bool found = false;
    for (const auto& v : it->second) found = found || v.find(phrase) != std::string::npos;
    CHECK(found);
}

h::check_options counted(long long value) {
    h::check_options o;
    o.counters["L"] = value;
    return o;
}

// Options with an explicit allowance for a worker's late log (observe_slack),
// so that the I5 cases below neither follow the default nor the environment.
h::check_options allowance(long long ms) {
    h::check_options o;
    o.observe_slack_ns = ms * 1'000'000;
    return o;
}

}  // namespace

TEST_CASE("history: a clean handoff between three processes passes", "[history]") {
    builder b;
    b.section(100, 1, 0, 1, 0);
    b.section(200, 2, 2, 10, 1);   // waited for 100's release at 6
    b.section(300, 3, 3, 20, 2);
    const auto r = h::check_history(b.evs, counted(3));
    INFO(r.report());
    CHECK(r.ok());
    CHECK(r.holders == 3);
    CHECK(r.completed_sections == 3);
    CHECK(r.writes_accepted == 3);
    CHECK(r.releases_ok == 3);
    CHECK(r.notes.empty());
}

TEST_CASE("history: a paused holder that loses its lease is a valid history", "[history]") {
    builder b;
    b.acquire(100, 1, 0, 1);                 // deadline 988
    b.increment(100, 1, 2, 3);
    b.fault("paused", 100, 10);
    b.acquire(200, 2, 20, 1005);             // server expired 100's key after 1002
    b.increment(200, 2, 1006, 1007);
    b.write(200, 2, 1008, 1009, true, 0);
    b.release(200, 2, 1010, 1011);
    b.fault("resumed", 100, 3000);
    b.add("lost", 100, 1, 3001);             // late, but the process was stopped
    b.write(100, 1, 3002, 3003, false, 2);   // the late write is fenced off
    b.release(100, 1, 3004, 3005, "expired");
    const auto r = h::check_history(b.evs, counted(2));
    INFO(r.report());
    CHECK(r.ok());
    CHECK(r.late_writes == 1);
    CHECK(r.late_writes_rejected == 1);
    CHECK(r.lost_signals == 1);
    REQUIRE(r.holder_list.size() == 2);
    CHECK(r.holder_list[0].window_end == at(988));
    CHECK(r.holder_list[0].write_outcome == "rejected");
}

TEST_CASE("history: I1 catches overlapping safe windows", "[history]") {
    builder b;
    b.acquire(100, 1, 0, 1);
    b.acquire(200, 2, 2, 500);  // 100 still inside its window (deadline 988)
    b.release(100, 1, 600, 601, "not_owner");
    b.release(200, 2, 700, 701);
    require_only(h::check_history(b.evs), "I1");
}

TEST_CASE("history: a killed holder's window ends at the kill only where the backend says so",
          "[history]") {
    builder b;
    b.acquire(100, 1, 0, 1);  // deadline 988, then killed
    b.fault("killed", 100, 10);
    b.acquire(200, 2, 5, 20);  // a lock that ends with its holder's connection
    b.release(200, 2, 30, 31);
    SECTION("by default a crashed holder's lock outlives it until its deadline") {
        require_only(h::check_history(b.evs), "I1");
    }
    SECTION("with kill_ends_window the window ends at the kill") {
        h::check_options o;
        o.kill_ends_window = true;
        const auto r = h::check_history(b.evs, o);
        INFO(r.report());
        CHECK(r.ok());
    }
    SECTION("but a grant before the kill still overlaps") {
        b.acquire(300, 3, 2, 8);
        h::check_options o;
        o.kill_ends_window = true;
        const auto r = h::check_history(b.evs, o);
        CHECK(r.count("I1") >= 1);
    }
}

TEST_CASE("history: I1 counts a renewal logged in time, not one logged after the lease ran out",
          "[history]") {
    SECTION("renewed in time: the window extends, and a second holder overlaps") {
        builder b;
        b.acquire(100, 1, 0, 1);                 // deadline 988
        b.lease(100, 1, 400, 1400);
        b.acquire(200, 2, 2, 1200);
        b.release(100, 1, 1300, 1301, "not_owner");
        b.release(200, 2, 1350, 1351);
        require_only(h::check_history(b.evs), "I1");
    }
    SECTION("a renewal seen after the deadline does not revive the window") {
        builder b;
        b.acquire(100, 1, 0, 1);                 // deadline 988
        b.lease(100, 1, 1005, 1900);             // reported 17 ms after it ran out
        b.acquire(200, 2, 2, 1200);
        b.release(100, 1, 1300, 1301, "expired");
        b.release(200, 2, 1350, 1351);
        const auto r = h::check_history(b.evs);
        INFO(r.report());
        CHECK(r.count("I1") == 0);
    }
}

TEST_CASE("history: a semaphore's holders may overlap up to its capacity", "[history][semaphore]") {
    builder b;
    b.grant(100, 1, 0, 1, 2, 3);
    b.grant(200, 2, 0, 2, 1, 3);     // 3 of 3 permits
    b.release(200, 2, 50, 51);
    b.grant(300, 3, 3, 50, 1, 3);    // starts as 200's window ends: still 3
    // Concurrent holders write to one fenced register: the smaller token
    // is refused inside its window, which is no violation here.
    b.write(300, 3, 60, 61, true, 0);
    b.write(100, 1, 62, 63, false, 3);
    b.release(100, 1, 100, 101);
    b.release(300, 3, 110, 111);
    const auto r = h::check_history(b.evs);
    INFO(r.report());
    CHECK(r.ok());
    CHECK(r.holders == 3);
}

TEST_CASE("history: more permits than the capacity inside safe windows is caught",
          "[history][semaphore]") {
    SECTION("a grant while the others still hold every permit") {
        builder b;
        b.grant(100, 1, 0, 1, 2, 3);
        b.grant(200, 2, 0, 2, 1, 3);
        b.grant(300, 3, 3, 40, 1, 3);  // 200 releases only at 50: 4 of 3
        b.release(200, 2, 50, 51);
        b.release(100, 1, 100, 101);
        b.release(300, 3, 110, 111);
        const auto r = h::check_history(b.evs);
        require_only(r, "permits");
        require_message(r, "permits", "4 permits inside safe windows of a capacity of 3");
    }
    SECTION("a crashed holder's permits count until its deadline") {
        builder b;
        b.grant(100, 1, 0, 1, 3, 3);   // deadline 988, then killed
        b.fault("killed", 100, 10);
        b.grant(200, 2, 5, 900, 1, 3);
        b.release(200, 2, 950, 951);
        require_only(h::check_history(b.evs), "permits");
    }
    SECTION("the same grant after that deadline passes") {
        builder b;
        b.grant(100, 1, 0, 1, 3, 3);
        b.fault("killed", 100, 10);
        b.grant(200, 2, 5, 990, 1, 3);
        b.release(200, 2, 995, 996);
        const auto r = h::check_history(b.evs);
        INFO(r.report());
        CHECK(r.ok());
    }
    SECTION("a grant of more permits than the capacity is malformed") {
        builder b;
        b.grant(100, 1, 0, 1, 4, 3);
        b.release(100, 1, 5, 6);
        require_message(h::check_history(b.evs), "format", "4 permits of a capacity of 3");
    }
}

TEST_CASE("history: I2 catches a token issued twice", "[history]") {
    builder b;
    b.acquire(100, 7, 0, 1);
    b.release(100, 7, 2, 3);
    b.acquire(200, 7, 1, 10);
    b.release(200, 7, 11, 12);
    const auto r = h::check_history(b.evs);
    require_message(r, "I2", "issued twice");
    CHECK(r.count("I1") == 0);
}

TEST_CASE("history: I2 catches a token that goes back in real time", "[history]") {
    builder b;
    b.acquire(100, 5, 0, 1);
    b.release(100, 5, 2, 3);
    b.acquire(200, 4, 20, 21);  // invoked after 100 got 5, yet smaller
    b.release(200, 4, 22, 23);
    require_only(h::check_history(b.evs), "I2");
    require_message(h::check_history(b.evs), "I2", "was invoked after");
}

TEST_CASE("history: I2 catches a smaller token in a later safe window", "[history]") {
    builder b;
    b.acquire(100, 5, 0, 10);
    b.release(100, 5, 11, 12);
    b.acquire(200, 4, 1, 20);  // concurrent invocations, but a later window
    b.release(200, 4, 22, 23);
    require_only(h::check_history(b.evs), "I2");
    require_message(h::check_history(b.evs), "I2", "with a smaller token");
}

TEST_CASE("history: I2 catches every kind of oracle misbehaviour", "[history]") {
    SECTION("a stale write accepted (token below prev)") {
        builder b;
        b.acquire(100, 3, 0, 1);
        b.write(100, 3, 2, 3, true, 5);
        b.release(100, 3, 4, 5);
        require_message(h::check_history(b.evs), "I2", "oracle accepted token 3 over prev 5");
    }
    SECTION("a fresh write rejected (token above prev)") {
        builder b;
        b.acquire(100, 3, 0, 1);
        b.release(100, 3, 4, 5);
        b.acquire(200, 4, 6, 7);
        b.write(200, 4, 8, 9, false, 3);
        b.release(200, 4, 10, 11);
        require_message(h::check_history(b.evs), "I2", "oracle rejected token 4 over prev 3");
    }
    SECTION("a write accepted although a larger token was accepted before it was sent") {
        builder b;
        b.acquire(100, 6, 0, 1);  // its window ends at 988; its write comes late
        b.acquire(200, 7, 995, 1000);
        b.write(200, 7, 1001, 1002, true, 0);
        b.release(200, 7, 1003, 1004);
        b.write(100, 6, 1010, 1011, true, 0);  // the oracle ignored token 7
        b.release(100, 6, 1012, 1013, "expired");
        const auto r = h::check_history(b.evs);
        require_message(r, "I2", "was accepted before it was sent (a stale write got in)");
        CHECK(r.count("I1") == 0);
    }
    SECTION("a write inside its holder's safe window rejected") {
        builder b;
        b.acquire(100, 2, 0, 1);
        b.write(100, 2, 2, 3, true, 0);
        b.release(100, 2, 4, 5);
        b.acquire(200, 3, 6, 7);
        b.write(200, 3, 8, 9, false, 3);  // consistent reply (3 <= 3), yet 3 never got in
        b.release(200, 3, 10, 11);
        require_message(h::check_history(b.evs), "I2", "inside its safe window but was rejected");
    }
    SECTION("prev names a token nobody wrote") {
        builder b;
        b.acquire(100, 2, 0, 1);
        b.write(100, 2, 2, 3, true, 1);
        b.release(100, 2, 4, 5);
        require_only(h::check_history(b.evs), "I2");
    }
    SECTION("two writes accepted over the same prev") {
        builder b;
        b.acquire(100, 1, 0, 1);
        b.write(100, 1, 2, 3, true, 0);
        b.release(100, 1, 4, 5);
        b.acquire(200, 2, 6, 7);
        b.write(200, 2, 8, 9, true, 0);  // should have seen 1
        b.release(200, 2, 10, 11);
        require_message(h::check_history(b.evs), "I2", "both accepted over prev 0");
    }
}

TEST_CASE("history: I3 catches a release that succeeded after a newer holder acquired",
          "[history]") {
    builder b;
    b.acquire(100, 1, 0, 1);                // window ends at 988
    b.add("lost", 100, 1, 990);
    b.acquire(200, 2, 995, 1000);
    b.release(100, 1, 1100, 1101);          // must have been refused, yet "ok"
    b.release(200, 2, 1200, 1201);
    require_only(h::check_history(b.evs), "I3");
}

TEST_CASE("history: I3 accepts a release refused after a newer holder acquired", "[history]") {
    builder b;
    b.acquire(100, 1, 0, 1);
    b.add("lost", 100, 1, 991);
    b.acquire(200, 2, 995, 1000);
    b.release(100, 1, 1100, 1101, "not_owner");
    b.release(200, 2, 1200, 1201);
    const auto r = h::check_history(b.evs);
    INFO(r.report());
    CHECK(r.ok());
}

TEST_CASE("history: I3 catches a renewal sent after a newer holder acquired", "[history]") {
    builder b;
    b.acquire(100, 1, 0, 1);
    b.add("lost", 100, 1, 991);
    b.acquire(200, 2, 995, 1000);
    // Deadline 2300 with a 1 s lease: sent at 1300 or later, after 200 acquired.
    b.lease(100, 1, 1310, 2300);
    b.release(100, 1, 1400, 1401, "expired");
    b.release(200, 2, 1500, 1501);
    require_only(h::check_history(b.evs), "I3");
}

TEST_CASE("history: I5 catches a deadline beyond what the server granted", "[history]") {
    builder b;
    b.acquire(100, 1, 0, 1, "L", 1500);  // 1 s lease, claimed until 1.5 s
    b.release(100, 1, 10, 11);
    require_only(h::check_history(b.evs), "I5");
}

TEST_CASE("history: I5 catches a lost signal after the server-side expiry", "[history]") {
    builder b;
    b.acquire(100, 1, 0, 1);       // deadline 988, server expiry >= 1000
    b.add("lost", 100, 1, 1100);   // 98 ms too late
    b.release(100, 1, 1101, 1102, "expired");
    SECTION("beyond the allowance for the worker's log: caught") {
        require_only(h::check_history(b.evs, allowance(20)), "I5");
    }
    SECTION("within it: the log may have been late, not the signal") {
        const auto r = h::check_history(b.evs, allowance(250));
        INFO(r.report());
        CHECK(r.ok());
    }
}

TEST_CASE("history: the allowance for a late log defaults to 250 ms, or COROLOCK_LOST_ALLOWANCE_MS",
          "[history]") {
    const char* was = std::getenv("COROLOCK_LOST_ALLOWANCE_MS");
    const std::optional<std::string> saved = was ? std::optional<std::string>(was) : std::nullopt;
    ::unsetenv("COROLOCK_LOST_ALLOWANCE_MS");
    CHECK(h::check_options{}.observe_slack_ns == 250'000'000);
    ::setenv("COROLOCK_LOST_ALLOWANCE_MS", "40", 1);
    CHECK(h::check_options{}.observe_slack_ns == 40'000'000);
    ::setenv("COROLOCK_LOST_ALLOWANCE_MS", "40ms", 1);
    CHECK_THROWS_AS(h::default_observe_slack_ns(), std::invalid_argument);
    if (saved)
        ::setenv("COROLOCK_LOST_ALLOWANCE_MS", saved->c_str(), 1);
    else
        ::unsetenv("COROLOCK_LOST_ALLOWANCE_MS");
}

TEST_CASE("history: I5 catches a lease that ran out without a lost signal", "[history]") {
    builder b;
    b.acquire(100, 1, 0, 1);
    b.increment(100, 1, 2, 3);
    b.release(100, 1, 1500, 1501, "expired");  // no lost in between
    require_only(h::check_history(b.evs, allowance(20)), "I5");
}

TEST_CASE("history: I5 exempts a holder whose process was stopped at its deadline", "[history]") {
    builder b;
    b.acquire(100, 1, 0, 1);
    b.fault("paused", 100, 500);
    b.fault("resumed", 100, 2000);
    b.add("lost", 100, 1, 2001);
    b.release(100, 1, 2002, 2003, "expired");
    const auto r = h::check_history(b.evs);
    INFO(r.report());
    CHECK(r.ok());
    SECTION("but not one paused only long before its deadline") {
        builder c;
        c.acquire(100, 1, 0, 1);
        c.fault("paused", 100, 100);
        c.fault("resumed", 100, 200);
        c.add("lost", 100, 1, 2001);
        c.release(100, 1, 2002, 2003, "expired");
        require_only(h::check_history(c.evs, allowance(20)), "I5");
    }
}

TEST_CASE("history: a lost update of the counter is caught", "[history]") {
    builder b;
    b.section(100, 1, 0, 1, 0);
    b.section(200, 2, 2, 10, 1);
    const auto r = h::check_history(b.evs, counted(1));
    require_only(r, "counter");
    const auto too_many = h::check_history(b.evs, counted(3));
    require_only(too_many, "counter");
}

TEST_CASE("history: the counter allows increments whose outcome is unknown", "[history]") {
    builder b;
    b.section(100, 1, 0, 1, 0);
    b.acquire(200, 2, 2, 10);
    b.increment(200, 2, 11, -1);  // killed before the SET was confirmed
    b.fault("killed", 200, 12);
    for (const long long c : {1LL, 2LL}) {
        const auto r = h::check_history(b.evs, counted(c));
        INFO(r.report());
        CHECK(r.ok());
    }
    require_only(h::check_history(b.evs, counted(3)), "counter");
}

TEST_CASE("history: an increment outside its window skips the counter check with a note",
          "[history]") {
    builder b;
    b.acquire(100, 1, 0, 1);
    b.fault("paused", 100, 2);
    b.fault("resumed", 100, 3000);
    b.add("lost", 100, 1, 3001);
    b.increment(100, 1, 3002, 3003);
    b.release(100, 1, 3004, 3005, "expired");
    const auto r = h::check_history(b.evs, counted(0));
    INFO(r.report());
    CHECK(r.ok());
    REQUIRE(r.notes.size() == 1);
    CHECK(r.notes[0].find("outside") != std::string::npos);
}

TEST_CASE("history: malformed histories are reported", "[history]") {
    SECTION("an event for a token the actor never acquired") {
        builder b;
        b.add("release_invoked", 100, 9, 1);
        require_only(h::check_history(b.evs), "format");
    }
    SECTION("an unknown kind") {
        builder b;
        b.add("acquire_maybe", 100, 0, 1);
        require_only(h::check_history(b.evs), "format");
    }
    SECTION("acquire_ok without acquire_invoked") {
        builder b;
        auto& e = b.add("acquire_ok", 100, 1, 1);
        e.deadline = at(900);
        e.lease_ns = lease_ms * 1'000'000;
        require_only(h::check_history(b.evs), "format");
    }
    SECTION("a release completed twice (a double completion)") {
        builder b;
        b.section(100, 1, 0, 1, 0);
        b.add("release_ok", 100, 1, 8);
        const auto r = h::check_history(b.evs);
        require_only(r, "format");
        require_message(r, "format", "a second time");
    }
    SECTION("a release outcome without release_invoked") {
        builder b;
        b.acquire(100, 1, 0, 1);
        b.add("release_failed", 100, 1, 5).error = "not_owner";
        const auto r = h::check_history(b.evs);
        require_only(r, "format");
        require_message(r, "format", "without release_invoked");
    }
    SECTION("a lost signal delivered twice") {
        builder b;
        b.acquire(100, 1, 0, 1);
        b.add("lost", 100, 1, 980);
        b.add("lost", 100, 1, 981);
        const auto r = h::check_history(b.evs);
        require_only(r, "format");
        require_message(r, "format", "a second lost signal");
    }
}

TEST_CASE("history: JSON lines round-trip and parse errors name the line", "[history]") {
    h::event e;
    e.ev = "release_failed";
    e.pid = 4242;
    e.task = 3;
    e.lock = "a \"quoted\"\\name\n";
    e.token = 18446744073709551ULL;
    e.t = 123456789012345LL;
    e.deadline = 123456789999999LL;
    e.lease_ns = 2'000'000'000;
    e.prev = 0;
    e.error = "expired\t(late)";
    e.permits = 2;
    e.capacity = 5;
    const std::string text = h::to_json(e) + "\n";
    const auto back = h::parse_history(text, "x");
    REQUIRE(back.size() == 1);
    CHECK(back[0].ev == e.ev);
    CHECK(back[0].pid == e.pid);
    CHECK(back[0].task == e.task);
    CHECK(back[0].lock == e.lock);
    CHECK(back[0].token == e.token);
    CHECK(back[0].t == e.t);
    CHECK(back[0].deadline == e.deadline);
    CHECK(back[0].lease_ns == e.lease_ns);
    CHECK(back[0].prev == 0);
    CHECK(back[0].error == e.error);
    CHECK(back[0].permits == 2);
    CHECK(back[0].capacity == 5);
    CHECK(back[0].source == "x:1");

    int truncated = 0;
    const auto cut = h::parse_history(text + text.substr(0, 20), "x", &truncated);
    CHECK(cut.size() == 1);
    CHECK(truncated == 1);

    CHECK_THROWS_WITH(h::parse_history(text + "{\"ev\":\"lost\",\"pid\":1}\n", "w.jsonl"),
                      Catch::Contains("w.jsonl:2"));
    CHECK_THROWS_WITH(h::parse_history("{\"ev\":\"lost\",\"pid\":1,\"t\":12x}\n", "w.jsonl"),
                      Catch::Contains("w.jsonl:1"));
    CHECK_THROWS(h::parse_history("not json\n", "w.jsonl"));
}

TEST_CASE("history: load_history merges every .jsonl file of a directory", "[history]") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("corolock-history-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    builder b;
    b.section(100, 1, 0, 1, 0);
    b.section(200, 2, 2, 10, 1);
    {
        std::ofstream one(dir / "w1.jsonl"), two(dir / "w2.jsonl"), other(dir / "notes.txt");
        for (const auto& e : b.evs) (e.pid == 100 ? one : two) << h::to_json(e) << '\n';
        other << "not a history\n";
    }
    h::event_writer harness((dir / "harness.jsonl").string());
    harness.fault("paused", 100);
    const auto evs = h::load_history(dir.string());
    fs::remove_all(dir);
    CHECK(evs.size() == b.evs.size() + 1);
    const auto r = h::check_history(evs, counted(2));
    INFO(r.report());
    CHECK(r.ok());
    CHECK(r.holders == 2);
}

TEST_CASE("history: the fenced register accepts only tokens above the highest", "[history]") {
    h::fenced_register reg;
    auto a = reg.write(3);
    CHECK(a.accepted);
    CHECK(a.prev == 0);
    auto b = reg.write(3);
    CHECK_FALSE(b.accepted);
    CHECK(b.prev == 3);
    auto c = reg.write(2);
    CHECK_FALSE(c.accepted);
    auto d = reg.write(9);
    CHECK(d.accepted);
    CHECK(d.prev == 3);
    CHECK(reg.highest() == 9);
}

TEST_CASE("history: a shared mutex's readers may overlap, a writer waits for them all",
          "[history][shared]") {
    builder b;
    b.read(100, 1, 0, 1);
    b.read(200, 2, 0, 2);
    b.release(100, 1, 30, 31);
    b.read(300, 3, 5, 20);            // overlaps both readers
    b.release(200, 2, 40, 41);
    b.release(300, 3, 50, 51);
    b.acquire(400, 4, 10, 52);        // after the last reader's window
    b.write(400, 4, 53, 54, true, 0);
    b.release(400, 4, 60, 61);
    b.read(100, 5, 55, 62);           // after the writer's
    b.release(100, 5, 70, 71);
    // The writer's own share, taken while it writes: a downgrade.
    b.acquire(500, 6, 72, 73);
    b.read(500, 7, 74, 75);
    b.release(500, 6, 76, 77);
    b.release(500, 7, 80, 81);
    const auto r = h::check_history(b.evs);
    INFO(r.report());
    CHECK(r.ok());
    CHECK(r.holders == 7);
}

TEST_CASE("history: a writer overlapping a reader or a writer is caught", "[history][shared]") {
    SECTION("a writer in while a reader holds") {
        builder b;
        b.read(100, 1, 0, 1);
        b.read(200, 2, 0, 2);
        b.acquire(300, 3, 3, 40);      // reader 200 releases only at 50
        b.release(100, 1, 30, 31);
        b.release(200, 2, 50, 51);
        b.release(300, 3, 60, 61);
        // The reader's release after the writer's acquire breaks I3 too.
        const auto r = h::check_history(b.evs);
        require_message(r, "readers", "window of writer pid 300");
    }
    SECTION("a reader in while a writer holds") {
        builder b;
        b.acquire(100, 1, 0, 1);
        b.read(200, 2, 3, 20);
        b.release(100, 1, 30, 31);
        b.release(200, 2, 40, 41);
        require_message(h::check_history(b.evs), "readers", "window of reader pid 200");
    }
    SECTION("a crashed reader's share counts until its deadline") {
        builder b;
        b.read(100, 1, 0, 1);          // deadline 988, then killed
        b.fault("killed", 100, 10);
        b.acquire(200, 2, 5, 900);
        b.release(200, 2, 950, 951);
        require_only(h::check_history(b.evs), "readers");
    }
    SECTION("a later writer with a smaller token") {
        builder b;
        b.read(100, 5, 0, 1);
        b.release(100, 5, 10, 11);
        b.acquire(200, 4, 12, 20);
        b.release(200, 4, 30, 31);
        require_message(h::check_history(b.evs), "I2", "with a smaller token");
    }
}
