// What a failover test reads from a fleet's history around the moment a
// server was killed: who held and who waited then, and the grants after;
// and the waits that bring the fleets to that moment and past it: on
// events in the histories, each bounded, never a fixed pause.
#pragma once

#include "fault/fault_fleet.hpp"
#include "support/history.hpp"

#include <catch2/catch.hpp>

#include <iostream>
#include <memory>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace corolock::test::fault {

// How many grants (acquire_ok) f's workers have logged after t (mono ns).
inline int grants_after(const fleet& f, long long t) {
    int n = 0;
    for (const auto& e : f.events()) n += (e.ev == "acquire_ok" && e.t > t) ? 1 : 0;
    return n;
}

// Whether a worker of f still runs (has not ended its duration).
inline bool any_worker_running(fleet& f) {
    for (std::size_t i = 0; i < f.size(); ++i)
        if (f.alive(i) && f.worker(i).running()) return true;
    return false;
}

// Waits until each fleet's workers have logged at least k grants after t
// (mono ns), polling their histories, for at most `limit`; returns whether
// they did. Gives up early once a fleet that lacks grants has no worker
// left running (none can come any more).
inline bool wait_for_grants(const std::vector<std::unique_ptr<fleet>>& fleets, int k,
                            long long t, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (true) {
        bool all = true, hopeless = false;
        for (const auto& f : fleets) {
            // Whether it runs before the count: a worker that had exited
            // then has every event of its own in the count.
            const bool running = any_worker_running(*f);
            if (grants_after(*f, t) >= k) continue;
            all = false;
            hopeless = hopeless || !running;
        }
        if (all) return true;
        if (hopeless || std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(50ms);  // each poll parses the histories: not too often
    }
}

// A worker of f now inside its critical section while another of its
// workers waits for the lock (that one's latest acquire_invoked not yet
// answered): the moment a failover test kills a server at, so that the
// kill finds the lock both held and waited on. Polls for at most `limit`.
inline std::optional<std::size_t> worker_in_section_with_waiter(fleet& f,
                                                                std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (true) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left <= 0ms) return std::nullopt;
        const auto holder = f.worker_in_section(left);
        if (!holder) return std::nullopt;
        for (std::size_t j = 0; j < f.size(); ++j) {
            if (j == *holder || !f.alive(j)) continue;
            // Its last acquire or release event.
            if (f.history_of(j, 1).find("\"ev\":\"acquire_invoked\"") != std::string::npos)
                return holder;
        }
        std::this_thread::sleep_for(2ms);
    }
}

struct around_kill {
    int holding = 0;        // holders whose window contains the kill
    int waiting = 0;        // actors that had invoked an acquire and not got it at the kill
    int grants_after = 0;   // acquire_ok after the kill
    long long first_grant_after = -1;
};

inline around_kill look_around(const std::vector<history::event>& events,
                               const history::check_result& r, long long killed_at) {
    around_kill a;
    for (const auto& x : r.holder_list) {
        if (x.acquire_ok <= killed_at && x.window_end > killed_at) ++a.holding;
        if (x.acquire_ok > killed_at) {
            ++a.grants_after;
            if (a.first_grant_after < 0 || x.acquire_ok < a.first_grant_after)
                a.first_grant_after = x.acquire_ok;
        }
    }
    // An actor waits at the kill when its last acquire_invoked before the
    // kill was not answered (ok or failed) before it.
    std::map<long long, std::pair<long long, long long>> last;  // pid -> (invoked, answered)
    for (const auto& e : events) {
        if (e.t > killed_at) continue;
        auto& [invoked, answered] = last[e.pid];
        if (e.ev == "acquire_invoked") invoked = std::max(invoked, e.t);
        if (e.ev == "acquire_ok" || e.ev == "acquire_failed") answered = std::max(answered, e.t);
    }
    for (const auto& [pid, p] : last)
        if (p.first > 0 && p.first > p.second) ++a.waiting;
    return a;
}

// Checks each fleet's history across a kill at `killed_at` (every
// invariant, exact counters, grants after the kill) and that the kill came
// with a lock held and waited on; prints each fleet's figures. Returns the
// first grant after the kill (-1: none). The caller brings that about by
// events, not by time: the kill when worker_in_section_with_waiter() found
// its moment, and wait_for_grants() after it before the fleets finish.
inline long long check_fleets_across_kill(const std::vector<std::unique_ptr<fleet>>& fleets,
                                          long long killed_at) {
    long long first_grant_after = -1;
    int holding = 0, waiting = 0;
    for (const auto& f : fleets) {
        const auto events = f->events();
        const auto r = f->check(f->counted());
        INFO(f->options().name << ":\n" << r.report());
        CHECK(r.ok());
        CHECK(r.writes_accepted == r.completed_sections);
        const auto a = look_around(events, r, killed_at);
        // Waiters got through after the failover.
        CHECK(a.grants_after > 0);
        holding += a.holding;
        waiting += a.waiting;
        if (a.first_grant_after >= 0 &&
            (first_grant_after < 0 || a.first_grant_after < first_grant_after))
            first_grant_after = a.first_grant_after;
        std::cout << f->options().name << ": " << r.holders << " grants, " << a.grants_after
                  << " after the kill; at the kill " << a.holding << " holding, " << a.waiting
                  << " waiting" << std::endl;
    }
    // The kill did happen with the lock held and waited on.
    CHECK(holding >= 1);
    CHECK(waiting >= 1);
    return first_grant_after;
}

}  // namespace corolock::test::fault
