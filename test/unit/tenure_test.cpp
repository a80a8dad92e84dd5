// The tenure's one rule (core/tenure.hpp): a grant begins a tenure or joins
// the live one, by the backend's reentry_terms; a release takes its level
// off; a tenure object nobody refers to any more is reused.
#include "core/backend.hpp"

#include <catch2/catch.hpp>

#include <memory>

using namespace corolock::detail;
using namespace std::chrono_literals;

namespace {
struct bare_state final : lock_state {
    using lock_state::lock_state;
};
using clock_type = std::chrono::steady_clock;
}  // namespace

TEST_CASE("tenure: the first grant begins a tenure, a re-entry joins it", "[tenure]") {
    auto st = std::make_shared<bare_state>(nullptr, "name", "owner");
    const auto now = clock_type::now();
    auto first = begin_or_join(*st, 1, lease_terms{1s, {}}, reentry_terms::all, now + 1s);
    CHECK(first.began);
    CHECK_FALSE(first.start_renewals);  // no watchdog asked for
    CHECK(first.t->epoch == 1);
    CHECK(first.t->deadline() == now + 1s);
    CHECK(st->held.load() == 1);
    // A re-entry with an earlier deadline never moves it back.
    auto second = begin_or_join(*st, 2, lease_terms{1s, {}}, reentry_terms::all, now + 500ms);
    CHECK_FALSE(second.began);
    CHECK(second.t == first.t);
    CHECK(second.t->deadline() == now + 1s);
    CHECK(st->held.load() == 2);
    // A later one moves it on.
    begin_or_join(*st, 3, lease_terms{1s, {}}, reentry_terms::all, now + 2s);
    CHECK(first.t->deadline() == now + 2s);
}

TEST_CASE("tenure: what a re-entry joins is the backend's reentry_terms", "[tenure]") {
    auto st = std::make_shared<bare_state>(nullptr, "name", "owner");
    const auto now = clock_type::now();
    const lease_terms began{1s, {}, 1s};
    const lease_terms asked{5s, 300ms, 3s};  // longer lease and delay, a watchdog
    SECTION("all: every term joins (the server's lease was set again)") {
        auto t = begin_or_join(*st, 1, began, reentry_terms::all, now + 1s).t;
        auto j = begin_or_join(*st, 2, asked, reentry_terms::all, now + 1s);
        CHECK(j.start_renewals);
        CHECK(t->terms.lease == 5s);
        CHECK(t->terms.lock_delay == 3s);
        CHECK(t->terms.renew_every == 300ms);
    }
    SECTION("renewal_only: the lease and the delay stay the grant's") {
        auto t = begin_or_join(*st, 1, began, reentry_terms::renewal_only, now + 1s).t;
        auto j = begin_or_join(*st, 2, asked, reentry_terms::renewal_only, now + 1s);
        CHECK(j.start_renewals);
        CHECK(t->terms.lease == 1s);
        CHECK(t->terms.lock_delay == 1s);
        CHECK(t->terms.renew_every == 300ms);
        // Renewals already run: a second watchdog re-entry starts none.
        CHECK_FALSE(
            begin_or_join(*st, 3, asked, reentry_terms::renewal_only, now + 1s).start_renewals);
    }
    SECTION("none: nothing joins (the re-entry sent nothing)") {
        auto t = begin_or_join(*st, 1, began, reentry_terms::none, now + 1s).t;
        auto j = begin_or_join(*st, 2, asked, reentry_terms::none, now + 1s);
        CHECK_FALSE(j.start_renewals);
        CHECK(t->terms.lease == 1s);
        CHECK(t->terms.lock_delay == 1s);
        CHECK(t->terms.renew_every == 0s);
    }
}

TEST_CASE("tenure: a release takes its own level off, in its own tenure only", "[tenure]") {
    auto st = std::make_shared<bare_state>(nullptr, "name", "owner");
    const auto now = clock_type::now();
    auto t1 = begin_or_join(*st, 1, lease_terms{1s, {}}, reentry_terms::all, now + 1s).t;
    begin_or_join(*st, 2, lease_terms{1s, {}}, reentry_terms::all, now + 1s);
    CHECK(take_level(*st, 9, *t1) == release_step::gone);  // not held
    CHECK(take_level(*st, 2, *t1) == release_step::more_levels);
    CHECK(take_level(*st, 2, *t1) == release_step::gone);  // taken off already
    CHECK(take_level(*st, 1, *t1) == release_step::last_level);
    CHECK(st->held.load() == 0);
    CHECK(st->live() == nullptr);
    // A guard of tenure 1 keeps its object: tenure 2 gets a new one, and
    // a release of tenure 1's level finds the later tenure.
    auto t2 = begin_or_join(*st, 3, lease_terms{1s, {}}, reentry_terms::all, now + 1s).t;
    CHECK(t2 != t1);
    CHECK(t2->epoch == 2);
    CHECK(take_level(*st, 1, *t1) == release_step::later_tenure);
    // A lost tenure's level is gone: the server says what happened.
    t2->mark_lost(clock_type::now());
    CHECK(take_level(*st, 3, *t2) == release_step::gone);
}

TEST_CASE("tenure: an object nobody refers to is reused, the spare slot's too", "[tenure]") {
    auto st = std::make_shared<bare_state>(nullptr, "name", "owner");
    const auto now = clock_type::now();
    const tenure* first = begin_or_join(*st, 1, lease_terms{1s, {}}, reentry_terms::all, now).t.get();
    CHECK(take_level(*st, 1, *st->current) == release_step::last_level);
    // Only the handle refers to it: the next tenure reuses it.
    CHECK(begin_or_join(*st, 2, lease_terms{1s, {}}, reentry_terms::all, now).t.get() == first);
    CHECK(st->current->epoch == 2);
    CHECK(take_level(*st, 2, *st->current) == release_step::last_level);
    // The slot holds it as well: still nobody else's, reused, the slot emptied.
    std::shared_ptr<tenure> spare = st->current;
    auto j = begin_or_join(*st, 3, lease_terms{1s, {}}, reentry_terms::all, now, &spare);
    CHECK(j.t.get() == first);
    CHECK(spare == nullptr);
    // A guard keeps the handle's: the spare slot's unused object is taken.
    auto guard_ref = j.t;
    j = {};
    CHECK(take_level(*st, 3, *st->current) == release_step::last_level);
    spare = std::make_shared<tenure>();
    const tenure* slot_object = spare.get();
    auto k = begin_or_join(*st, 4, lease_terms{1s, {}}, reentry_terms::all, now, &spare);
    CHECK(k.t.get() == slot_object);
    CHECK(spare == nullptr);
    CHECK(guard_ref->epoch == 3);  // the guard's tenure keeps its facts
}
