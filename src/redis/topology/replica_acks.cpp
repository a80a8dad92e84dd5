#include "redis/topology/replica_acks.hpp"

#include "redis/lock/scripts.hpp"

#include <corolock/command.hpp>

#include <boost/asio/post.hpp>

#include <algorithm>

namespace corolock::detail {

namespace asio = boost::asio;

error_code judge_replica_ack(const replica_ack_facts& f, std::string& why) {
    why.clear();
    if (f.script_ec == error::client_stopped || f.wait_ec == error::client_stopped) {
        why = "the client stopped";
        return error::client_stopped;
    }
    if (f.script_ec == error::no_permission || f.wait_ec == error::no_permission) {
        // A user without +wait (or the script's commands): a setting to fix,
        // not replicas that were slow.
        why = "the server refused the confirmation (NOPERM)";
        return error::no_permission;
    }
    if (f.script_ec) {
        why = "the confirming write failed: " + f.script_ec.message();
        return error::replicas_missing;
    }
    if (!f.status_valid) {
        why = "the confirming write got an unexpected reply";
        return error::replicas_missing;
    }
    switch (static_cast<confirm_status>(f.status)) {
    case confirm_status::confirmed: break;
    case confirm_status::not_owner:
        why = "the side connection's server has another owner in the lock";
        return error::lock_lost;
    case confirm_status::level_gone:
        why = "the side connection's server does not have the granted level";
        return error::lock_lost;
    default:
        why = "the side connection's server does not have the lock";
        return error::lock_lost;
    }
    if (f.wait_ec) {
        why = "WAIT failed: " + f.wait_ec.message();
        return error::replicas_missing;
    }
    if (f.script_connection != f.wait_connection) {
        // WAIT counts the calling connection's own last write: on a new
        // connection that wrote nothing, its count proves nothing.
        why = "the side connection was re-established between the write and WAIT";
        return error::replicas_missing;
    }
    if (f.acked < f.wanted) {
        why = std::to_string(std::max<std::int64_t>(f.acked, 0)) + " of " +
              std::to_string(f.wanted) + " replicas acknowledged in time";
        return error::replicas_missing;
    }
    return {};
}

// One confirmation's facts, filled on the side client's strand (its direct
// handlers), judged on the main one.
struct replica_acks::confirmation {
    replica_ack_facts facts;
    std::shared_ptr<side> where;
    done_handler done;
};

std::shared_ptr<replica_acks::side> replica_acks::pick() {
    for (auto& s : sides_)
        if (s->busy == 0) return s;
    if (sides_.size() < max_connections) {
        auto cfg = main_.cfg();
        // Its reconnects are not the user's connection's.
        cfg.observer = nullptr;
        auto s = std::make_shared<side>();
        s->client = std::make_shared<client_impl>(main_.get_executor(), std::move(cfg));
        s->client->start();
        sides_.push_back(s);
        return s;
    }
    return *std::min_element(sides_.begin(), sides_.end(),
                             [](const auto& a, const auto& b) { return a->busy < b->busy; });
}

void replica_acks::confirm(std::string_view key, std::string_view owner, std::uint64_t level,
                           int replicas, clock::duration timeout, done_handler done) {
    auto c = std::make_shared<confirmation>();
    c->facts.wanted = replicas;
    c->done = std::move(done);
    if (stopped_) {
        asio::post(main_.strand(), [c] {
            c->facts.script_ec = error::client_stopped;
            std::string why;
            c->done(judge_replica_ack(c->facts, why), why);
        });
        return;
    }
    c->where = pick();
    ++c->where->busy;
    client_impl* side_client = c->where->client.get();

    // EVAL, never EVALSHA: a NOSCRIPT fallback would go out behind the WAIT.
    const command write{"EVAL", confirm_script().source, 1, key, owner,
                        static_cast<std::int64_t>(level)};
    const auto ms = std::max<std::int64_t>(
        1, std::chrono::ceil<std::chrono::milliseconds>(timeout).count());
    const command wait{"WAIT", replicas, ms};

    // Neither is idempotent: after a lost connection neither is sent again.
    client_impl::exec_options wo;
    wo.direct = true;  // on the side client's strand, at the reply
    side_client->exec(write.payload(), wo,
                      exec_handler([c, side_client](error_code ec, reply r) {
                          c->facts.script_ec = ec;
                          c->facts.status_valid = !ec && r.type == resp3_type::integer;
                          c->facts.status = c->facts.status_valid ? r.integer : 0;
                          c->facts.script_connection = side_client->stats().connects;
                      }));
    client_impl::exec_options ww;
    ww.direct = true;
    // The server answers WAIT after `timeout`; the command's own timeout
    // only guards against a server that does not answer at all.
    ww.timeout = timeout + main_.cfg().command_timeout;
    auto main_strand = main_.strand();
    side_client->exec(wait.payload(), ww,
                      exec_handler([c, side_client, main_strand](error_code ec, reply r) {
                          c->facts.wait_ec = ec;
                          if (!ec && r.type == resp3_type::integer) c->facts.acked = r.integer;
                          c->facts.wait_connection = side_client->stats().connects;
                          asio::post(main_strand, [c] {
                              --c->where->busy;
                              std::string why;
                              const auto result = judge_replica_ack(c->facts, why);
                              c->done(result, why);
                          });
                      }));
}

void replica_acks::stop() noexcept {
    stopped_ = true;
    for (auto& s : sides_) s->client->stop();
}

void replica_acks::abandon() noexcept {
    stopped_ = true;
    for (auto& s : sides_) s->client->abandon();
    sides_.clear();
}

}  // namespace corolock::detail
