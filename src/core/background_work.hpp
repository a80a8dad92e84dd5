// The clean-up a backend owes the server after nobody waits for it, and
// the waits for it (lock_backend::drain, backend::async_drain).
//
// A job counts from begin() to end(): a release or lease revoke of a level
// nobody waits for, or an acquire abandoned while a request of it is still
// out (its answer may grant, and the grant is then given back). A drain
// waits for the jobs begun before it, never for later ones: each drain
// closes the current epoch and completes once no job of that epoch or an
// earlier one is left. A job begun for another (the give-back of an
// abandoned acquire's grant) joins that one's epoch, so a drain waiting for
// the acquire waits for its give-back too.
//
// Strand only. Counting allocates nothing while no drain is pending.
#pragma once

#include "core/inner_executor.hpp"

#include <corolock/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>

namespace corolock::detail {

class background_work : public std::enable_shared_from_this<background_work> {
public:
    using clock = std::chrono::steady_clock;
    using strand_type = boost::asio::strand<inner_executor>;
    using handler = boost::asio::any_completion_handler<void(error_code)>;

    // One job; ending it twice (through copies) is a bug, ending an
    // uncounted one does nothing. One word: its epoch plus one, zero while
    // uncounted (an epoch grows by one per drain, so it never wraps). Every
    // acquire carries one, so its size is paid per waiter.
    struct job {
        std::uint64_t epoch_plus_one = 0;
        bool counted() const noexcept { return epoch_plus_one != 0; }
        std::uint64_t epoch() const noexcept { return epoch_plus_one - 1; }
    };
    static_assert(sizeof(job) == sizeof(std::uint64_t));

    // Timers run on `strand`; handlers complete towards `user_ex` (see
    // detail/completion.hpp).
    background_work(strand_type strand, boost::asio::any_io_executor user_ex);

    job begin() noexcept;
    // A job done on behalf of `parent` (still counted): in its epoch.
    job begin_with(const job& parent) noexcept;
    void end(job& j) noexcept;
    // Jobs begun and not ended.
    std::size_t outstanding() const noexcept { return outstanding_; }

    // Completes `h` with success once every job begun before this call has
    // ended; error::drain_timeout when `bound` passes first;
    // operation_aborted when its cancellation slot fires (any type);
    // error::client_stopped on stop() or after it. Possibly inside this
    // call: backends call it from a posted function, never from the
    // caller's initiating call.
    void drain(clock::duration bound, handler h, bool direct);
    // Completes every pending drain with error::client_stopped. Idempotent.
    void stop() noexcept;

private:
    struct waiter {
        std::uint64_t horizon = 0;  // the last epoch it waits for
        handler h;
        bool direct = false;
        std::unique_ptr<boost::asio::steady_timer> timer;
    };

    void finish(std::uint64_t id, error_code ec) noexcept;
    void wake_drained() noexcept;

    strand_type strand_;
    boost::asio::any_io_executor user_ex_;
    std::uint64_t epoch_ = 0;     // the open epoch: no drain waits for it yet
    std::size_t open_jobs_ = 0;   // its jobs
    std::map<std::uint64_t, std::size_t> closed_;  // earlier epochs with jobs left
    std::size_t outstanding_ = 0;
    std::map<std::uint64_t, waiter> waiters_;  // by id
    std::uint64_t next_id_ = 1;
    bool stopped_ = false;
};

}  // namespace corolock::detail
