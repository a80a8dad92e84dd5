// The etcd admin (src/etcd/etcd_admin.hpp) against a real etcd: status with
// the holder record each key's value carries, and list; and the minimal
// permissions (docs/security.md, "### etcd") for the locks and the admin.
#include "etcd/codec.hpp"
#include "etcd/etcd_admin.hpp"

#include "support/async_test.hpp"
#include "support/etcd_server.hpp"
#include "support/lock_testing.hpp"

#include <corolock/backend.hpp>
#include <corolock/mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <optional>
#include <set>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock;
using namespace corolock::detail::etcd;
using namespace corolock::test;

namespace {

using wall = std::chrono::system_clock;

std::string url_of(const etcd_server& s) { return "etcd://" + s.endpoint(); }

std::unique_ptr<admin> make_admin(asio::io_context& ioc, const etcd_server& s) {
    return std::make_unique<admin>(ioc.get_executor(), url_of(s), 2000ms, 5000ms);
}

backend make_backend(asio::io_context& ioc, const etcd_server& s, std::string label) {
    backend_config cfg;
    cfg.holder_label = std::move(label);
    return backend(ioc.get_executor(), url_of(s), cfg);
}

std::string this_host() {
    std::array<char, 256> host{};
    REQUIRE(::gethostname(host.data(), host.size() - 1) == 0);
    return host.data();
}

// Polls the lock's status (every 20 ms, at most 10 s) until pred holds.
template <class Pred>
asio::awaitable<admin_lock_status> status_when(admin& a, std::string name, Pred pred) {
    asio::steady_timer nap(co_await asio::this_coro::executor);
    admin_lock_status last;
    for (int i = 0; i < 500; ++i) {
        auto [ec, st] = co_await a.status(name);
        REQUIRE_FALSE(ec);
        last = st;
        if (pred(last)) break;
        nap.expires_after(20ms);
        co_await nap.async_wait(asio::use_awaitable);
    }
    co_return last;
}

// Puts key = value with no lease, as something other than corolock would.
void put_raw(const etcd_server& s, const std::string& key, const std::string& value) {
    const auto answer = s.post(0, "/v3/kv/put",
                               "{\"key\":\"" + codec::base64_encode(key) + "\",\"value\":\"" +
                                   codec::base64_encode(value) + "\"}");
    REQUIRE(answer.status == 200);
}

// POSTs an /v3/auth/... call as root (its token); the test fails unless etcd
// answers 200.
void as_root(const etcd_server& s, const std::string& root, const std::string& path,
             const std::string& body) {
    const auto answer = s.post(0, path, body, root);
    INFO(path << ": " << answer.body);
    REQUIRE(answer.status == 200);
}

// The documented minimal permissions (docs/security.md, "### etcd") as
// etcdctl makes them, through the gateway: role `role` with `perm` (READ or
// READWRITE) on every key under `prefix` (--prefix=true), granted to a new
// user.
void add_user_with_prefix(const etcd_server& s, const std::string& root, const std::string& user,
                          const std::string& password, const std::string& role,
                          const std::string& perm, const std::string& prefix) {
    as_root(s, root, "/v3/auth/role/add", "{\"name\":\"" + role + "\"}");
    as_root(s, root, "/v3/auth/role/grant",
            "{\"name\":\"" + role + "\",\"perm\":{\"permType\":\"" + perm + "\",\"key\":\"" +
                codec::base64_encode(prefix) + "\",\"range_end\":\"" +
                codec::base64_encode(prefix_end(prefix)) + "\"}}");
    as_root(s, root, "/v3/auth/user/add",
            "{\"name\":\"" + user + "\",\"password\":\"" + password + "\"}");
    as_root(s, root, "/v3/auth/user/grant", "{\"user\":\"" + user + "\",\"role\":\"" + role + "\"}");
}

std::vector<std::string> names_of(const admin_lock_list& l) {
    std::vector<std::string> out;
    for (const auto& lock : l.locks) out.push_back(lock.name);
    return out;
}

}  // namespace

TEST_CASE("etcd admin: status shows the holder record (host, pid, label, since) and each "
          "waiter's", "[etcd][integration]") {
    etcd_server server;
    asio::io_context ioc;
    auto first = make_backend(ioc, server, "nightly report --full");
    auto second = make_backend(ioc, server, "second in line");
    auto a = make_admin(ioc, server);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        mutex m1(first, "st-1");
        mutex m2(second, "st-1");
        const auto before = wall::now();
        auto g1 = co_await m1.acquire();
        const auto after = wall::now();

        auto [ec, st] = co_await a->status("st-1");
        REQUIRE_FALSE(ec);
        REQUIRE(st.held);
        CHECK(st.holder.owner == m1.owner_id());
        REQUIRE(st.holder.holder.has_value());
        const auto& h = *st.holder.holder;
        CHECK(h.pid == ::getpid());
        CHECK(h.host == this_host());
        CHECK(h.label == "nightly report --full");
        CHECK(h.since >= std::chrono::floor<std::chrono::microseconds>(before));
        CHECK(h.since <= after);
        CHECK(h.held_for >= 0ms);

        // A waiter's key records its own process and label, since it began waiting.
        std::optional<error_code> waited;
        std::optional<guard> g2;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                lock_options o;
                o.wait = 20s;
                auto [wec, g] = co_await m2.async_acquire(o, asio::as_tuple(asio::use_awaitable));
                waited = wec;
                g2.emplace(std::move(g));
            },
            asio::detached);
        auto queued = co_await status_when(*a, "st-1", [](const admin_lock_status& s) {
            return s.waiters.size() == 1;
        });
        REQUIRE(queued.waiters.size() == 1);
        CHECK(queued.waiters[0].owner == m2.owner_id());
        REQUIRE(queued.waiters[0].holder.has_value());
        CHECK(queued.waiters[0].holder->label == "second in line");
        CHECK(queued.waiters[0].holder->pid == ::getpid());
        const auto queued_since = queued.waiters[0].holder->since;
        CHECK(queued.holder.holder->since == h.since);  // the holder's record is unchanged

        // Handed over: the new holder's since is when its tenure began, not
        // when its key began waiting.
        const auto handover = wall::now();
        const auto rec = co_await g1.release();
        CHECK_FALSE(rec);
        auto taken = co_await status_when(*a, "st-1", [&](const admin_lock_status& s) {
            return s.held && s.holder.owner == m2.owner_id() && s.holder.holder &&
                   s.holder.holder->since != queued_since;
        });
        REQUIRE(taken.held);
        CHECK(taken.holder.owner == m2.owner_id());
        REQUIRE(taken.holder.holder.has_value());
        CHECK(taken.holder.holder->label == "second in line");
        CHECK(taken.holder.holder->since >= std::chrono::floor<std::chrono::microseconds>(handover));
        CHECK(taken.waiters.empty());

        for (int i = 0; i < 500 && !waited; ++i) {
            asio::steady_timer nap(ioc, 10ms);
            co_await nap.async_wait(asio::use_awaitable);
        }
        REQUIRE(waited.has_value());
        CHECK_FALSE(*waited);

        // A re-entry's put keeps the value.
        const auto value = taken.holder.value;
        auto again = co_await m2.acquire();
        auto [rec2, reentered] = co_await a->status("st-1");
        REQUIRE_FALSE(rec2);
        CHECK(reentered.holder.value == value);
        CHECK(reentered.holder.mod_revision > taken.holder.mod_revision);
        const auto rec3 = co_await again.release();
        CHECK_FALSE(rec3);
        const auto rec4 = co_await g2->release();
        CHECK_FALSE(rec4);
        first.stop();
        second.stop();
        a->stop();
    });
}

TEST_CASE("etcd admin: a key whose value is no holder record shows no holder",
          "[etcd][integration]") {
    etcd_server server;
    asio::io_context ioc;
    auto a = make_admin(ioc, server);
    // As an older corolock wrote it: the owner id alone.
    put_raw(server, lock_prefix("corolock/", "old") + "0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, st] = co_await a->status("old");
        REQUIRE_FALSE(ec);
        REQUIRE(st.held);
        CHECK(st.holder.value == "0123456789abcdef0123456789abcdef");
        CHECK_FALSE(st.holder.holder.has_value());
        a->stop();
    });
}

TEST_CASE("etcd admin: list groups keys by lock (the first created holds, the rest wait), "
          "a glob picks names, pages and bounds hold", "[etcd][integration]") {
    etcd_server server;
    asio::io_context ioc;
    auto locks = make_backend(ioc, server, "lister");
    auto others = make_backend(ioc, server, "waiting");
    auto a = make_admin(ioc, server);
    // Not corolock's: skipped by list.
    put_raw(server, "corolock/not-a-lock", "x");
    put_raw(server, "corolock/01:x/owner", "x");
    put_raw(server, "elsewhere/1:a/owner", "x");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        // Options as a named variable: g++ 12 destroys a braced temporary
        // argument of a coroutine twice.
        const admin_list_options every;
        auto [ec0, empty] = co_await a->list(every);
        REQUIRE_FALSE(ec0);
        CHECK(empty.locks.empty());
        CHECK_FALSE(empty.truncated);

        mutex la(locks, "list-a"), lb(locks, "list-b"), other(locks, "other"),
            slash(locks, "list/a/b"), la2(others, "list-a"), la3(others, "list-a");
        auto ga = co_await la.acquire();
        auto gb = co_await lb.acquire();
        auto go = co_await other.acquire();
        auto gs = co_await slash.acquire();
        // Two waiters on list-a, so that its keys span pages of one key.
        lock_options o;
        o.wait = 20s;
        int finished = 0;
        for (auto* m : {&la2, &la3}) {
            asio::co_spawn(
                ioc,
                [m, o, &finished]() -> asio::awaitable<void> {
                    auto [wec, g] = co_await m->async_acquire(o, asio::as_tuple(asio::use_awaitable));
                    if (!wec) {
                        const auto rec = co_await g.release();
                        if (!rec) ++finished;
                    }
                },
                asio::detached);
        }
        co_await status_when(*a, "list-a", [](const admin_lock_status& s) {
            return s.waiters.size() == 2;
        });

        // Every lock, in key order (the name's length first).
        auto [ec1, all] = co_await a->list(every);
        REQUIRE_FALSE(ec1);
        CHECK_FALSE(all.truncated);
        CHECK(all.revision > 0);
        CHECK(names_of(all) == std::vector<std::string>{"other", "list-a", "list-b", "list/a/b"});
        REQUIRE(all.locks.size() == 4);
        const auto& a_status = all.locks[1].status;
        CHECK(a_status.held);
        CHECK(a_status.holder.owner == la.owner_id());
        REQUIRE(a_status.holder.holder.has_value());
        CHECK(a_status.holder.holder->label == "lister");
        CHECK(a_status.ttl > 0s);
        REQUIRE(a_status.waiters.size() == 2);
        CHECK(a_status.waiters[0].create_revision < a_status.waiters[1].create_revision);
        CHECK(a_status.waiters[0].holder->label == "waiting");
        CHECK(all.locks[0].status.holder.owner == other.owner_id());
        CHECK(all.locks[2].status.waiters.empty());
        CHECK(all.locks[3].status.holder.owner == slash.owner_id());

        // Pages of one key give the same answer, at one revision.
        admin_list_options paged;
        paged.keys_per_page = 1;
        auto [ec2, by_one] = co_await a->list(paged);
        REQUIRE_FALSE(ec2);
        CHECK_FALSE(by_one.truncated);
        CHECK(names_of(by_one) == names_of(all));
        REQUIRE(by_one.locks.size() == 4);
        CHECK(by_one.locks[1].status.waiters.size() == 2);
        CHECK(by_one.locks[1].status.holder.owner == la.owner_id());

        // A glob, as Redis's MATCH.
        admin_list_options glob;
        glob.pattern = "list-*";
        auto [ec3, dashed] = co_await a->list(glob);
        REQUIRE_FALSE(ec3);
        CHECK(names_of(dashed) == std::vector<std::string>{"list-a", "list-b"});
        glob.pattern = "list?a*";
        auto [ec4, either] = co_await a->list(glob);
        REQUIRE_FALSE(ec4);
        CHECK(names_of(either) == std::vector<std::string>{"list-a", "list/a/b"});
        glob.pattern = "nothing*";
        auto [ec5, none] = co_await a->list(glob);
        REQUIRE_FALSE(ec5);
        CHECK(none.locks.empty());

        // Bounds: locks, and pages (a lock cut by the page bound is left out).
        admin_list_options two;
        two.max_locks = 2;
        auto [ec6, first_two] = co_await a->list(two);
        REQUIRE_FALSE(ec6);
        CHECK(first_two.truncated);
        CHECK(names_of(first_two) == std::vector<std::string>{"other", "list-a"});
        CHECK(first_two.locks[1].status.waiters.size() == 2);
        admin_list_options pages;
        pages.keys_per_page = 1;
        pages.max_pages = 3;  // a foreign key, other's, then list-a's first of three
        auto [ec7, cut] = co_await a->list(pages);
        REQUIRE_FALSE(ec7);
        CHECK(cut.truncated);
        CHECK(names_of(cut) == std::vector<std::string>{"other"});

        for (auto* g : {&ga, &gb, &go, &gs}) {
            const auto rec = co_await g->release();
            CHECK_FALSE(rec);
        }
        for (int i = 0; i < 1000 && finished < 2; ++i) {
            asio::steady_timer nap(ioc, 10ms);
            co_await nap.async_wait(asio::use_awaitable);
        }
        CHECK(finished == 2);
        auto [ec8, after] = co_await a->list(every);
        REQUIRE_FALSE(ec8);
        CHECK(after.locks.empty());
        locks.stop();
        others.stop();
        a->stop();
    });
}

// docs/security.md, "### etcd", "The minimal permissions": readwrite on the
// backend's key prefix is all a lock client and the admin need (leases are
// not covered by key permissions in etcd 3.4; a lease's revoke needs write
// on its keys); read on it is enough for status and list. Outside the
// prefix every call is refused with no_permission, and nothing is held.
TEST_CASE("etcd: a user with readwrite on the key prefix only takes, waits for, renews, "
          "inspects, lists and breaks locks, and is refused outside it",
          "[etcd][integration][auth]") {
    etcd_server server;
    server.enable_auth("root-pw");
    const auto root = server.authenticate(0, "root", "root-pw");
    add_user_with_prefix(server, root, "locks", "locks-pw", "corolock", "READWRITE", "corolock/");
    add_user_with_prefix(server, root, "reader", "reader-pw", "corolock-read", "READ", "corolock/");
    const std::string url = "etcd://locks:locks-pw@" + server.endpoint();
    const std::string reader_url = "etcd://reader:reader-pw@" + server.endpoint();
    const std::string outside_url = url + "/elsewhere/";  // another key prefix
    asio::io_context ioc;
    backend a(ioc.get_executor(), url), b(ioc.get_executor(), url);
    backend reading(ioc.get_executor(), reader_url), outside(ioc.get_executor(), outside_url);
    admin ops(ioc.get_executor(), url, 2000ms, 5000ms);
    admin reader_ops(ioc.get_executor(), reader_url, 2000ms, 5000ms);
    admin outside_ops(ioc.get_executor(), outside_url, 2000ms, 5000ms);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        mutex m1(a, "perm"), m2(b, "perm");
        lock_options held_opts;
        held_opts.lease = 6s;  // the watchdog renews it every 2 s
        auto g1 = co_await m1.acquire(held_opts);

        // A waiter. It looks for its turn only once the watch on the lock's
        // prefix is in place, so without the watch's permission it would
        // never look and end with wait_timeout.
        std::optional<guard> g2;
        std::optional<error_code> waited;
        lock_options wait_opts;
        wait_opts.lease = 30s;
        wait_opts.wait = 20s;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto [ec, g] = co_await m2.async_acquire(wait_opts, use_nothrow);
            waited = ec;
            if (!ec) g2.emplace(std::move(g));
        }, asio::detached);

        // status (a range and the lease's time to live) as the same user.
        const auto st = co_await status_when(ops, "perm", [](const admin_lock_status& s) {
            return s.waiters.size() == 1;
        });
        CHECK(st.held);
        CHECK(st.holder.owner == m1.owner_id());
        CHECK(st.waiters.size() == 1);
        CHECK(st.ttl > 0s);
        const admin_list_options every;
        {
            auto [lec, all] = co_await ops.list(every);
            REQUIRE_FALSE(lec);
            CHECK(names_of(all) == std::vector<std::string>{"perm"});
        }

        // The watchdog's keep-alives are accepted.
        const bool renewed = co_await eventually([&] { return a.metrics().renewals_sent >= 2; }, 20000ms);
        CHECK(renewed);
        CHECK(a.metrics().renewals_failed == 0);
        CHECK_FALSE(g1.lost());
        CHECK_FALSE(waited.has_value());

        // Read on the prefix: status and list, but no lock and no break.
        {
            auto [sec, rst] = co_await reader_ops.status("perm");
            CHECK_FALSE(sec);
            CHECK(rst.holder.owner == m1.owner_id());
            auto [lec, all] = co_await reader_ops.list(every);
            CHECK_FALSE(lec);
            CHECK(names_of(all) == std::vector<std::string>{"perm"});
            auto [bec, removed] = co_await reader_ops.break_lock("perm");
            CHECK(bec == error::no_permission);
            CHECK_FALSE(removed.held);
            mutex mr(reading, "read-only");
            auto [aec, rg] = co_await mr.async_try_acquire({}, use_nothrow);
            CHECK(aec == error::no_permission);
        }
        CHECK_FALSE(g1.lost());

        // The release wakes the waiter through the watch.
        {
            const auto rec = co_await g1.release();
            CHECK_FALSE(rec);
        }
        const bool woke = co_await eventually([&] { return waited.has_value(); }, 25000ms);
        REQUIRE(woke);
        REQUIRE_FALSE(*waited);
        REQUIRE(g2);
        CHECK(g2->token() > g1.token());

        // break as the same user: the holder's key deleted (never its lease,
        // which its backend shares with its other locks), the holder told.
        {
            auto [bec, removed] = co_await ops.break_lock("perm");
            REQUIRE_FALSE(bec);
            CHECK(removed.held);
            CHECK(removed.removed.owner == m2.owner_id());
        }
        const bool lost = co_await eventually([&] { return g2->lost(); }, 10000ms);
        CHECK(lost);

        // Outside the granted prefix: refused, nothing held.
        {
            mutex mo(outside, "perm");
            auto [tec, tg] = co_await mo.async_try_acquire({}, use_nothrow);
            CHECK(tec == error::no_permission);
            lock_options brief;
            brief.wait = 2s;
            auto [aec, ag] = co_await mo.async_acquire(brief, use_nothrow);
            CHECK(aec == error::no_permission);
            auto [sec, ost] = co_await outside_ops.status("perm");
            CHECK(sec == error::no_permission);
            auto [lec, olist] = co_await outside_ops.list(every);
            CHECK(lec == error::no_permission);
            auto [bec, oremoved] = co_await outside_ops.break_lock("perm");
            CHECK(bec == error::no_permission);
            CHECK_THAT(outside_ops.last_error().message, Catch::Contains("permission denied"));
        }
        const auto keys = server.post(0, "/v3/kv/range",
                                      "{\"key\":\"" + codec::base64_encode("elsewhere/") +
                                          "\",\"range_end\":\"" +
                                          codec::base64_encode(prefix_end("elsewhere/")) +
                                          "\",\"count_only\":true}",
                                      root);
        REQUIRE(keys.status == 200);
        const auto counted = boost::json::parse(keys.body).as_object();
        CHECK((!counted.contains("count") || counted.at("count") == "0"));  // 0 is left out

        (void)co_await g2->async_release(use_nothrow);
        for (auto* x : {&a, &b, &reading, &outside}) x->stop();
        for (auto* x : {&ops, &reader_ops, &outside_ops}) x->stop();
    }, 90s);
}
