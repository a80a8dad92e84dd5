// How every public operation of corolock starts and ends.
//
// Starting: each operation is a named initiation type (lock_handle's, for
// initiate_acquire, guard's initiate_release and initiate_until_lost,
// client's initiate_exec, backend's and client's initiate_drain, admin.hpp's
// initiate_admin) with get_executor(), so that Asio's async_result machinery
// and associators see the client's executor. Its operator() type-erases the
// handler (erase_handler; plain erase_keeping_work where the operation never
// calls it directly) and calls one compiled, non-template function of the
// operation.
//
// Without a token, an operation takes default_token (below).
//
// Ending: through one of the helpers at the end of this file.
//  - complete_posted(): an answer known inside the initiating call. post()
//    runs the handler on its associated executor, never inside that call.
//  - complete_now(): later answers. A handler flagged `direct` at initiation
//    (its associated executor is the client's own io_context executor) is
//    called directly on a thread running that io_context: what dispatch()
//    would do, without boxing the type-erased handler's executor (several
//    allocations per completion). Any other handler is dispatched to its
//    associated executor.
//  - complete(): either, by whether the initiating call is still running.
#pragma once

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/system_executor.hpp>

#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

namespace corolock::detail {

// The token of every public async_* called without one: deferred, so that
// `co_await m.async_acquire({})` works in an awaitable (it throws on error)
// and `auto op = m.async_acquire({})` is a lazy operation to launch later.
// Asio 1.86 makes deferred every executor's default; 1.81's any_io_executor
// has none.
using default_token = boost::asio::deferred_t;

template <class Handler>
bool runs_on_client_executor(const Handler& h, const boost::asio::any_io_executor& client_ex) {
    using io_executor = boost::asio::io_context::executor_type;
    const io_executor* plain = client_ex.target<io_executor>();
    if (plain == nullptr) return false;
    const auto ex = boost::asio::get_associated_executor(h, client_ex);
    using executor_type = std::remove_cv_t<decltype(ex)>;
    if constexpr (std::is_same_v<executor_type, boost::asio::any_io_executor>)
        return ex == client_ex;
    else if constexpr (std::is_same_v<executor_type, io_executor>)
        return ex == *plain;
    else
        return false;  // a strand or another executor: dispatch as usual
}

// A caller's handler with outstanding work on its associated executor,
// released when this object is destroyed: after the handler has run (or
// when it is dropped without running, as when its context shuts down).
// Every associated characteristic is the handler's own.
template <class Handler, class Executor>
class work_keeping_handler {
public:
    work_keeping_handler(Handler h, const Executor& ex)
        : handler_(std::move(h)), work_(boost::asio::make_work_guard(ex)) {}

    template <class... Args>
    void operator()(Args&&... args) {
        std::move(handler_)(std::forward<Args>(args)...);
    }

    Handler handler_;

private:
    boost::asio::executor_work_guard<Executor> work_;
};

// Type-erases a caller's handler the way Asio requires of an asynchronous
// operation: until the handler has run, the operation keeps outstanding work
// on the handler's associated executor, so that the context meant to run it
// cannot run out of work first (its run() would return, and the handler
// would wait for a run() that may never come). A handler of the client's own
// execution context needs nothing more: the client's pending I/O and timers
// are that context's work for as long as the client lives, and stop()
// completes every operation. Any other handler is wrapped to keep that work.
// Without a client (an empty client_ex: an empty guard's operations) the
// answer is posted at once, and complete_posted() keeps the work.
template <class Signature, class Handler>
boost::asio::any_completion_handler<Signature> erase_keeping_work(
    Handler&& h, const boost::asio::any_io_executor& client_ex) {
    namespace asio = boost::asio;
    using handler_type = std::decay_t<Handler>;
    if (!client_ex) return asio::any_completion_handler<Signature>(std::forward<Handler>(h));
    auto ex = asio::get_associated_executor(h, client_ex);
    using executor_type = std::remove_cv_t<decltype(ex)>;
    if constexpr (asio::can_query<const executor_type&, asio::execution::context_t>::value) {
        asio::execution_context& mine = asio::query(client_ex, asio::execution::context);
        asio::execution_context& theirs = asio::query(ex, asio::execution::context);
        if (std::addressof(mine) == std::addressof(theirs))
            return asio::any_completion_handler<Signature>(std::forward<Handler>(h));
    }
    return asio::any_completion_handler<Signature>(
        work_keeping_handler<handler_type, executor_type>(std::forward<Handler>(h), ex));
}

// At completion: whether the handler flagged at initiation may be called now.
inline bool may_call_directly(bool flagged, const boost::asio::any_io_executor& client_ex) {
    if (!flagged) return false;
    const auto* plain = client_ex.target<boost::asio::io_context::executor_type>();
    return plain != nullptr && plain->running_in_this_thread();
}

// Runs call(), which invokes a handler directly. An exception it throws
// leaves io_context::run(), as it would from dispatch() (Asio captures it
// there and rethrows it from run()): it is rethrown by a posted function,
// instead of unwinding through the library's own state.
template <class Call>
void call_directly(Call&& call, const boost::asio::any_io_executor& client_ex) {
    try {
        call();
    } catch (...) {
        boost::asio::post(client_ex, [e = std::current_exception()] { std::rethrow_exception(e); });
    }
}

// A handler erased at initiation, and whether it may be called directly.
template <class Signature>
struct erased_handler {
    boost::asio::any_completion_handler<Signature> handler;
    bool direct = false;
};

// What an initiation does with its caller's handler: notes whether it runs
// on the client's executor, then erases it keeping work (above).
template <class Signature, class Handler>
erased_handler<Signature> erase_handler(Handler&& h, const boost::asio::any_io_executor& client_ex) {
    const bool direct = client_ex && runs_on_client_executor(h, client_ex);
    return {erase_keeping_work<Signature>(std::forward<Handler>(h), client_ex), direct};
}

// Completes from inside the initiating call: posted through `via` (the
// client's executor) to the handler's own associated executor.
//
// With no client (an empty `via`: an empty guard's operations) the answer
// goes through the system executor, but not as post(system_executor, h)
// would send it: that wraps h with outstanding work on h's executor and
// gives the work up on the system thread after handing h over. If h's
// io_context then runs h and returns from run() at once, its owner may
// destroy it while the system thread is still inside on_work_finished()
// (ASan saw that: a use after free in the scheduler). Here the work rides
// with the handler itself (work_keeping_handler), so it is given up on the
// thread that ran h, when Asio frees the operation; the system thread only
// forwards h by dispatch() and touches nothing of h's context afterwards.
template <class Handler, class... Args>
void complete_posted(Handler&& h, const boost::asio::any_io_executor& via, Args&&... args) {
    namespace asio = boost::asio;
    if (via) {
        asio::post(via, asio::append(std::forward<Handler>(h), std::forward<Args>(args)...));
        return;
    }
    auto ex = asio::get_associated_executor(h);
    using executor_type = std::remove_cv_t<decltype(ex)>;
    auto answer = asio::append(
        work_keeping_handler<std::decay_t<Handler>, executor_type>(std::forward<Handler>(h), ex),
        std::forward<Args>(args)...);
    // dispatch(token) runs the answer on its associated executor (h's)
    // without a work_dispatcher of its own, which would again give up work
    // on this thread.
    asio::post(asio::system_executor(),
               [answer = std::move(answer)]() mutable { asio::dispatch(std::move(answer)); });
}

// Completes after the initiating call has returned: directly where
// may_call_directly() allows it, else by dispatch() to the handler's
// associated executor.
template <class Handler, class... Args>
void complete_now(Handler&& h, bool direct, const boost::asio::any_io_executor& client_ex,
                  Args&&... args) {
    if (may_call_directly(direct, client_ex)) {
        call_directly([&] { std::move(h)(std::forward<Args>(args)...); }, client_ex);
        return;
    }
    auto ex = boost::asio::get_associated_executor(h, client_ex);
    boost::asio::dispatch(ex, boost::asio::append(std::move(h), std::forward<Args>(args)...));
}

// complete_posted() while `initiating`, complete_now() otherwise.
template <class Handler, class... Args>
void complete(Handler&& h, bool initiating, bool direct,
              const boost::asio::any_io_executor& client_ex, Args&&... args) {
    if (initiating)
        complete_posted(std::forward<Handler>(h), client_ex, std::forward<Args>(args)...);
    else
        complete_now(std::forward<Handler>(h), direct, client_ex, std::forward<Args>(args)...);
}

}  // namespace corolock::detail

namespace boost::asio {

// A work_keeping_handler answers every associator (executor, allocator,
// cancellation slot, ...) with its handler's.
template <template <class, class> class Associator, class Handler, class Executor,
          class DefaultCandidate>
struct associator<Associator, corolock::detail::work_keeping_handler<Handler, Executor>,
                  DefaultCandidate> : Associator<Handler, DefaultCandidate> {
    static typename Associator<Handler, DefaultCandidate>::type get(
        const corolock::detail::work_keeping_handler<Handler, Executor>& h) noexcept {
        return Associator<Handler, DefaultCandidate>::get(h.handler_);
    }
    static auto get(const corolock::detail::work_keeping_handler<Handler, Executor>& h,
                    const DefaultCandidate& c) noexcept
        -> decltype(Associator<Handler, DefaultCandidate>::get(h.handler_, c)) {
        return Associator<Handler, DefaultCandidate>::get(h.handler_, c);
    }
};

}  // namespace boost::asio
