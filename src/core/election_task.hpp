// What an election service's calls share (core/election_service.hpp): a
// handler kept in a shared_ptr for the copyable callbacks of a protocol,
// and a service call run as a coroutine on its backend's strand.
#pragma once

#include "core/backend.hpp"
#include "core/election_service.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>

#include <exception>
#include <memory>
#include <tuple>
#include <utility>

namespace corolock::detail {

// A move-only handler in a shared_ptr, for callbacks that must be copyable.
template <class Signature>
auto boxed(boost::asio::any_completion_handler<Signature> h) {
    return std::make_shared<boost::asio::any_completion_handler<Signature>>(std::move(h));
}

// Runs `task` on the strand of `b` and completes `h` with its answer on
// h's executor (b's when it has none), never inside this call. A task
// ended by an exception (its io_context going away) answers
// client_stopped.
inline void run_election_task(std::shared_ptr<lock_backend> b,
                              boost::asio::awaitable<error_code> task,
                              election_service::done_handler h) {
    auto& strand = b->strand();
    boost::asio::co_spawn(strand, std::move(task),
                          [b = std::move(b), box = boxed(std::move(h))](std::exception_ptr ep,
                                                                        error_code ec) {
                              if (ep) ec = error::client_stopped;
                              complete_now(std::move(*box), false, b->get_executor(), ec);
                          });
}

inline void run_election_task(std::shared_ptr<lock_backend> b,
                              boost::asio::awaitable<std::tuple<error_code, leader_reading>> task,
                              election_service::read_handler h) {
    auto& strand = b->strand();
    boost::asio::co_spawn(
        strand, std::move(task),
        [b = std::move(b), box = boxed(std::move(h))](std::exception_ptr ep,
                                                      std::tuple<error_code, leader_reading> r) {
            if (ep) r = {error::client_stopped, leader_reading{}};
            complete_now(std::move(*box), false, b->get_executor(), std::get<0>(r),
                         std::move(std::get<1>(r)));
        });
}

}  // namespace corolock::detail
