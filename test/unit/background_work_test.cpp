// core/background_work.hpp: a drain waits for the jobs begun before it
// (and the jobs done on their behalf), never for later ones; its bound,
// cancellation and stop() end it with their own codes.
#include "core/background_work.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <optional>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error;
using corolock::error_code;
using corolock::detail::background_work;
using corolock::detail::inner_executor;

namespace {

struct fixture {
    asio::io_context ioc;
    background_work::strand_type strand{asio::make_strand(inner_executor(ioc.get_executor()))};
    std::shared_ptr<background_work> work =
        std::make_shared<background_work>(strand, ioc.get_executor());

    // Runs f on the strand, then whatever it completed.
    template <class F>
    void on_strand(F f) {
        asio::post(strand, std::move(f));
        ioc.restart();
        ioc.poll();
    }
    auto recorder(std::optional<error_code>& into) {
        return [&into](error_code ec) { into = ec; };
    }
};

}  // namespace

TEST_CASE("background_work: a drain waits for earlier jobs and their children, not later ones",
          "[unit][drain]") {
    fixture f;
    background_work::job a, b, child;
    std::optional<error_code> idle, first, second;
    f.on_strand([&] { f.work->drain(1h, f.recorder(idle), false); });
    REQUIRE(idle);  // nothing to wait for
    CHECK(*idle == error_code{});
    f.on_strand([&] {
        a = f.work->begin();
        f.work->drain(1h, f.recorder(first), false);
        b = f.work->begin();  // after the first drain: not its business
        child = f.work->begin_with(a);
        f.work->drain(1h, f.recorder(second), false);
    });
    CHECK(f.work->outstanding() == 3);
    CHECK_FALSE(first);
    f.on_strand([&] { f.work->end(a); });
    CHECK_FALSE(first);  // the child, done for a, is still out
    f.on_strand([&] { f.work->end(child); });
    REQUIRE(first);
    CHECK(*first == error_code{});
    CHECK_FALSE(second);
    f.on_strand([&] { f.work->end(b); });
    REQUIRE(second);
    CHECK(*second == error_code{});
    CHECK(f.work->outstanding() == 0);
    // Ending twice through the same job does nothing.
    f.on_strand([&] { f.work->end(b); });
    CHECK(f.work->outstanding() == 0);
}

TEST_CASE("background_work: the bound, cancellation and stop end a drain with their codes",
          "[unit][drain]") {
    fixture f;
    background_work::job j;
    std::optional<error_code> timed, cancelled, stopped, after_stop;
    asio::cancellation_signal cancel;
    f.on_strand([&] {
        j = f.work->begin();
        f.work->drain(1ms, f.recorder(timed), false);
        f.work->drain(1h, asio::bind_cancellation_slot(cancel.slot(), f.recorder(cancelled)), false);
        f.work->drain(1h, f.recorder(stopped), false);
    });
    f.ioc.restart();
    for (int i = 0; i < 500 && !timed; ++i) f.ioc.run_for(10ms);
    REQUIRE(timed);
    CHECK(*timed == error::drain_timeout);
    CHECK_FALSE(cancelled);
    cancel.emit(asio::cancellation_type::terminal);
    f.ioc.restart();
    f.ioc.poll();
    REQUIRE(cancelled);
    CHECK(*cancelled == asio::error::operation_aborted);
    CHECK_FALSE(stopped);
    f.on_strand([&] { f.work->stop(); });
    REQUIRE(stopped);
    CHECK(*stopped == error::client_stopped);
    f.on_strand([&] { f.work->drain(1h, f.recorder(after_stop), false); });
    REQUIRE(after_stop);
    CHECK(*after_stop == error::client_stopped);
    f.on_strand([&] { f.work->end(j); });
    CHECK(f.work->outstanding() == 0);
}
