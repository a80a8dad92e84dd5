// The executor under the client's strand: the user's any_io_executor, with
// the blocking property answered from a flag instead of asked of it.
//
// A strand asks its inner executor query(execution::blocking) on every
// execute(), so on every completion that resumes one of the client's
// coroutines (each reply read, for one). Boost 1.81's any_executor returns
// a query result of class type through `new`, so asking any_io_executor
// costs a heap allocation each time: two per lock cycle. This wrapper
// remembers the blocking property it was made with, required or preferred,
// and forwards everything else to the executor it wraps.
//
// One approximation: a preference for blocking.possibly is taken as met.
// For an io_context's executor (and a strand's) it always is; an executor
// that cannot honour it keeps posting, and a strand over it would then run a
// dispatched function inline while already on the strand, which is what
// dispatch() asks for.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/require.hpp>
#include <boost/asio/strand.hpp>

#include <concepts>
#include <utility>

namespace corolock::detail {

template <class Property>
concept forwarded_preference =
    std::same_as<Property, boost::asio::execution::outstanding_work_t::tracked_t> ||
    std::same_as<Property, boost::asio::execution::outstanding_work_t::untracked_t> ||
    std::same_as<Property, boost::asio::execution::relationship_t::fork_t> ||
    std::same_as<Property, boost::asio::execution::relationship_t::continuation_t>;

class inner_executor {
public:
    explicit inner_executor(boost::asio::any_io_executor ex)
        : ex_(std::move(ex)),
          never_(boost::asio::query(ex_, boost::asio::execution::blocking) ==
                 boost::asio::execution::blocking.never) {}

    const boost::asio::any_io_executor& underlying() const noexcept { return ex_; }

    boost::asio::execution_context& query(boost::asio::execution::context_t) const noexcept {
        return boost::asio::query(ex_, boost::asio::execution::context);
    }
    boost::asio::execution::blocking_t query(boost::asio::execution::blocking_t) const noexcept {
        if (never_) return boost::asio::execution::blocking.never;
        return boost::asio::execution::blocking.possibly;
    }
    // Forwarded (and so allocating), but nothing on the hot path asks. They
    // must exist: without them Asio assumes the static defaults (untracked,
    // fork), and would skip prefer(untracked) and prefer(fork) below.
    boost::asio::execution::outstanding_work_t query(boost::asio::execution::outstanding_work_t p) const {
        return boost::asio::query(ex_, p);
    }
    boost::asio::execution::relationship_t query(boost::asio::execution::relationship_t p) const {
        return boost::asio::query(ex_, p);
    }

    inner_executor require(boost::asio::execution::blocking_t::never_t p) const {
        return {boost::asio::require(ex_, p), true};
    }
    inner_executor prefer(boost::asio::execution::blocking_t::possibly_t p) const {
        return {boost::asio::prefer(ex_, p), false};
    }
    // Work tracking and relationship: passed on, the blocking property kept.
    template <class Property>
        requires forwarded_preference<Property>
    inner_executor prefer(Property p) const {
        return {boost::asio::prefer(ex_, p), never_};
    }

    template <class Function>
    void execute(Function&& f) const {
        ex_.execute(std::forward<Function>(f));
    }

    friend bool operator==(const inner_executor& a, const inner_executor& b) noexcept {
        return a.never_ == b.never_ && a.ex_ == b.ex_;
    }
    friend bool operator!=(const inner_executor& a, const inner_executor& b) noexcept {
        return !(a == b);
    }

private:
    inner_executor(boost::asio::any_io_executor ex, bool never) noexcept
        : ex_(std::move(ex)), never_(never) {}

    boost::asio::any_io_executor ex_;
    bool never_;
};

// Settles the executor traits here, once, before any file asks for them
// from inside another constraint (co_spawn's, bind_executor's): g++ 12
// otherwise reports, depending on what a file included first, a constraint
// that depends on itself.
static_assert(boost::asio::execution::is_executor<inner_executor>::value);
static_assert(boost::asio::execution::is_executor<boost::asio::strand<inner_executor>>::value);

}  // namespace corolock::detail
