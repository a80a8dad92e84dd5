// client_impl, part three: the connection loop (connect, TLS, HELLO, the
// reader, the writer, the health check, the expiry of queued commands).
// connection.cpp has its life cycle, connection_submit.cpp the submitting
// and writing of commands.
#include <corolock/client.hpp>
#include "redis/connection/client_impl.hpp"
#include "core/open_cloexec.hpp"
#include "core/logging.hpp"
#include "redis/lock/scripts.hpp"
#include "core/holder_record.hpp"
#include "redis/topology/cluster_router.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <spdlog/spdlog.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <array>
#include <cassert>
#include <exception>
#include <mutex>
#include <tuple>

namespace corolock {
namespace detail {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using strand_type = detail::client_impl::strand_type;
// (The executor traits are settled in core/inner_executor.hpp.)

namespace {

// OpenSSL's reason for a TLS failure, without Asio's " (SSL routines)"
// suffix, and with the certificate check's own reason when that failed.
std::string describe_tls_failure(const error_code& ec, SSL* ssl) {
    std::string text = ec.message();
    if (const auto paren = text.rfind(" ("); paren != std::string::npos && text.back() == ')')
        text.erase(paren);
    if (ssl != nullptr) {
        const long verify = SSL_get_verify_result(ssl);
        if (verify != X509_V_OK) {
            text += ": ";
            text += X509_verify_cert_error_string(verify);
        }
    }
    return text;
}

bool is_tls_error(const error_code& ec) {
    return ec.category() == asio::error::get_ssl_category();
}

// HELLO refused as a command (Redis before 6.0 has no HELLO; NOPROTO is a
// server that knows HELLO but not protocol 3).
bool is_hello_unknown(std::string_view text) {
    return text.substr(0, 7) == "NOPROTO" ||
           (text.find("unknown command") != std::string_view::npos &&
            (text.find("HELLO") != std::string_view::npos ||
             text.find("hello") != std::string_view::npos));
}


bool is_ip_literal(const std::string& host) {
    error_code ec;
    asio::ip::make_address(host, ec);
    return !ec;
}


}  // namespace

// ---- the connection loop ----

client_impl::awaitable<void> client_impl::run() {
    auto self = shared_from_this();
    while (!stopped()) {
        const error_code ec = co_await connect_once();
        if (stopped()) break;
        if (ec) {
            close_socket();
            on_connect_failure(ec);
        } else {
            last_connect_error_ = {};
            last_connect_diagnostic_.clear();
            last_failure_diagnostic_.clear();
            last_connect_permanent_ = false;
            fail_fast_ = false;
            ever_connected_ = true;
            window_timer_.cancel();
            backoff_.reset();
            if (ssl_ctx_ && !cfg_.tls.verify_peer)
                logger_->warn("TLS certificate verification is disabled (config.tls.verify_peer "
                              "= false): the connection to {} is encrypted but the server is "
                              "not authenticated, and anyone on the path can impersonate it",
                              escaped{peer()});
            connected_.store(true, std::memory_order_release);
            const bool again = stats_.connects.fetch_add(1, std::memory_order_relaxed) > 0;
            logger_->info("connected to {}", escaped{peer()});
            if (cfg_.mode == topology::sentinel) {
                // A new primary may have lost the last writes (asynchronous
                // replication): on_connected() re-verifies every held lock.
                if (again && !(server_ == last_primary_))
                    logger_->warn("the primary of {} is now {} (was {})",
                                  escaped{cfg_.service_name}, escaped{sentinel::to_string(server_)},
                                  escaped{sentinel::to_string(last_primary_)});
                last_primary_ = server_;
            }
            for_each_listener([](connection_listener& l) { l.on_connected(); });
            if (again)
                notify(event_observer(), *logger_, "on_reconnected",
                       [](observer& o) { o.on_reconnected(); });

            // Commands queued while disconnected go out now.
            can_write_ = true;
            flush();
            const auto result = co_await (reader() || writer() || health_check());
            const error_code why = std::visit([](const error_code& e) { return e; }, result);
            can_write_ = false;
            writing_ = false;
            write_error_ = {};

            connected_.store(false, std::memory_order_release);
            close_socket();
            if (stopped()) break;
            stats_.disconnects.fetch_add(1, std::memory_order_relaxed);
            logger_->warn("connection to {} lost: {}", escaped{peer()},
                          why.message());
            completions done;
            const auto retried = queue_.on_disconnect(error::connection_lost, done);
            stats_.retries.fetch_add(retried, std::memory_order_relaxed);
            run_completions(done);
            for_each_listener([](connection_listener& l) { l.on_disconnected(); });
        }
        if (stopped()) break;
        if (std::exchange(reconnect_now_, false)) {
            // The Sentinels moved the primary: no backoff before asking them.
            backoff_.reset();
            continue;
        }
        const auto delay = backoff_.next();
        logger_->debug("reconnecting in {} ms",
                       std::chrono::duration_cast<std::chrono::milliseconds>(delay).count());
        backoff_timer_.expires_after(delay);
        co_await backoff_timer_.async_wait(use_nothrow);
    }
}

void client_impl::close_socket() noexcept {
    if (conn_) {
        // Pending operations end with operation_aborted; the streams live
        // on until the last of them has run.
        error_code ignored;
        conn_->socket.shutdown(tcp::socket::shutdown_both, ignored);
        conn_->socket.close(ignored);
        conn_.reset();
    }
}

void client_impl::on_connect_failure(error_code ec) {
    last_connect_error_ = ec;
    if (last_connect_diagnostic_.empty()) last_connect_diagnostic_ = describe_cause(ec);
    last_failure_diagnostic_ = last_connect_diagnostic_;
    // Retrying cannot fix these, nor a failed handshake (SELECT of a
    // database the server lacks) or no primary after one of them. (A server
    // that is fixed meanwhile is still found: the reconnecting goes on.)
    last_connect_permanent_ = retry_cannot_fix(ec) ||
                              ((ec == error::handshake_failed || ec == error::no_primary) &&
                               last_connect_permanent_);
    logger_->warn("connect to {} failed: {}{}{}", escaped{peer()}, ec.message(),
                  last_connect_diagnostic_.empty() ? "" : ": ", escaped{last_connect_diagnostic_});
    note_error(ec, last_connect_diagnostic_);
    if (last_connect_permanent_) {
        const bool was = fail_fast_ && fail_fast_ec_ == ec;
        fail_fast_ = true;
        fail_fast_ec_ = ec;
        fail_fast_text_ = last_connect_diagnostic_;
        if (!was)
            logger_->warn("commands to {} fail at once ({}) until a connection succeeds",
                          escaped{peer()}, escaped{last_connect_diagnostic_});
        fail_queued_fast();
    } else if (!ever_connected_ &&
               (window_passed_ || (cfg_.fail_fast_when_refused && last_connect_refused_))) {
        // config::fail_fast_when_refused: nothing listens on any address,
        // so the commands need not wait out connect_timeout.
        fail_fast_ = true;
        fail_fast_ec_ = error::never_connected;
        fail_fast_text_ = "never connected: " + last_connect_diagnostic_;
        fail_queued_fast();
    } else {
        // A transient failure after a permanent one: back to waiting.
        fail_fast_ = false;
    }
}

client_impl::awaitable<void> client_impl::connect_window() {
    auto self = shared_from_this();
    window_timer_.expires_after(cfg_.connect_timeout);
    co_await window_timer_.async_wait(use_nothrow);
    if (stopped() || ever_connected_) co_return;
    window_passed_ = true;
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(cfg_.connect_timeout).count();
    // The last failed attempt's cause: a retry may be under way, and it
    // clears last_connect_diagnostic_ when it starts.
    std::string cause = last_connect_error_ ? last_failure_diagnostic_
                                            : "the first attempt is still connecting";
    logger_->warn("no connection to {} within {} ms ({}): commands fail with never_connected "
                  "until one succeeds",
                  escaped{peer()}, ms, escaped{cause});
    if (fail_fast_) co_return;  // a permanent failure already fails them
    fail_fast_ = true;
    fail_fast_ec_ = error::never_connected;
    fail_fast_text_ = "never connected: " + cause;
    if (!last_connect_error_)
        note_error(error::connect_timeout, "no connection within " + std::to_string(ms) + " ms");
    fail_queued_fast();
}

client_impl::awaitable<error_code> client_impl::connect_once() {
    last_connect_diagnostic_.clear();
    last_connect_permanent_ = false;
    last_connect_refused_ = false;
    reconnect_now_ = false;  // this attempt is the one asked for
    if (cfg_.mode == topology::sentinel) co_return co_await connect_via_sentinels();
    // A named local, not a temporary in the co_await: g++ 12 destroys such
    // a temporary twice.
    const endpoint server{cfg_.host, cfg_.port};
    co_return co_await connect_to(server);
}

std::string client_impl::peer() const {
    if (cfg_.mode == topology::sentinel && server_.port == 0)
        return "the primary of " + cfg_.service_name;
    return sentinel::to_string(server_);
}

client_impl::awaitable<error_code> client_impl::connect_to(const endpoint& server) {
    server_ = server;
    last_connect_diagnostic_.clear();
    last_connect_permanent_ = false;
    last_connect_refused_ = false;
    asio::steady_timer deadline(executor_);
    // connect_timeout is also how long commands wait for a first connection
    // (see connect_window); one attempt may take longer than that on a slow
    // link, and then still connects for the commands that come later.
    const clock::duration attempt_timeout =
        std::max<clock::duration>(cfg_.connect_timeout, std::chrono::seconds(5));
    deadline.expires_after(attempt_timeout);
    const auto timed_out = [&] {
        last_connect_diagnostic_ =
            "no answer within " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::milliseconds>(attempt_timeout).count()) +
            " ms";
        return error_code(error::connect_timeout);
    };

    auto [rec, endpoints] = co_await resolver_.async_resolve(
        server_.host, std::to_string(server_.port), use_nothrow);
    if (rec) {
        last_connect_diagnostic_ = describe_cause(rec);
        co_return error::resolve_failed;
    }
    if (stopped()) co_return error::client_stopped;

    conn_ = std::make_shared<connection>(executor_);
    const auto conn = conn_;
    // Each endpoint in turn, on a socket opened close-on-exec (Asio's own
    // range connect would open them without).
    error_code cec = asio::error::host_not_found;
    last_connect_refused_ = true;  // until an address answers otherwise
    for (const auto& entry : endpoints) {
        const auto ep = entry.endpoint();
        error_code ignored;
        conn->socket.close(ignored);
        if (cec = open_cloexec(conn->socket, ep.protocol()); cec) continue;
        auto connected = co_await (conn->socket.async_connect(ep, use_nothrow) ||
                                   deadline.async_wait(use_nothrow));
        if (connected.index() == 1) co_return timed_out();
        cec = std::get<0>(std::get<0>(connected));
        if (cec != asio::error::connection_refused) last_connect_refused_ = false;
        if (!cec || stopped() || conn_ != conn) break;
    }
    if (cec) {
        last_connect_diagnostic_ = describe_cause(cec);
        co_return cec;
    }
    // stop() may have closed it while connecting.
    if (conn_ != conn) co_return error::client_stopped;
    error_code oec;
    conn->socket.set_option(tcp::no_delay(true), oec);
    // For flush()'s direct send; asynchronous operations are unaffected.
    if (!oec) conn->socket.non_blocking(true, oec);
    if (oec) {
        last_connect_diagnostic_ = oec.message();
        co_return oec;
    }

    if (ssl_ctx_) {
        conn->tls.emplace(conn->socket, *ssl_ctx_);
        // server_.host is the configured host, or the address a Sentinel
        // named: without tls.server_name, the name it announced is checked.
        const std::string sni =
            cfg_.tls.expected_name(tls_config::peer::data_node, server_.host);
        if (!is_ip_literal(sni)) SSL_set_tlsext_host_name(conn->tls->native_handle(), sni.c_str());
        // A Sentinel's primary is only known now: check its name, not the
        // configured host's (single mode checks that in the context).
        if (cfg_.mode == topology::sentinel && cfg_.tls.verify_peer)
            conn->tls->set_verify_callback(asio::ssl::host_name_verification(sni));
        auto hs = co_await (conn->tls->async_handshake(asio::ssl::stream_base::client, use_nothrow) ||
                            deadline.async_wait(use_nothrow));
        if (hs.index() == 1) {
            timed_out();
            // A plain-text Redis reads the ClientHello as an inline command
            // and waits for a newline that may never come.
            last_connect_diagnostic_ =
                "TLS handshake: " + last_connect_diagnostic_ + " (is that port plain-text Redis?)";
            co_return error::connect_timeout;
        }
        if (auto [hec] = std::get<0>(hs); hec) {
            // OpenSSL's own failures (a plain-text server, a certificate
            // that does not verify) are reported as such; the peer closing
            // mid-handshake is a socket failure like any other.
            if (is_tls_error(hec)) {
                last_connect_diagnostic_ =
                    "TLS handshake: " + describe_tls_failure(hec, conn->tls->native_handle());
                co_return error::tls_handshake_failed;
            }
            last_connect_diagnostic_ = "TLS handshake: " + describe_cause(hec);
            co_return hec;
        }
    }

    auto hello = co_await (handshake() || deadline.async_wait(use_nothrow));
    if (hello.index() == 1) co_return timed_out();
    co_return std::get<0>(hello);
}

client_impl::awaitable<error_code> client_impl::handshake() {
    // HELLO 3 switches to RESP3, authenticates and names the connection in
    // one round trip; SELECT follows when a database is chosen.
    command hello{"HELLO", "3"};
    if (!cfg_.password.empty()) {
        hello.arg("AUTH")
            .arg(cfg_.username.empty() ? std::string_view("default") : std::string_view(cfg_.username))
            .arg(cfg_.password);
    }
    if (!cfg_.client_name.empty()) hello.arg("SETNAME").arg(cfg_.client_name);
    std::string out = hello.payload();
    std::size_t expected = 1;
    const std::string db = std::to_string(cfg_.database);
    if (cfg_.database != 0) {
        command{"SELECT", db}.append_to(out);
        ++expected;
    }
    // A Sentinel's answer may be stale: the server must say it is the
    // primary itself, on every connect.
    const bool check_role = cfg_.mode == topology::sentinel;
    if (check_role) {
        command{"ROLE"}.append_to(out);
        ++expected;
    }
    if (auto [ec, n] = co_await write_all(out); ec) {
        if (conn_ && conn_->tls && is_tls_error(ec)) {
            last_connect_diagnostic_ = "TLS handshake: " + describe_tls_failure(ec, nullptr);
            co_return error::tls_handshake_failed;
        }
        last_connect_diagnostic_ = "sending HELLO: " + describe_cause(ec);
        co_return error::connection_lost;
    }

    parser_.reset();
    std::array<char, 4096> buf;
    std::vector<reply> replies;
    while (replies.size() < expected) {
        auto [ec, n] = co_await read_some(buf.data(), buf.size());
        if (ec) {
            // A TLS 1.3 server checks the client's certificate after the
            // handshake: "certificate required" arrives as the first read's
            // alert.
            if (conn_ && conn_->tls && is_tls_error(ec)) {
                last_connect_diagnostic_ = "TLS handshake: " + describe_tls_failure(ec, nullptr);
                co_return error::tls_handshake_failed;
            }
            last_connect_diagnostic_ = "waiting for the HELLO reply: " + describe_cause(ec);
            co_return error::connection_lost;
        }
        error_code pec;
        parser_.consume(std::string_view(buf.data(), n), pec);
        if (pec) {
            last_connect_diagnostic_ = parser_.diagnostic();
            co_return pec;
        }
        while (parser_.has_reply()) {
            reply r = parser_.pop();
            if (r.type == resp3_type::push) continue;  // nothing is subscribed yet
            replies.push_back(std::move(r));
        }
    }
    if (replies[0].is_error()) {
        const std::string& text = replies[0].str;
        if (is_hello_unknown(text)) {
            last_connect_diagnostic_ = "HELLO 3: " + text +
                                       " (corolock needs RESP3: Redis 6.0 or later)";
            co_return error::server_too_old;
        }
        const auto ec = classify_server_error(text);
        if (ec == error::no_permission) {
            last_connect_diagnostic_ = "permission denied: HELLO: " + text;
            co_return ec;
        }
        // The credentials are never echoed: only the server's words.
        last_connect_diagnostic_ = "HELLO: " + text;
        // LOADING, BUSY and the like pass; anything else is retried as well.
        co_return ec == error::auth_failed ? ec : error_code(error::handshake_failed);
    }
    if (cfg_.database != 0 && replies[1].is_error()) {
        last_connect_diagnostic_ = "SELECT " + db + ": " + replies[1].str;
        // A database the server does not have stays missing; LOADING passes.
        last_connect_permanent_ = replies[1].str.substr(0, 7) != "LOADING";
        co_return error::handshake_failed;
    }
    if (check_role) {
        std::string role;
        if (!sentinel::role_is_master(replies.back(), role)) {
            last_connect_diagnostic_ =
                sentinel::to_string(server_) +
                (role == "slave" || role == "replica" ? std::string(" is a replica")
                                                      : " is not a primary (" + role + ")");
            co_return error::no_primary;
        }
    }
    // Anything the server sent beyond the handshake replies would be out of
    // step with the queue.
    if (parser_.has_reply()) co_return error::protocol_error;
    last_read_ = clock::now();
    co_return error_code{};
}

client_impl::awaitable<std::pair<error_code, std::size_t>> client_impl::read_some(char* data,
                                                                           std::size_t size) {
    // The local copy keeps the streams alive while the read is pending.
    const auto conn = conn_;
    if (!conn) co_return std::pair{error_code(error::connection_lost), std::size_t{0}};
    auto buffer = asio::buffer(data, size);
    if (conn->tls) {
        auto [ec, n] = co_await conn->tls->async_read_some(buffer, use_nothrow);
        co_return std::pair{ec, n};
    }
    auto [ec, n] = co_await conn->socket.async_read_some(buffer, use_nothrow);
    co_return std::pair{ec, n};
}

client_impl::awaitable<std::pair<error_code, std::size_t>> client_impl::write_all(const std::string& data) {
    const auto conn = conn_;
    if (!conn) co_return std::pair{error_code(error::connection_lost), std::size_t{0}};
    if (conn->tls) {
        auto [ec, n] = co_await asio::async_write(*conn->tls, asio::buffer(data), use_nothrow);
        co_return std::pair{ec, n};
    }
    auto [ec, n] = co_await asio::async_write(conn->socket, asio::buffer(data), use_nothrow);
    co_return std::pair{ec, n};
}

void client_impl::handle_reply(reply&& r) {
    completions done;
    switch (queue_.on_reply(std::move(r), done)) {
    case request_queue::match_result::matched:
        stats_.replies.fetch_add(1, std::memory_order_relaxed);
        run_completions(done);
        break;
    case request_queue::match_result::push:
        stats_.pushes.fetch_add(1, std::memory_order_relaxed);
        for_each_listener([&](connection_listener& l) { l.on_push(r); });
        break;
    case request_queue::match_result::unexpected:
        // on_reply left r intact: it did not match anything.
        logger_->error("unsolicited reply {}; resetting the connection", to_string(r));
        close_socket();
        break;
    }
}

client_impl::awaitable<error_code> client_impl::reader() {
    // Once this ends the connection is going: no write may start on it
    // while the race unwinds (see stop_writing).
    stop_writing on_exit{*this};
    std::array<char, 16 * 1024> buf;
    for (;;) {
        // The socket is read here rather than through read_some(): one
        // coroutine frame and resumption less per read on the reply path.
        // The local copy keeps the streams alive while the read is pending.
        const auto conn = conn_;
        if (!conn) co_return error::connection_lost;
        const auto buffer = asio::buffer(buf);
        // Two plain statements: g++ 12 miscompiles co_await inside ?:.
        error_code ec;
        std::size_t n = 0;
        if (conn->tls)
            std::tie(ec, n) = co_await conn->tls->async_read_some(buffer, use_nothrow);
        else
            std::tie(ec, n) = co_await conn->socket.async_read_some(buffer, use_nothrow);
        if (ec) co_return ec;
        last_read_ = clock::now();
        error_code pec;
        parser_.consume(std::string_view(buf.data(), n), pec);
        // Replies parsed before an error are still delivered in order.
        if (!handle_replies()) co_return error::protocol_error;  // an unexpected reply closed it
        if (pec) {
            logger_->error("protocol error: {}", parser_.diagnostic());
            // The command whose reply this was hears why; the rest of the
            // connection's commands fail (or are retried) as on any drop.
            completions done;
            queue_.on_bad_reply(pec, done);
            run_completions(done);
            co_return pec;
        }
    }
}

bool client_impl::handle_replies() {
    // Handlers resumed here push their next commands; push_request sends
    // each full slice of them, and the rest goes out after the last reply.
    in_reader_ = true;
    struct reset {
        bool& flag;
        ~reset() { flag = false; }
    } guard{in_reader_};
    while (parser_.has_reply()) {
        handle_reply(parser_.pop());
        if (!conn_) return false;
    }
    in_reader_ = false;
    slice_ = first_slice;
    flush();
    return true;
}

client_impl::awaitable<error_code> client_impl::writer() {
    // The writing itself is flush()'s; this only ends the connection when a
    // write fails, so that the reader and the health check end with it.
    // Checked before every wait too: flush() can fail before this starts.
    for (;;) {
        if (stopped()) co_return error::client_stopped;
        if (write_error_) co_return write_error_;
        if (!conn_) co_return error::connection_lost;
        write_signal_.expires_at(clock::time_point::max());
        auto [ec] = co_await write_signal_.async_wait(use_nothrow);
        (void)ec;  // a cancelled wait is the signal
    }
}

}  // namespace detail
}  // namespace corolock
