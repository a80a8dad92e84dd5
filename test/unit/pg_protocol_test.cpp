// The PostgreSQL backend's decisions without a server (src/pg/protocol.hpp):
// the URL and its password, the advisory key, and what each answer means.
#include "pg/pg_backend.hpp"
#include "pg/protocol.hpp"

#include <corolock/backend.hpp>
#include <corolock/multi_lock.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <vector>
#include <string>

using namespace corolock::detail::pg;
using corolock::error;
using corolock::error_code;
using namespace std::chrono_literals;

namespace {

answer rows(std::vector<std::vector<std::optional<std::string>>> r) {
    answer a;
    a.rows = std::move(r);
    return a;
}

answer failed(std::string sqlstate) {
    answer a;
    a.sqlstate = std::move(sqlstate);
    a.message = "ERROR";
    return a;
}

}  // namespace

TEST_CASE("pg url: both schemes, the password found for scrubbing", "[pg][url]") {
    url_parts p;
    std::string why;
    REQUIRE_FALSE(split_url("postgres://app:pa%40ss@db:5432/orders", p, why));
    CHECK(p.conninfo == "postgresql://app:pa%40ss@db:5432/orders");
    CHECK(p.secrets == std::vector<std::string>{"pa%40ss", "pa@ss"});
    CHECK(scrub("x pa@ss y pa%40ss", p) == "x *** y ***");
    REQUIRE_FALSE(split_url("POSTGRESQL://db/orders", p, why));
    CHECK(p.secrets.empty());
    CHECK(split_url("redis://db", p, why) == error::invalid_url);
    CHECK(split_url("postgresql://db /x", p, why) == error::invalid_url);
}

TEST_CASE("pg url: the password as libpq reads it is a secret too", "[pg][url]") {
    // libpq's user part runs to the first '@' before any '/': '?' and '#'
    // are the password's (found by fuzz/pg_url_fuzz.cpp), and the query
    // starts after it. The last '@' (the RFC's reading) is kept too.
    url_parts p;
    std::string why;
    REQUIRE_FALSE(split_url("postgresql://u:p?w@h/db?password=z", p, why));
    CHECK(p.secrets == std::vector<std::string>{"p?w", "z"});
    REQUIRE_FALSE(split_url("postgresql://u:pa@ss@h/db", p, why));
    CHECK(p.secrets == std::vector<std::string>{"pa", "pa@ss"});
    CHECK(scrub("pa@ss, then pa", p) == "***, then ***");
}

TEST_CASE("pg url: the query's password and sslpassword are secrets too", "[pg][url]") {
    // libpq reads them from the query (its keys %-decoded): they were
    // echoed in messages before, and passed on in COMMAND's REDIS_URL.
    url_parts p;
    std::string why;
    REQUIRE_FALSE(split_url("postgresql://app@db/orders?sslmode=require&password=s3%63ret&"
                            "ssl%70assword=keypass&application_name=x",
                            p, why));
    CHECK(p.secrets == std::vector<std::string>{"s3%63ret", "s3cret", "keypass"});
    CHECK(scrub("password s3cret, s3%63ret, key keypass; x", p) == "password ***, ***, key ***; x");
    // libpq quotes a malformed value in its message: the password's own.
    for (const char* url : {"postgresql://app@127.0.0.1/db?password=s3cr3tpw&nosuchoption=1",
                            "postgresql://app@127.0.0.1/db?sslpassword=s3cr3tpw&bad%zz=1",
                            "postgresql://app@127.0.0.1/db?password=s3cr3tpw%zz",
                            "postgresql://app@127.0.0.1/db?ssl%70assword=s3cr3tpw%zz"}) {
        INFO(url);
        backend_options o;
        CHECK(parse_url(url, o, why) == error::invalid_url);
        CHECK_FALSE(why.empty());
        CHECK(why.find("s3cr3tpw") == std::string::npos);
    }
}

TEST_CASE("pg url: a malformed URL is refused without echoing its password", "[pg][url]") {
    for (const char* url : {"postgresql://app:s3cr%zzet@127.0.0.1:notaport/db",
                            "postgresql://app:s3cr%zzet@127.0.0.1/db?nosuchoption=1"}) {
        INFO(url);
        backend_options o;
        std::string why;
        CHECK(parse_url(url, o, why) == error::invalid_url);
        CHECK_FALSE(why.empty());
        CHECK(why.find("s3cr") == std::string::npos);
    }
    backend_options o;
    std::string why;
    CHECK_FALSE(parse_url("postgresql://app:secret@127.0.0.1:5432/db?sslmode=disable", o, why));
}

namespace {

// decide_tls with an environment of its own.
tls_decision decide(const tls_settings& url, std::map<std::string, std::string> env = {}) {
    return decide_tls(url, [&env](const char* name) -> const char* {
        const auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    });
}

}  // namespace

TEST_CASE("pg tls: TLS asked for without verification is verified", "[pg][url][tls]") {
    CHECK(decide({.sslmode = "require", .host = "db.example.com"}).sslmode == "verify-full");
    CHECK(decide({.sslmode = "require", .host = "127.0.0.1"}).sslmode == "verify-full");
    CHECK(decide({.requiressl = "1", .host = "db"}).sslmode == "verify-full");
    CHECK(decide({.sslrootcert = "ca.pem", .host = "db"}).sslmode == "verify-full");
    CHECK(decide({.host = "db"}, {{"PGSSLMODE", "require"}}).sslmode == "verify-full");
    CHECK(decide({.host = "db"}, {{"PGREQUIRESSL", "1"}}).sslmode == "verify-full");
    CHECK(decide({.host = "db"}, {{"PGSSLROOTCERT", "ca.pem"}}).sslmode == "verify-full");
    // The URL's own mode comes before the environment's.
    CHECK(decide({.sslmode = "require", .host = "db"}, {{"PGSSLMODE", "disable"}}).sslmode ==
          "verify-full");
    // Verification asked for is kept as asked, without a warning.
    for (const auto* mode : {"verify-ca", "verify-full"}) {
        INFO(mode);
        const auto d = decide({.sslmode = mode, .host = "db.example.com"});
        CHECK(d.sslmode.empty());
        CHECK(d.warning.empty());
    }
    const auto d = decide({.sslmode = "verify-ca", .sslrootcert = "ca.pem", .host = "db"});
    CHECK(d.sslmode.empty());
}

TEST_CASE("pg tls: a connection that may be unencrypted beyond this machine is warned of",
          "[pg][url][tls]") {
    // libpq's default (prefer), allow and disable are kept.
    for (const auto* mode : {"", "prefer", "allow", "disable"}) {
        INFO("sslmode '" << mode << "'");
        const auto far = decide({.sslmode = mode, .host = "db.example.com"});
        CHECK(far.sslmode.empty());
        CHECK(far.warning.find("db.example.com") != std::string::npos);
        CHECK(far.warning.find("sslmode=verify-full") != std::string::npos);
        CHECK(far.warning.find(std::string("sslmode=") + (*mode ? mode : "prefer")) !=
              std::string::npos);
        for (const auto* local : {"", "/var/run/postgresql", "localhost", "127.0.0.1",
                                  "127.8.9.10", "::1", "@abstract"}) {
            INFO("host '" << local << "'");
            const auto near = decide({.sslmode = mode, .host = local});
            CHECK(near.sslmode.empty());
            CHECK(near.warning.empty());
        }
    }
    CHECK(decide({.sslmode = "disable", .host = "10.0.0.5"}).warning.find("is not encrypted") !=
          std::string::npos);
    // Any host of a list; hostaddr is where libpq connects.
    CHECK_FALSE(decide({.host = "127.0.0.1,db2.example.com"}).warning.empty());
    CHECK(decide({.host = "127.0.0.1,db2.example.com"}).warning.find("db2.example.com") !=
          std::string::npos);
    CHECK_FALSE(decide({.host = "localhost", .hostaddr = "192.0.2.7"}).warning.empty());
    CHECK(decide({.host = "db.example.com", .hostaddr = "127.0.0.1"}).warning.empty());
    // The environment's host where the URL has none.
    CHECK_FALSE(decide({}, {{"PGHOST", "db.example.com"}}).warning.empty());
    CHECK(decide({}, {{"PGHOST", "/tmp"}}).warning.empty());
    CHECK_FALSE(decide({}, {{"PGSSLMODE", "disable"}, {"PGHOSTADDR", "10.1.2.3"}}).warning.empty());
    // Not this machine: a name, another loopback spelling, 128.x.
    CHECK_FALSE(is_local_host("db"));
    CHECK_FALSE(is_local_host("128.0.0.1"));
    CHECK_FALSE(is_local_host("0.0.0.0"));
    CHECK(is_local_host("LOCALHOST"));
}

TEST_CASE("pg tls: the URL's keywords reach the decision", "[pg][url][tls]") {
    backend_options o;
    std::string why;
    REQUIRE_FALSE(parse_url("postgresql://app@db.example.com/orders?sslmode=require", o, why));
    CHECK(o.url->sslmode == "verify-full");
    CHECK(o.url->tls_warning.empty());
    REQUIRE_FALSE(parse_url("postgres://app@[2001:db8::1]:5433/orders?sslmode=disable", o, why));
    CHECK(o.url->sslmode.empty());
    CHECK(o.url->tls_warning.find("2001:db8::1") != std::string::npos);
    REQUIRE_FALSE(parse_url("postgresql://app@127.0.0.1:5432,[::1]:5433/orders?sslmode=prefer", o, why));
    CHECK(o.url->tls_warning.empty());
    REQUIRE_FALSE(parse_url("postgresql:///orders?host=db.example.com&sslmode=allow", o, why));
    CHECK_FALSE(o.url->tls_warning.empty());
}

TEST_CASE("pg key: one per name, stable, split as pg_locks shows it", "[pg][key]") {
    CHECK(advisory_key("orders:42") == advisory_key("orders:42"));
    std::set<std::int64_t> keys;
    for (int i = 0; i < 10'000; ++i) keys.insert(advisory_key("n" + std::to_string(i)));
    CHECK(keys.size() == 10'000);
    const std::int64_t k = advisory_key("x");
    const auto joined = (static_cast<std::uint64_t>(key_classid(k)) << 32) | key_objid(k);
    CHECK(joined == static_cast<std::uint64_t>(k));
    // FNV-1a 64 of "corolock:x": fixed, so that every process agrees.
    CHECK(static_cast<std::uint64_t>(k) == 0xdccbff72cdfbd7cdULL);
}

TEST_CASE("pg multi_lock: two names of one advisory key are refused, naming both",
          "[pg][key][multi]") {
    // Two names FNV-1a 64 maps to one key, found by a distinguished-point
    // (Pollard rho) search over 16-hex-digit names; 2^32 names apart on
    // average, but a multi_lock over both would wait for itself.
    const std::string a = "69cfdc66573f4f48";
    const std::string b = "1d116c69faf702ef";
    REQUIRE(advisory_key(a) == advisory_key(b));
    boost::asio::io_context ioc;  // never run: no server is asked
    corolock::backend be(ioc.get_executor(), "postgresql://127.0.0.1:1/none");
    try {
        corolock::multi_lock both(be, {a, "other", b});
        FAIL("a multi_lock over two names of one key was accepted");
    } catch (const boost::system::system_error& e) {
        CHECK(e.code() == error::invalid_argument);
        CHECK_THAT(e.what(), Catch::Contains(a) && Catch::Contains(b) &&
                                 Catch::Contains("advisory key"));
    }
    corolock::multi_lock fine(be, {a, "other"});
    CHECK(fine.names().size() == 2);
    be.stop();
}

TEST_CASE("pg timeouts are whole milliseconds, rounded up, at least one", "[pg]") {
    CHECK(timeout_ms(1500us) == "2");
    CHECK(timeout_ms(0ms) == "1");
    CHECK(timeout_ms(30s) == "30000");
}

TEST_CASE("pg acquire answers", "[pg][acquire]") {
    using kind = acquire_outcome::kind;
    CHECK(decide_acquire(rows({{"t", "7", "30s", "corolock:x"}})).what == kind::granted);
    CHECK(decide_acquire(rows({{"t", "7", "30s"}})).fence == 7);
    CHECK(decide_acquire(rows({{"f", std::nullopt, "0", "corolock:x"}})).what == kind::refused);
    CHECK(decide_acquire(failed("55P03")).what == kind::timed_out);
    CHECK(decide_acquire(failed("57014")).what == kind::cancelled);
    // A grant without a fence is no grant: the session must be closed.
    const auto no_fence = decide_acquire(rows({{"t", std::nullopt, "30s"}}));
    CHECK(no_fence.what == kind::failed);
    CHECK(no_fence.error == error::unexpected_reply);
    CHECK(decide_acquire(rows({})).what == kind::failed);
    CHECK(decide_acquire(failed("42501")).error == error::no_permission);  // a grant missing
    CHECK(decide_acquire(failed("42P01")).error == error::server_error);
    CHECK(decide_acquire(failed("57P01")).error == error::connection_lost);
    answer lost;
    lost.transport = error::connection_lost;
    CHECK(decide_acquire(lost).error == error::connection_lost);
}

TEST_CASE("pg re-entry and release answers", "[pg][release]") {
    CHECK(decide_reenter(rows({{"12"}})) == std::optional<std::uint64_t>(12));
    CHECK_FALSE(decide_reenter(rows({})));  // the row is gone
    CHECK_FALSE(decide_reenter(failed("57P01")));

    CHECK_FALSE(decide_release(rows({{"t", "0"}}), false));
    CHECK(decide_release(rows({{"t", "0"}}), true) == error::expired);
    CHECK(decide_release(rows({{"f", "0"}}), false) == error::expired);
    answer lost;
    lost.transport = error::connection_lost;
    CHECK(decide_release(lost, false) == error::connection_lost);

    CHECK(decide_lost_release(rows({})) == error::expired);
    CHECK(decide_lost_release(rows({{"corolock:abc"}})) == error::not_owner);
}

TEST_CASE("pg statements carry their parameters in order", "[pg]") {
    const auto t = try_acquire("n", 1500ms, "1 host label", "owner");
    REQUIRE(t.params.size() == 5);
    CHECK(t.params[0] == "n");
    CHECK(t.params[1] == std::to_string(advisory_key("n")));
    CHECK(t.params[3] == "1500");
    CHECK(t.params[4] == "corolock:owner");
    CHECK(wait_setup(std::nullopt, "o").params[0] == "0");  // no lock_timeout: wait until cancelled
    CHECK(wait_setup(250ms, "o").params[0] == "250");
    CHECK(ddl_ok("42P07"));
    CHECK(ddl_ok("23505"));
    CHECK(ddl_ok("42710"));
    CHECK_FALSE(ddl_ok("42501"));
    // A role without CREATE on the schema: the table made beforehand will do.
    CHECK(decide_table_exists(rows({{"t"}})));
    CHECK_FALSE(decide_table_exists(rows({{"f"}})));
    CHECK_FALSE(decide_table_exists(failed("42501")));
}

TEST_CASE("pg locked sql: transaction control and COPY are refused before sending", "[pg][sql]") {
    const std::vector<std::optional<std::string>> none;
    for (const char* sql : {"COMMIT", "commit;", " \n\tEND", "ROLLBACK", "abort", "BEGIN",
                            "start transaction", "PREPARE TRANSACTION 'x'", "COPY t FROM STDIN",
                            "-- note\nCOMMIT", "/* a /* nested */ comment */ rollback"})
        CHECK_FALSE(refuse_statement(sql, none).empty());
    for (const char* sql : {"UPDATE t SET a = 1", "SELECT 'commit'", "INSERT INTO ending VALUES (1)",
                            "WITH x AS (SELECT 1) SELECT * FROM x", "-- COMMIT\nSELECT 1",
                            "/* rollback */ SELECT 1", "committed_rows()"})
        CHECK(refuse_statement(sql, none).empty());
    CHECK_FALSE(refuse_statement(std::string("SELECT $1\0", 10), none).empty());
    CHECK_FALSE(refuse_statement("SELECT $1", {std::string("a\0b", 3)}).empty());
    CHECK(refuse_statement("SELECT $1", {std::nullopt}).empty());
}

TEST_CASE("pg locked sql: the check holds only for an answered true", "[pg][sql]") {
    CHECK(decide_locked_check(rows({{"t", "", ""}})));
    CHECK_FALSE(decide_locked_check(rows({{"f", "", ""}})));
    CHECK_FALSE(decide_locked_check(rows({})));  // no fence row
    CHECK_FALSE(decide_locked_check(failed("40001")));
    const auto s = locked_check("n", 7, 1500ms);
    REQUIRE(s.params.size() == 5);
    CHECK(s.params[3] == "7");
    CHECK(s.params[4] == "1500");
}
