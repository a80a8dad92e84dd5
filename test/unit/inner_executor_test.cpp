// The executor under the client's strand (detail/inner_executor.hpp): it
// answers the blocking query from what it was made with, and a strand over
// it keeps the strand's rules: dispatch() runs inline on the strand, post()
// never does.
#include "core/inner_executor.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <catch2/catch.hpp>

#include <vector>

namespace asio = boost::asio;
namespace execution = boost::asio::execution;
using corolock::detail::inner_executor;

TEST_CASE("inner_executor: the blocking property follows require and prefer",
          "[inner_executor][unit]") {
    asio::io_context ioc;
    const inner_executor plain{ioc.get_executor()};
    CHECK(asio::query(plain, execution::blocking) == execution::blocking.possibly);

    const auto never = asio::require(plain, execution::blocking.never);
    CHECK(asio::query(never, execution::blocking) == execution::blocking.never);
    CHECK(asio::query(never.underlying(), execution::blocking) == execution::blocking.never);
    CHECK(never != plain);

    const auto again = asio::prefer(never, execution::blocking.possibly);
    CHECK(asio::query(again, execution::blocking) == execution::blocking.possibly);
    CHECK(asio::query(again.underlying(), execution::blocking) == execution::blocking.possibly);
    CHECK(again == plain);

    // Made from an executor that is never-blocking already: it says so.
    const inner_executor from_never{asio::require(ioc.get_executor(), execution::blocking.never)};
    CHECK(asio::query(from_never, execution::blocking) == execution::blocking.never);

    // Other preferences keep the blocking property and reach the executor,
    // both ways: a preference Asio would take as met by default (untracked,
    // fork) must still undo the one before it.
    const auto tracked = asio::prefer(never, execution::outstanding_work.tracked);
    CHECK(asio::query(tracked, execution::blocking) == execution::blocking.never);
    CHECK(asio::query(tracked, execution::outstanding_work) == execution::outstanding_work.tracked);
    CHECK(asio::query(tracked.underlying(), execution::outstanding_work) ==
          execution::outstanding_work.tracked);
    const auto untracked = asio::prefer(tracked, execution::outstanding_work.untracked);
    CHECK(asio::query(untracked.underlying(), execution::outstanding_work) ==
          execution::outstanding_work.untracked);
    const auto continuation = asio::prefer(plain, execution::relationship.continuation);
    CHECK(asio::query(continuation, execution::relationship) == execution::relationship.continuation);
    const auto fork = asio::prefer(continuation, execution::relationship.fork);
    CHECK(asio::query(fork.underlying(), execution::relationship) == execution::relationship.fork);
    CHECK(&asio::query(tracked, execution::context) == &ioc);
}

TEST_CASE("inner_executor: a strand over it dispatches inline on the strand and posts in order",
          "[inner_executor][unit]") {
    asio::io_context ioc;
    asio::strand<inner_executor> strand{inner_executor{ioc.get_executor()}};
    std::vector<int> order;
    asio::post(strand, [&] {
        CHECK(strand.running_in_this_thread());
        order.push_back(1);
        // Already on the strand: dispatch runs the function here and now.
        asio::dispatch(strand, [&] { order.push_back(2); });
        // post never runs it inside this call.
        asio::post(strand, [&] { order.push_back(4); });
        order.push_back(3);
    });
    CHECK_FALSE(strand.running_in_this_thread());
    // From outside the strand, dispatch queues behind what is pending.
    asio::dispatch(strand, [&] { order.push_back(5); });
    CHECK(order.empty());
    ioc.run_for(std::chrono::seconds(5));
    CHECK(order == std::vector<int>{1, 2, 3, 5, 4});
}
