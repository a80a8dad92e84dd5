// The client's Sentinel topology (topology::sentinel): the connect step that
// asks the Sentinels for the primary, and the +switch-master subscription
// that follows its failovers. The decisions are sentinel.hpp's (sans-I/O);
// docs/topologies.md, "Redis Sentinel", describes the behaviour.
#include "redis/connection/client_impl.hpp"
#include "redis/topology/sentinel.hpp"
#include "core/logging.hpp"

#include <corolock/command.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <chrono>

namespace corolock::detail {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

// (The executor traits are settled in core/inner_executor.hpp.)

namespace {

std::string in_ms(std::chrono::steady_clock::duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) +
           " ms";
}

}  // namespace

client_impl::awaitable<std::pair<error_code, sentinel::master_addr>> client_impl::ask_sentinel(
    sentinel_link& link, const endpoint& s, std::string& why) {
    if (auto ec = co_await link.open(s, why); ec)
        co_return std::pair{ec, sentinel::master_addr{}};
    // Commands as named locals: g++ 12 mishandles temporaries in co_await.
    const command ask{"SENTINEL", "get-master-addr-by-name", cfg_.service_name};
    auto [ec, r] = co_await link.call(ask);
    if (ec) {
        why = describe_cause(ec);
        co_return std::pair{ec, sentinel::master_addr{}};
    }
    co_return std::pair{error_code{}, sentinel::parse_master_addr(r)};
}

client_impl::awaitable<error_code> client_impl::connect_via_sentinels() {
    sentinel::discovery_report report;
    bool tls_refused = false;  // a primary named failed its TLS handshake
    // How many Sentinels refused the connection (nothing listening): when
    // all did, config::fail_fast_when_refused applies as for one server.
    std::size_t refused = 0;
    sentinel_link link(executor_, ssl_ctx_ ? &*ssl_ctx_ : nullptr, cfg_);
    for (const auto& s : cfg_.nodes) {
        if (stopped()) co_return error::client_stopped;
        // Each Sentinel gets connect_timeout to answer.
        asio::steady_timer deadline(executor_);
        deadline.expires_after(cfg_.connect_timeout);
        std::string why;
        auto asked = co_await (ask_sentinel(link, s, why) || deadline.async_wait(use_nothrow));
        link.close();
        if (stopped()) co_return error::client_stopped;
        if (asked.index() == 1) {
            report.sentinel_failed(s, "no answer within " + in_ms(cfg_.connect_timeout));
            continue;
        }
        auto& [ec, addr] = std::get<0>(asked);
        if (ec) {
            if (ec == asio::error::connection_refused) ++refused;
            report.sentinel_failed(s, why.empty() ? describe_cause(ec) : why);
            continue;
        }
        if (addr.result != sentinel::master_addr::status::ok) {
            if (addr.result == sentinel::master_addr::status::unknown_service)
                report.note_unknown();
            report.sentinel_failed(s, addr.why);
            continue;
        }
        logger_->debug("sentinel {} names {} as the primary of {}", escaped{sentinel::to_string(s)},
                       escaped{sentinel::to_string(addr.ep)}, escaped{cfg_.service_name});
        const error_code cec = co_await connect_to(addr.ep);
        if (!cec) co_return cec;
        close_socket();
        if (stopped()) co_return error::client_stopped;
        // Wrong credentials, a database the server lacks: another Sentinel's
        // answer will not fix them.
        if (cec == error::auth_failed || cec == error::no_permission ||
            cec == error::server_too_old ||
            (cec == error::handshake_failed && last_connect_permanent_))
            co_return cec;
        // A certificate that does not verify may be this Sentinel's doing
        // (it named a server that is not the one tls.server_name pins): the
        // next one is asked, and the failure is permanent only when none
        // yields a primary.
        if (cec == error::tls_handshake_failed) tls_refused = true;
        report.primary_failed(addr.ep, last_connect_diagnostic_.empty() ? describe_cause(cec)
                                                                         : last_connect_diagnostic_);
    }
    server_ = endpoint{};
    last_connect_diagnostic_ = report.text();
    last_connect_refused_ = !cfg_.nodes.empty() && refused == cfg_.nodes.size();
    if (tls_refused) co_return error::tls_handshake_failed;
    // Every Sentinel answered and none knows the name: a configuration
    // error, reported at once to commands (the attempts go on).
    last_connect_permanent_ = report.all_unknown(cfg_.nodes.size());
    co_return error::no_primary;
}

client_impl::awaitable<error_code> client_impl::subscribe_switch_master(const endpoint& s,
                                                                         std::string& why) {
    if (auto ec = co_await watch_link_->open(s, why); ec) co_return ec;
    const command subscribe{"SUBSCRIBE", "+switch-master"};
    if (auto ec = co_await watch_link_->send(subscribe); ec) {
        why = describe_cause(ec);
        co_return ec;
    }
    // The confirmation push; anything else first is not a Sentinel's way.
    auto [ec, r] = co_await watch_link_->read();
    if (ec) {
        why = describe_cause(ec);
        co_return ec;
    }
    if (r.type != resp3_type::push || r.elements.empty() || r.elements[0].str != "subscribe") {
        why = "SUBSCRIBE: unexpected reply " + to_string(r);
        co_return error::unexpected_reply;
    }
    // A switch announced while no subscription listened: the answer now
    // (RESP3 takes commands on a subscribed connection) tells.
    const command ask{"SENTINEL", "get-master-addr-by-name", cfg_.service_name};
    auto [aec, addr] = co_await watch_link_->call(ask);
    if (aec) {
        why = describe_cause(aec);
        co_return aec;
    }
    const auto named = sentinel::parse_master_addr(addr);
    if (named.result == sentinel::master_addr::status::ok && connected() && !(named.ep == server_))
        rediscover("sentinel " + sentinel::to_string(s) + " names " +
                   sentinel::to_string(named.ep) + " as the primary");
    co_return error_code{};
}

client_impl::awaitable<void> client_impl::sentinel_watch() {
    auto self = shared_from_this();
    watch_link_ = std::make_unique<sentinel_link>(executor_, ssl_ctx_ ? &*ssl_ctx_ : nullptr, cfg_);
    backoff delay(cfg_.reconnect_min, cfg_.reconnect_max);
    std::size_t next = 0;
    while (!stopped() && !cfg_.nodes.empty()) {
        const endpoint s = cfg_.nodes[next++ % cfg_.nodes.size()];
        asio::steady_timer deadline(executor_);
        deadline.expires_after(cfg_.connect_timeout);
        std::string why;
        auto opened =
            co_await (subscribe_switch_master(s, why) || deadline.async_wait(use_nothrow));
        if (stopped()) break;
        if (opened.index() == 0 && !std::get<0>(opened)) {
            logger_->debug("following {}'s failovers through sentinel {}",
                           escaped{cfg_.service_name}, escaped{sentinel::to_string(s)});
            delay.reset();
            auto heard = clock::now();
            co_await (sentinel_listen(s, heard, why) || sentinel_keepalive(heard, why));
            if (stopped()) co_return;
        } else if (opened.index() == 1) {
            why = "no answer within " + in_ms(cfg_.connect_timeout);
        }
        watch_link_->close();
        logger_->info("subscription to sentinel {} ended ({}); trying the next",
                      escaped{sentinel::to_string(s)}, escaped{why});
        // The client's reconnect backoff: the first retry (another
        // Sentinel) soon, then doubling up to reconnect_max, jittered.
        watch_timer_.expires_after(delay.next());
        co_await watch_timer_.async_wait(use_nothrow);
    }
}

client_impl::awaitable<void> client_impl::sentinel_listen(const endpoint& s,
                                                          clock::time_point& heard,
                                                          std::string& why) {
    for (;;) {
        auto [ec, r] = co_await watch_link_->read();
        if (stopped()) co_return;
        if (ec) {
            // Aborted: the health check ended the subscription and said why.
            if (ec != asio::error::operation_aborted) why = describe_cause(ec);
            co_return;
        }
        heard = clock::now();
        if (auto ep = sentinel::parse_switch_master(r, cfg_.service_name)) {
            logger_->warn("sentinel {}: +switch-master, the primary of {} is now {}",
                          escaped{sentinel::to_string(s)}, escaped{cfg_.service_name},
                          escaped{sentinel::to_string(*ep)});
            if (!(connected() && *ep == server_)) rediscover("+switch-master");
        }
    }
}

client_impl::awaitable<void> client_impl::sentinel_keepalive(const clock::time_point& heard,
                                                             std::string& why) {
    asio::steady_timer timer(executor_);
    for (;;) {
        timer.expires_at(heard + cfg_.health_check_interval);
        if (auto [ec] = co_await timer.async_wait(use_nothrow); ec || stopped()) co_return;
        if (clock::now() < heard + cfg_.health_check_interval) continue;  // heard meanwhile
        const auto pinged = clock::now();
        if (auto ec = co_await watch_link_->send(command{"PING"}); ec) {
            if (ec != asio::error::operation_aborted) why = describe_cause(ec);
            co_return;
        }
        timer.expires_at(pinged + cfg_.command_timeout);
        if (auto [ec] = co_await timer.async_wait(use_nothrow); ec || stopped()) co_return;
        if (heard < pinged) {
            why = "no answer to PING within " + in_ms(cfg_.command_timeout);
            co_return;
        }
    }
}

void client_impl::rediscover(std::string_view why) {
    if (stopped()) return;
    logger_->warn("{}: asking the Sentinels for the primary of {} again", escaped{why},
                  escaped{cfg_.service_name});
    reconnect_now_ = true;
    if (connected()) {
        // run() sees the connection end and asks at once (reconnect_now_).
        fail_write(error::connection_lost);
    } else {
        // Waiting out a backoff: cut it short.
        backoff_.reset();
        backoff_timer_.cancel();
    }
}

}  // namespace corolock::detail
