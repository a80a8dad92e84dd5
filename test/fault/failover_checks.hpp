// What a failover test reads from a fleet's history around the moment a
// server was killed: who held and who waited then, and the grants after.
#pragma once

#include "fault/fault_fleet.hpp"
#include "support/history.hpp"

#include <catch2/catch.hpp>

#include <iostream>
#include <memory>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace corolock::test::fault {

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
// first grant after the kill (-1: none).
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
