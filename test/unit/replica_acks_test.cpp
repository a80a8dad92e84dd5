// Replica acknowledgement's decisions (src/redis/topology/replica_acks.hpp) and the
// option's default, on made-up replies: no server, no socket.
#include "redis/topology/replica_acks.hpp"
#include "redis/lock/scripts.hpp"

#include <corolock/lock_options.hpp>

#include <boost/asio/error.hpp>

#include <catch2/catch.hpp>

using corolock::error;
using corolock::error_code;
using corolock::lock_options;
using corolock::detail::confirm_status;
using corolock::detail::judge_replica_ack;
using corolock::detail::replica_ack_facts;
using namespace std::chrono_literals;

namespace {
// Two replicas wanted, the write confirmed and WAIT answered on connection 3.
replica_ack_facts confirmed(std::int64_t acked) {
    replica_ack_facts f;
    f.wanted = 2;
    f.status = static_cast<int>(confirm_status::confirmed);
    f.status_valid = true;
    f.script_connection = 3;
    f.acked = acked;
    f.wait_connection = 3;
    return f;
}
}  // namespace

TEST_CASE("replica acks: enough acknowledgements confirm", "[replicas]") {
    std::string why;
    CHECK(!judge_replica_ack(confirmed(2), why));
    CHECK(!judge_replica_ack(confirmed(3), why));
    CHECK(why.empty());
}

TEST_CASE("replica acks: too few acknowledgements are replicas_missing", "[replicas]") {
    std::string why;
    CHECK(judge_replica_ack(confirmed(1), why) == error::replicas_missing);
    CHECK(why == "1 of 2 replicas acknowledged in time");
    CHECK(judge_replica_ack(confirmed(0), why) == error::replicas_missing);
}

TEST_CASE("replica acks: a WAIT on a connection that did not write proves nothing",
          "[replicas]") {
    // The write went out on connection 3, the WAIT on connection 4 (a
    // reconnect in between): WAIT's count there says nothing of the write.
    auto f = confirmed(2);
    f.wait_connection = 4;
    std::string why;
    CHECK(judge_replica_ack(f, why) == error::replicas_missing);
    CHECK(why.find("re-established") != std::string::npos);
}

TEST_CASE("replica acks: a write that finds the lock not this level's is lock_lost",
          "[replicas]") {
    for (auto st : {confirm_status::expired, confirm_status::not_owner, confirm_status::level_gone}) {
        auto f = confirmed(2);
        f.status = static_cast<int>(st);
        std::string why;
        CHECK(judge_replica_ack(f, why) == error::lock_lost);  // however many replicas acked
        CHECK(!why.empty());
    }
}

TEST_CASE("replica acks: failures of the write or of WAIT are never a confirmation",
          "[replicas]") {
    std::string why;
    auto f = confirmed(2);
    f.script_ec = error::connection_lost;
    CHECK(judge_replica_ack(f, why) == error::replicas_missing);
    f = confirmed(2);
    f.status_valid = false;
    CHECK(judge_replica_ack(f, why) == error::replicas_missing);
    f = confirmed(2);
    f.wait_ec = error::timeout;
    CHECK(judge_replica_ack(f, why) == error::replicas_missing);
    f = confirmed(2);
    f.wait_ec = error::no_permission;  // a user without +wait
    CHECK(judge_replica_ack(f, why) == error::no_permission);
    f = confirmed(2);
    f.wait_ec = error::client_stopped;
    CHECK(judge_replica_ack(f, why) == error::client_stopped);
}

TEST_CASE("replica acks: the timeout's default is 1 s, at most a quarter of the lease",
          "[replicas]") {
    lock_options o;
    CHECK(o.replicas == 0);
    CHECK(o.replicas_timeout_or_default() == 1s);
    o.lease = 2s;
    CHECK(o.replicas_timeout_or_default() == 500ms);
    o.replicas_timeout = 50ms;
    CHECK(o.replicas_timeout_or_default() == 50ms);
}
