// Conformance of the admin seam (corolock/admin.hpp) on every backend: status,
// list, release-owner, break and the sequencer check (async_check_token),
// through the public API on a backend opened by URL.
//
// What each case asserts:
//  - a holder seen from outside: status names its owner and its token
//    (last_token == the guard's token); list finds it by pattern; the
//    sequencer check says its token is current and a later holder's token
//    makes it stale; release-owner of someone else is refused (not_owner)
//    and leaves it held, of the holder frees it, and of nobody is expired;
//    break frees it and answers who held it, and a second break finds
//    nothing. RedLock, which has no admin (docs/architecture.md), answers
//    error::not_supported to each.
//  - bad input: an empty or braced name, an empty owner, a braced pattern:
//    invalid_argument; a stopped backend: client_stopped.
//  - cancellation: a check cancelled right after it began completes with
//    operation_aborted; the default token (use_awaitable) throws nothing for
//    a plain answer.
#include "conformance/conformance.hpp"
#include "support/lock_testing.hpp"  // eventually()

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <boost/system/system_error.hpp>

#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock::test;
using namespace corolock::test::conformance;
using corolock::error;
using corolock::error_code;

namespace {

bool has_admin(const corolock::backend& b) { return b.scheme().substr(0, 7) != "redlock"; }

// Waits, bounded in tries and time, until nobody holds `name` (a session
// ended by a break goes away a moment after the break's answer on
// PostgreSQL). Returns whether it did.
asio::awaitable<bool> until_free(corolock::backend& b, const std::string& name) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (int i = 0; i < 400 && std::chrono::steady_clock::now() < deadline; ++i) {
        auto [ec, st] = co_await corolock::async_lock_status(b, name, use_nothrow);
        if (!ec && !st.held) co_return true;
        co_await sleep_for(25ms);
    }
    co_return false;
}

}  // namespace

TEST_CASE("admin: status, list, check, release-owner and break see the holder",
          "[conformance][admin]") {
    auto server = start_server();
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const std::string name = "adm-seam";
        corolock::mutex first(b, name), second(b, name);
        auto [aec, g] = co_await first.async_acquire({.lease = 10s}, use_nothrow);
        REQUIRE_FALSE(aec);

        auto [sec, st] = co_await corolock::async_lock_status(b, name, use_nothrow);
        if (!has_admin(b)) {
            CHECK(sec == error::not_supported);
            auto [cec, current] = co_await corolock::async_check_token(b, name, g.token(),
                                                                       use_nothrow);
            CHECK(cec == error::not_supported);
            CHECK_FALSE(current);
            corolock::lock_list_options lo;
            auto [lec, list] = co_await corolock::async_list_locks(b, lo, use_nothrow);
            CHECK(lec == error::not_supported);
            auto [bec, removed] = co_await corolock::async_break_lock(b, name, use_nothrow);
            CHECK(bec == error::not_supported);
            const auto rec = co_await corolock::async_release_owner(b, name, first.owner_id(),
                                                                    use_nothrow);
            CHECK(std::get<0>(rec) == error::not_supported);
            const auto r = co_await g.release();
            CHECK_FALSE(r);
            b.stop();
            co_return;
        }
        INFO(sec.message());
        REQUIRE_FALSE(sec);
        CHECK(st.held);
        CHECK(st.type == corolock::lock_type::mutex);
        CHECK(st.owner == first.owner_id());
        CHECK(st.last_token == g.token());
        CHECK(st.holder_count == 1);

        auto [c1ec, current] = co_await corolock::async_check_token(b, name, g.token(),
                                                                    use_nothrow);
        REQUIRE_FALSE(c1ec);
        CHECK(current);
        auto [c2ec, other] = co_await corolock::async_check_token(b, name, g.token() + 1,
                                                                  use_nothrow);
        REQUIRE_FALSE(c2ec);
        CHECK_FALSE(other);

        corolock::lock_list_options lo;
        lo.pattern = "adm-*";
        auto [lec, list] = co_await corolock::async_list_locks(b, lo, use_nothrow);
        INFO(lec.message());
        REQUIRE_FALSE(lec);
        REQUIRE(list.locks.size() == 1);
        CHECK(list.locks[0].name == name);
        CHECK(list.locks[0].status.owner == first.owner_id());
        CHECK(list.locks[0].status.last_token == g.token());
        lo.pattern = "none-*";
        auto [nec, none] = co_await corolock::async_list_locks(b, lo, use_nothrow);
        REQUIRE_FALSE(nec);
        CHECK(none.locks.empty());

        // Someone else's release-owner touches nothing.
        const auto [oec] = co_await corolock::async_release_owner(b, name, second.owner_id(),
                                                                  use_nothrow);
        CHECK(oec == error::not_owner);
        auto [s2ec, still] = co_await corolock::async_lock_status(b, name, use_nothrow);
        REQUIRE_FALSE(s2ec);
        CHECK(still.held);
        CHECK(still.owner == first.owner_id());

        // The holder's frees it; then nobody holds it.
        const auto [hec] = co_await corolock::async_release_owner(b, name, first.owner_id(),
                                                                  use_nothrow);
        INFO(hec.message());
        CHECK_FALSE(hec);
        CHECK(co_await until_free(b, name));
        auto [c3ec, after] = co_await corolock::async_check_token(b, name, g.token(),
                                                                  use_nothrow);
        REQUIRE_FALSE(c3ec);
        CHECK_FALSE(after);
        const auto [eec] = co_await corolock::async_release_owner(b, name, first.owner_id(),
                                                                  use_nothrow);
        CHECK(eec == error::expired);

        // A later holder's grant makes the first token stale.
        auto [a2ec, g2] = co_await second.async_acquire({.lease = 10s, .wait = 10s}, use_nothrow);
        INFO(a2ec.message());
        REQUIRE_FALSE(a2ec);
        CHECK(g2.token() > g.token());
        auto [c4ec, stale] = co_await corolock::async_check_token(b, name, g.token(),
                                                                  use_nothrow);
        REQUIRE_FALSE(c4ec);
        CHECK_FALSE(stale);
        auto [c5ec, fresh] = co_await corolock::async_check_token(b, name, g2.token(),
                                                                  use_nothrow);
        REQUIRE_FALSE(c5ec);
        CHECK(fresh);

        // Break: answers who held it, frees it; a second break finds nothing.
        auto [bec, removed] = co_await corolock::async_break_lock(b, name, use_nothrow);
        INFO(bec.message());
        REQUIRE_FALSE(bec);
        CHECK(removed.held);
        CHECK(removed.owner == second.owner_id());
        CHECK(co_await until_free(b, name));
        auto [b2ec, nothing] = co_await corolock::async_break_lock(b, name, use_nothrow);
        REQUIRE_FALSE(b2ec);
        CHECK_FALSE(nothing.held);
        auto [c6ec, broken] = co_await corolock::async_check_token(b, name, g2.token(),
                                                                   use_nothrow);
        REQUIRE_FALSE(c6ec);
        CHECK_FALSE(broken);

        // The guards' own releases never succeed now; their answers vary by
        // backend (expired, lock_lost), which the release cases cover.
        const auto r1 = co_await g.release();
        CHECK(r1);
        const auto r2 = co_await g2.release();
        CHECK(r2);
        b.stop();
    }, 120s);
}

TEST_CASE("admin: bad input and a stopped backend get clear errors", "[conformance][admin]") {
    auto server = start_server();
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const std::vector<std::string> bad_names{std::string(), std::string("a{b}")};
        for (const auto& bad : bad_names) {
            auto [sec, st] = co_await corolock::async_lock_status(b, bad, use_nothrow);
            CHECK(sec == error::invalid_argument);
            auto [cec, current] = co_await corolock::async_check_token(b, bad, 1, use_nothrow);
            CHECK(cec == error::invalid_argument);
            CHECK_FALSE(current);
        }
        const auto [oec] = co_await corolock::async_release_owner(b, "adm-bad", "", use_nothrow);
        CHECK(oec == error::invalid_argument);
        corolock::lock_list_options lo;
        lo.pattern = "{x}";
        auto [lec, list] = co_await corolock::async_list_locks(b, lo, use_nothrow);
        CHECK(lec == error::invalid_argument);

        // Cancelled right after it began: operation_aborted, at once
        // (RedLock answers not_supported before any slot is connected).
        asio::cancellation_signal cancel;
        error_code xec;
        bool x = true, done = false;
        corolock::async_check_token(b, "adm-cancel", 1,
                                    asio::bind_cancellation_slot(
                                        cancel.slot(), [&](error_code e, bool current) {
                                            xec = e;
                                            x = current;
                                            done = true;
                                        }));
        cancel.emit(asio::cancellation_type::terminal);
        const bool answered = co_await eventually([&] { return done; }, 10s);
        REQUIRE(answered);
        if (has_admin(b))
            CHECK(xec == asio::error::operation_aborted);
        else
            CHECK(xec == error::not_supported);
        CHECK_FALSE(x);

        // The default token: a plain answer, nothing thrown (RedLock throws
        // not_supported).
        error_code thrown;
        bool free_token = false;
        try {
            free_token = co_await corolock::async_check_token(b, "adm-free", 1);
        } catch (const boost::system::system_error& e) {
            thrown = e.code();
        }
        CHECK(thrown == (has_admin(b) ? error_code() : error_code(error::not_supported)));
        CHECK_FALSE(free_token);

        b.stop();
        auto [stec, st] = co_await corolock::async_lock_status(b, "adm-stopped", use_nothrow);
        CHECK(stec == error::client_stopped);
    }, 60s);
}
