// The protected resource: one SKU's stock in a Redis hash, written only
// through the Redis fence (corolock::async_fenced_exec, docs/fencing.md).
//
// The store remembers the highest fencing token it has accepted and refuses
// any write that carries a token not above it. That is what keeps a holder
// whose lease ran out (a GC pause, a frozen VM, a SIGSTOP) from overwriting
// the work of the holders that came after it: the lock alone cannot, because
// the late holder does not know it is late.
#pragma once

#include "scenario.hpp"

#include <corolock/client.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <string>

namespace demo {

class stock_store {
public:
    stock_store(corolock::client& redis, const scenario& sc);

    // Puts `units` on sale and zeroes the fence and the sold counter.
    boost::asio::awaitable<void> reset(std::int64_t units);

    // A plain read: the first half of a read-then-write that is only correct
    // under the lock.
    boost::asio::awaitable<std::int64_t> units();

    struct write_result {
        bool accepted = false;
        std::uint64_t fence = 0;  // the highest token accepted, after this write
    };
    // The fenced write: sets the units if `token` is at least every token the
    // store accepted before, atomically with the check (one call of the
    // corolock Redis function library, loaded on first use).
    boost::asio::awaitable<write_result> write_units(std::uint64_t token, std::int64_t units);
    // What code without fencing does: just write.
    boost::asio::awaitable<void> write_units_unfenced(std::int64_t units);

    // A separate non-atomic GET-then-SET counter of sales. Nothing but the
    // lock protects it, so it ends exact only if holders never overlapped.
    boost::asio::awaitable<void> count_sale();

    // The highest token the fence has recorded (0 before any write).
    boost::asio::awaitable<std::uint64_t> fence();

    struct totals {
        std::int64_t units = 0;
        std::int64_t counter = 0;
        std::uint64_t fence = 0;
    };
    boost::asio::awaitable<totals> read_totals();

private:
    corolock::client& redis_;
    std::string store_key_;
    std::string counter_key_;
    std::string fence_key_;
};

}  // namespace demo
