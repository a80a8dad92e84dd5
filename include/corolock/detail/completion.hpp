// Completing a caller's handler without a type-erased executor.
//
// A handler must run on its associated executor; dispatch() through that
// executor runs it inline when the current thread is already running it.
// Once the handler is type-erased (any_completion_handler), finding its
// executor boxes a copy on the heap, several allocations per completion. So
// the question is answered at initiation, while the handler's type is known:
// is its associated executor the client's own io_context executor? If so, a
// completion on a thread running that io_context may call the handler
// directly: exactly what dispatch() would do, without the boxing.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <exception>
#include <type_traits>

namespace corolock::detail {

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

// Completes a type-erased handler flagged at initiation (`direct`): by a
// direct call where may_call_directly() allows it, else by dispatch() to its
// associated executor.
template <class Handler, class... Args>
void complete_handler(Handler&& h, bool direct, const boost::asio::any_io_executor& client_ex,
                      Args&&... args) {
    if (may_call_directly(direct, client_ex)) {
        call_directly([&] { std::move(h)(std::forward<Args>(args)...); }, client_ex);
        return;
    }
    auto ex = boost::asio::get_associated_executor(h, client_ex);
    boost::asio::dispatch(ex, boost::asio::append(std::move(h), std::forward<Args>(args)...));
}

}  // namespace corolock::detail
