// The demo's shared vocabulary: the scenario's parameters, the Redis keys of
// the protected store, and the event lines workers print for the orchestrator.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace demo {

using std::chrono::milliseconds;

struct scenario {
    std::string url;                  // where Redis is
    std::string sku = "sku-42";       // the product; the lock is "stock:" + sku
    int workers = 3;                  // processes
    int tasks = 16;                   // coroutines per process, each its own lock handle
    int stock = 200;                  // units on sale
    milliseconds lease{5000};         // the ordinary sellers' lease (watchdog renews it)
    milliseconds victim_lease{1000};  // the paused worker's lease: short, so the pause outlives it
    milliseconds pause{2500};         // how long the orchestrator freezes the victim
    bool use_lock = true;             // --no-lock shows what happens without it

    std::string lock_name() const { return "stock:" + sku; }
    // The store shares the lock's hash tag, so on Redis Cluster its keys live
    // in the lock's slot and the fenced write touches one slot only.
    std::string store_key() const { return "demo:{" + lock_name() + "}:store"; }
    std::string counter_key() const { return "demo:{" + lock_name() + "}:sold"; }
    // The Redis fence's record of the highest token written (one slot with
    // the store: the same hash tag).
    std::string fence_key() const { return "demo:{" + lock_name() + "}:fence"; }

    // Empty when the parameters make a meaningful run; otherwise why not.
    std::string check() const;
};

// CLOCK_MONOTONIC in nanoseconds. All processes on one machine share it, so
// one worker's release time and another's acquire time can be subtracted.
std::int64_t mono_ns() noexcept;

// Workers talk to the orchestrator in lines of space-separated words on
// stdout: a kind, then its fields (see worker.cpp for the list).
struct event {
    std::string kind;
    std::vector<std::string> fields;

    // The field as a number; nullopt when missing or not a number.
    std::optional<std::int64_t> num(std::size_t i) const;
};
std::optional<event> parse_event(std::string_view line);

// Parses a whole decimal int64; nullopt on anything else.
std::optional<std::int64_t> parse_int(std::string_view s);

}  // namespace demo
