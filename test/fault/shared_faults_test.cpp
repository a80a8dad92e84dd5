// corolock::shared_mutex under process faults: lock_worker processes in
// rw-cycle mode (two cycles in three readers) on one name, while the test
// pauses a holder past its lease, kills one with kill -9, or restarts the
// redis-server, under a seeded schedule (COROLOCK_FAULT_SEED replays one).
// The history checker's readers rule: readers overlap, never a writer.
#include "fault/fault_fleet.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <iostream>
#include <set>
#include <thread>
#include <utility>
#include <vector>

using namespace corolock::test::fault;
using corolock::test::mono_ns;
using corolock::test::redis_server;

namespace {
fleet_options rw_fleet(const char* name) {
    return {.workers = 5, .lease = 1000ms, .hold = 250ms, .duration = 6000ms, .name = name,
            .rw = true};
}

// The most readers whose safe windows were open at one moment.
int most_readers_at_once(const corolock::test::history::check_result& r,
                         const std::vector<corolock::test::history::event>& evs) {
    std::set<std::pair<long long, std::uint64_t>> readers;  // (pid, token)
    for (const auto& e : evs)
        if (e.ev == "acquire_ok" && e.shared) readers.emplace(e.pid, e.token);
    return most_at_once(r, [&](const corolock::test::history::holder_info& h) {
        return readers.count({h.pid, h.token}) > 0;
    });
}

// Counts the writers' sections and checks the counter and the readers rule.
void check_fleet(fleet& f, const corolock::test::history::check_options& o, const char* what) {
    const auto r = f.check(o);
    INFO(r.report());
    CHECK(r.ok());
    CHECK(r.count("readers") == 0);
    const int most = most_readers_at_once(r, f.events());
    std::cout << what << ": " << r.holders << " holders, " << r.completed_sections
              << " writer sections, at most " << most << " readers at once" << std::endl;
    CHECK(most >= 2);  // the readers did overlap
    CHECK(r.completed_sections >= 1);
}
}  // namespace

TEST_CASE("shared: a reader and a writer paused past their lease are lost in time",
          "[fault][process][shared]") {
    const auto seed = fault_seed("shared paused");
    redis_server server;
    fleet f(server, rw_fleet("rw-paused"), seed);
    f.start();
    std::this_thread::sleep_for(draw(f.rng(), 300ms, 800ms));
    const auto paused_reader = f.pause_reader_in_section(5s);
    REQUIRE(paused_reader);
    const std::optional<std::size_t> reader = paused_reader->index;
    const long long reader_pid = f.worker(*reader).pid();
    const long long reader_paused_at = paused_reader->at;
    const auto writer = f.pause_in_section(8s, {*reader});
    REQUIRE(writer);
    const long long writer_pid = f.worker(writer->index).pid();
    const long long writer_paused_at = writer->at;
    std::this_thread::sleep_for(f.options().lease + draw(f.rng(), 800ms, 1200ms));
    // Another writer writes (bounded) before the resume: the late write is
    // refused only then (fault_fleet.hpp, wrote_after_section). Under load
    // the few cycles of the pause may all have been readers'.
    const auto next_writer = f.worker_in_section(5s, {*reader, writer->index});
    REQUIRE(next_writer);
    REQUIRE(f.wrote_after_section(*next_writer, 5s));
    const long long resumed_at = mono_ns();
    f.resume(*reader);
    f.resume(writer->index);
    f.finish();

    check_fleet(f, f.counted(), "shared paused");
    const auto r = f.check(f.counted());
    const auto* reader_held = holder_at(r, reader_pid, reader_paused_at);
    const auto* writer_held = holder_at(r, writer_pid, writer_paused_at);
    REQUIRE(reader_held);
    REQUIRE(writer_held);
    CHECK(reader_held->window_end < resumed_at);
    CHECK(writer_held->window_end < resumed_at);
    // The writer's late write (after the resume) gives its lost signal time
    // to be logged; the reader, whose section ends with the pause, may
    // release first: then its release fails instead.
    CHECK(writer_held->lost >= resumed_at);
    CHECK((reader_held->lost >= resumed_at || reader_held->release_outcome != "ok"));
    CHECK(writer_held->write_outcome == "rejected");
}

TEST_CASE("shared: a reader and a writer killed with kill -9 free the lock at their lease end",
          "[fault][process][shared]") {
    const auto seed = fault_seed("shared killed");
    redis_server server;
    fleet f(server, rw_fleet("rw-killed"), seed);
    f.start();
    std::this_thread::sleep_for(draw(f.rng(), 300ms, 800ms));
    const auto reader = f.reader_in_section(5s);
    REQUIRE(reader);
    const long long reader_pid = f.worker(*reader).pid();
    const long long killed_at = mono_ns();
    f.kill9(*reader);
    const auto writer = f.worker_in_section(8s, {*reader});
    REQUIRE(writer);
    const long long writer_pid = f.worker(*writer).pid();
    const long long writer_killed_at = mono_ns();
    f.kill9(*writer);
    f.finish();

    auto o = f.counted();
    check_fleet(f, o, "shared killed");
    const auto r = f.check(o);
    REQUIRE(holder_at(r, reader_pid, killed_at));
    REQUIRE(holder_at(r, writer_pid, writer_killed_at));
    // Someone wrote after the killed writer's lease ended.
    bool wrote_after = false;
    for (const auto& x : r.holder_list)
        wrote_after = wrote_after || (x.pid != writer_pid && x.acquire_ok > writer_killed_at &&
                                      x.write_outcome == "accepted");
    CHECK(wrote_after);
}

TEST_CASE("shared: a redis-server restart while held and waited on hangs nobody",
          "[fault][process][shared]") {
    const auto seed = fault_seed("shared restart");
    redis_server server(durable_server());
    fleet f(server, rw_fleet("rw-restart"), seed);
    f.start();
    std::this_thread::sleep_for(draw(f.rng(), 1000ms, 2000ms));
    const auto held = f.worker_in_section(5s);  // a writer holds, others wait
    REQUIRE(held);
    const long long up_at = restart_server(f, server);
    f.finish();

    check_fleet(f, f.counted(), "shared restart");
    const auto r = f.check(f.counted());
    const auto after = acquired_after(r, up_at);
    CHECK(after.size() >= 2);
}
