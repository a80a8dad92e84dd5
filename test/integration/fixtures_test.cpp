// Self-test of the test fixtures (redis_server, child_process), so a failure
// in an integration test can be trusted to be about the library, not about
// how its server or worker processes were run. Uses nothing from the library.
#include "support/child_process.hpp"
#include "support/redis_server.hpp"

#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>

using namespace std::chrono_literals;
using corolock::test::child_process;
using corolock::test::redis_server;
using corolock::test::redis_server_options;

namespace {

using clock_type = std::chrono::steady_clock;

// Bounded wait until a child has printed `text`.
bool wait_for_output(const child_process& p, const std::string& text,
                     std::chrono::milliseconds limit) {
    const auto deadline = clock_type::now() + limit;
    while (clock_type::now() < deadline) {
        if (p.output().find(text) != std::string::npos) return true;
        std::this_thread::sleep_for(2ms);
    }
    return false;
}

}  // namespace

TEST_CASE("fixtures: a server answers commands on its admin connection",
          "[fixtures][integration]") {
    const auto started = clock_type::now();
    redis_server server;
    const auto took = clock_type::now() - started;
    INFO("start took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
    CHECK(server.running());
    CHECK(server.pid() > 0);
    CHECK(server.port() > 0);
    CHECK(server.tls_port() == 0);
    CHECK(server.url() == "redis://127.0.0.1:" + std::to_string(server.port()));
    CHECK(server.ca_file().empty());

    CHECK(server.cmd1({"PING"}) == "PONG");
    CHECK(server.cmd1({"SET", "k", "v"}) == "OK");
    CHECK(server.cmd1({"GET", "k"}) == "v");
    CHECK(server.cmd1({"GET", "missing"}).empty());
    CHECK(server.cmd1({"EXISTS", "k"}) == "1");
    CHECK(server.cmd1({"EXISTS", "missing"}) == "0");
    // Binary-safe both ways.
    const std::string binary("a\0b\r\nc", 6);
    server.cmd({"SET", "bin", binary});
    CHECK(server.cmd1({"GET", "bin"}) == binary);
    // Arrays come back flattened, in order; nested arrays too.
    server.cmd({"RPUSH", "list", "x", "y", "z"});
    CHECK(server.cmd({"LRANGE", "list", "0", "-1"}) == std::vector<std::string>{"x", "y", "z"});
    CHECK(server.cmd({"PUBSUB", "NUMSUB", "chan"}) == std::vector<std::string>{"chan", "0"});
    CHECK(server.cmd({"BLPOP", "nothing", "0.01"}).empty());  // a nil array adds nothing
    // A bulk reply comes back whole.
    server.cmd({"PING"});
    const std::string stats = server.cmd1({"INFO", "commandstats"});
    CHECK(stats.find("cmdstat_ping:calls=") != std::string::npos);
    CHECK(stats.find("cmdstat_set:calls=") != std::string::npos);
    // The server's settings are the ones the tests rely on.
    CHECK(server.cmd({"CONFIG", "GET", "save"}) == std::vector<std::string>{"save", ""});
    CHECK(server.cmd({"CONFIG", "GET", "appendonly"}) == std::vector<std::string>{"appendonly", "no"});
    CHECK(server.cmd({"CONFIG", "GET", "bind"}).back() == "127.0.0.1");

    // An error reply throws with the server's message, and the connection
    // stays usable.
    CHECK_THROWS_AS(server.cmd({"NOSUCHCOMMAND"}), corolock::test::redis_reply_error);
    CHECK_THROWS_WITH(server.cmd({"HGET", "k", "f"}), Catch::Contains("WRONGTYPE"));
    CHECK(server.cmd1({"PING"}) == "PONG");

    // CLIENT KILL spares the admin connection; only it is left afterwards.
    server.cmd({"CLIENT", "KILL", "TYPE", "normal"});
    const std::string list = server.cmd1({"CLIENT", "LIST"});
    CHECK(list.find("id=") == list.rfind("id="));
}

TEST_CASE("fixtures: two servers run side by side and clean up after themselves",
          "[fixtures][integration]") {
    std::string dir;
    {
        redis_server a, b;
        CHECK(a.port() != b.port());
        a.cmd({"SET", "where", "a"});
        CHECK(b.cmd1({"GET", "where"}).empty());
        dir = a.dir();
        CHECK(std::filesystem::is_directory(dir));
        CHECK(std::filesystem::exists(dir + "/redis.log"));
    }
    CHECK_FALSE(std::filesystem::exists(dir));
}

TEST_CASE("fixtures: a paused server stops answering and a bounded command times out",
          "[fixtures][integration]") {
    redis_server server;
    server.set_admin_timeout(300ms);
    const auto pid = server.pid();
    server.pause();
    const auto start = clock_type::now();
    CHECK_THROWS_WITH(server.cmd({"PING"}), Catch::Contains("timed out"));
    const auto took = clock_type::now() - start;
    CHECK(took >= 250ms);
    CHECK(took < 2s);
    CHECK(server.running());  // stopped is not dead
    server.resume();
    CHECK(server.cmd1({"PING"}) == "PONG");
    CHECK(server.pid() == pid);
}

TEST_CASE("fixtures: kill9 and restart bring the server back on the same port",
          "[fixtures][integration]") {
    redis_server server;
    const auto port = server.port();
    const auto old_pid = server.pid();
    server.cmd({"SET", "k", "v"});
    server.kill9();
    CHECK_FALSE(server.running());
    CHECK(server.pid() == -1);
    CHECK_THROWS_AS(server.cmd({"PING"}), std::runtime_error);
    server.restart();
    CHECK(server.running());
    CHECK(server.port() == port);
    CHECK(server.pid() != old_pid);
    CHECK(server.cmd1({"PING"}) == "PONG");
    CHECK(server.cmd1({"GET", "k"}).empty());  // nothing persisted

    // Restart of a running (and even a paused) server stops it first.
    server.pause();
    server.restart();
    CHECK(server.cmd1({"PING"}) == "PONG");
    // And a graceful stop.
    server.stop();
    CHECK_FALSE(server.running());
    server.restart();
    CHECK(server.cmd1({"PING"}) == "PONG");
}

TEST_CASE("fixtures: a TLS server with its CA and an unrelated CA",
          "[fixtures][integration][tls]") {
    redis_server_options opts;
    opts.tls = true;
    redis_server server(opts);
    CHECK(server.tls_port() > 0);
    CHECK(server.tls_port() != server.port());
    CHECK(server.url() == "rediss://127.0.0.1:" + std::to_string(server.tls_port()));
    CHECK(std::filesystem::exists(server.ca_file()));
    CHECK(std::filesystem::exists(server.wrong_ca_file()));
    CHECK(server.ca_file() != server.wrong_ca_file());
    // The admin connection stays on plain TCP.
    CHECK(server.cmd1({"PING"}) == "PONG");
    CHECK(server.cmd({"CONFIG", "GET", "tls-port"}).back() == std::to_string(server.tls_port()));

    // Checked with openssl's own client, independent of the library: the
    // certificate verifies for 127.0.0.1 against ca_file() only.
    const std::string openssl = corolock::test::find_executable("openssl");
    REQUIRE_FALSE(openssl.empty());
    auto handshake = [&](const std::string& ca) {
        child_process p({openssl, "s_client", "-connect",
                         "127.0.0.1:" + std::to_string(server.tls_port()), "-CAfile", ca,
                         "-verify_ip", "127.0.0.1", "-verify_return_error", "-brief"});
        const auto st = p.wait_for(10s);
        INFO(p.output());
        REQUIRE(st);
        return child_process::exit_code(*st);
    };
    CHECK(handshake(server.ca_file()) == 0);
    CHECK(handshake(server.wrong_ca_file()) != 0);

    // TLS servers survive kill9 + restart too.
    server.kill9();
    server.restart();
    CHECK(server.cmd1({"PING"}) == "PONG");
    CHECK(handshake(server.ca_file()) == 0);
}

TEST_CASE("fixtures: password and ACL user servers", "[fixtures][integration]") {
    SECTION("requirepass: the admin connection authenticates as default") {
        redis_server_options opts;
        opts.password = "right-password";
        redis_server server(opts);
        CHECK(server.url() == "redis://127.0.0.1:" + std::to_string(server.port()));
        CHECK(server.cmd1({"ACL", "WHOAMI"}) == "default");
        CHECK(server.cmd({"CONFIG", "GET", "requirepass"}).back() == "right-password");
        server.kill9();
        server.restart();
        CHECK(server.cmd1({"PING"}) == "PONG");
    }
    SECTION("an ACL user") {
        redis_server_options opts;
        opts.acl_user = "locker";
        opts.acl_password = "s3cret";
        redis_server server(opts);
        CHECK(server.cmd1({"ACL", "WHOAMI"}) == "locker");
        const auto users = server.cmd({"ACL", "USERS"});
        CHECK(std::find(users.begin(), users.end(), "locker") != users.end());
        CHECK(server.cmd1({"SET", "k", "v"}) == "OK");  // +@all ~*
    }
    SECTION("both, and extra arguments") {
        redis_server_options opts;
        opts.password = "pw";
        opts.acl_user = "locker";
        opts.acl_password = "s3cret";
        opts.extra_args = {"--databases", "4"};
        redis_server server(opts);
        CHECK(server.cmd1({"ACL", "WHOAMI"}) == "default");
        CHECK(server.cmd({"CONFIG", "GET", "databases"}).back() == "4");
    }
}

TEST_CASE("fixtures: a server that cannot start reports why", "[fixtures][integration]") {
    redis_server_options opts;
    opts.extra_args = {"--no-such-directive", "1"};
    opts.start_timeout = 5s;
    try {
        redis_server server(opts);
        FAIL("the server started");
    } catch (const std::runtime_error& e) {
        CHECK_THAT(e.what(), Catch::Contains("no-such-directive"));
    }
}

TEST_CASE("fixtures: child_process captures output and exit status", "[fixtures][integration]") {
    SECTION("exit status and merged stdout/stderr") {
        child_process p({"/bin/sh", "-c", "echo hi; exit 3"});
        CHECK(p.pid() > 0);
        const auto st = p.wait_for(5s);
        REQUIRE(st);
        CHECK(WIFEXITED(*st));
        CHECK(WEXITSTATUS(*st) == 3);
        CHECK(child_process::exit_code(*st) == 3);
        CHECK_FALSE(p.running());
        CHECK(p.status() == st);
        CHECK(p.wait_for(0ms) == st);  // asking again gives the same answer
        CHECK_FALSE(p.signal(SIGTERM));  // reaped: never signalled again
        CHECK(wait_for_output(p, "hi\n", 2s));
        CHECK(p.output() == "hi\n");

        child_process both({"/bin/sh", "-c", "echo out; echo err >&2"});
        REQUIRE(both.wait_for(5s));
        CHECK(wait_for_output(both, "err\n", 2s));
        CHECK(both.output() == "out\nerr\n");
    }
    SECTION("killed by SIGTERM") {
        child_process p({"/bin/sh", "-c", "echo ready; exec sleep 30"});
        REQUIRE(wait_for_output(p, "ready", 5s));
        CHECK(p.running());
        CHECK_FALSE(p.wait_for(50ms));  // still running: the wait times out
        CHECK(p.signal(SIGTERM));
        const auto st = p.wait_for(5s);
        REQUIRE(st);
        CHECK(WIFSIGNALED(*st));
        CHECK(WTERMSIG(*st) == SIGTERM);
        CHECK(child_process::exit_code(*st) == 128 + SIGTERM);
    }
    SECTION("kill9") {
        child_process p({"/bin/sh", "-c", "exec sleep 30"});
        const auto st = p.kill9();
        REQUIRE(st);
        CHECK(WIFSIGNALED(*st));
        CHECK(WTERMSIG(*st) == SIGKILL);
    }
    SECTION("environment additions, and a bare name found on PATH") {
        child_process p({"sh", "-c", "echo \"$COROLOCK_FIXTURE_VAR\""},
                        {{"COROLOCK_FIXTURE_VAR", "value 1"}});
        REQUIRE(p.wait_for(5s));
        CHECK(wait_for_output(p, "\n", 2s));
        CHECK(p.output() == "value 1\n");
    }
    SECTION("the destructor kills a running child, quickly") {
        const auto start = clock_type::now();
        {
            child_process p({"/bin/sh", "-c", "exec sleep 30"});
            CHECK(p.running());
        }
        CHECK(clock_type::now() - start < 3s);
    }
    SECTION("a grandchild holding the pipe open does not hang the destructor") {
        const auto start = clock_type::now();
        {
            child_process p({"/bin/sh", "-c", "sleep 2 & echo started"});
            CHECK(wait_for_output(p, "started", 5s));
            REQUIRE(p.wait_for(5s));
        }
        CHECK(clock_type::now() - start < 1800ms);
    }
    SECTION("a program that cannot run throws") {
        CHECK_THROWS_AS(child_process({"/nonexistent/program"}), std::runtime_error);
        CHECK_THROWS_AS(child_process({"corolock-no-such-program-on-path"}), std::runtime_error);
        CHECK_THROWS_AS(child_process(std::vector<std::string>{}), std::invalid_argument);
    }
}
