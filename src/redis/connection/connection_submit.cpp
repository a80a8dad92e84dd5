// client_impl, part two: submitting commands (the request queue, refusing
// what cannot be sent, completions), writing them (coalesced flushes), the
// health check's PING and the expiry of queued commands.
// connection.cpp has its life cycle, connection_loop.cpp the connection
// loop.
#include "redis/connection/client_impl.hpp"
#include "core/logging.hpp"
#include "redis/topology/cluster_router.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include <spdlog/spdlog.h>

#include <atomic>
#include <cassert>
#include <exception>
#include <memory>

namespace corolock {
namespace detail {

namespace asio = boost::asio;

// ---- submitting commands ----

void client_impl::exec(std::string payload, exec_options opts, exec_handler handler) {
    if (strand_.running_in_this_thread()) {
        // What dispatch() would do, without boxing a function for the strand.
        push_request(std::move(payload), opts, std::move(handler));
        return;
    }
    // Off the strand, the command reaches the queue (and push_request puts
    // its handler in the caller's cancellation slot) only later. A
    // cancellation emitted before then would find the slot empty and be
    // lost, and the command sent: this handler keeps it, and the command is
    // then completed with operation_aborted without ever being sent.
    std::shared_ptr<std::atomic<bool>> cancelled_early;
    if (auto slot = asio::get_associated_cancellation_slot(handler); slot.is_connected()) {
        cancelled_early = std::make_shared<std::atomic<bool>>(false);
        slot.assign([flag = cancelled_early](asio::cancellation_type) { flag->store(true); });
    }
    asio::dispatch(strand_, [self = shared_from_this(), payload = std::move(payload), opts,
                             handler = std::move(handler), cancelled_early]() mutable {
        if (cancelled_early && cancelled_early->load()) {
            asio::get_associated_cancellation_slot(handler).clear();
            self->complete_refused(std::move(handler), opts.direct,
                                   asio::error::operation_aborted, reply{});
            return;
        }
        self->push_request(std::move(payload), opts, std::move(handler));
    });
}

void client_impl::exec(exec_options opts, target_ptr target) {
    assert(strand_.running_in_this_thread());
    if (stopped()) {
        // Never complete inside the initiating call: post. By hand: a target
        // is the library's own, called on the strand, with no executor of its own.
        asio::post(strand_, [target = std::move(target)]() mutable {
            auto* t = target.get();
            t->on_reply(std::move(target), error::client_stopped, reply{});
        });
        return;
    }
    if (router_) {
        router_->exec(opts, std::move(target));
        return;
    }
    if (refuse_now(target)) return;
    const auto qo = queue_options(opts);
    queue_.push_target(std::move(target), qo);
    stats_.queued.store(queue_.size(), std::memory_order_relaxed);
    after_push(qo);
}

request_queue::options client_impl::queue_options(const exec_options& opts) const {
    const auto timeout = opts.timeout.count() > 0 ? opts.timeout : cfg_.command_timeout;
    request_queue::options qo;
    qo.kind = opts.kind;
    qo.idempotent = opts.idempotent;
    qo.priority = opts.priority;
    qo.direct = opts.direct;
    qo.deadline = clock::now() + timeout;
    return qo;
}

void client_impl::push_request(std::string payload, exec_options opts, exec_handler handler) {
    if (stopped()) {
        complete_refused(std::move(handler), opts.direct, error::client_stopped, reply{});
        return;
    }
    if (router_) {
        router_->exec(std::move(payload), opts, std::move(handler));
        return;
    }
    if (refuse_now(opts, handler)) return;
    auto slot = asio::get_associated_cancellation_slot(handler);
    const auto qo = queue_options(opts);
    const auto id = queue_.push(std::move(payload), std::move(handler), qo);
    stats_.queued.store(queue_.size(), std::memory_order_relaxed);

    if (slot.is_connected()) {
        slot.assign([weak = weak_from_this(), id](asio::cancellation_type type) {
            auto self = weak.lock();
            if (!self) return;
            const bool written_too =
                (type & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) !=
                asio::cancellation_type::none;
            // Posted, not dispatched: the slot must not be cleared from
            // inside its own handler, which completing the command does.
            asio::post(self->strand_, [self, id, written_too] {
                completions done;
                self->queue_.cancel(id, asio::error::operation_aborted, written_too, done);
                self->run_completions(done);
            });
        });
    }
    after_push(qo);
}

reply client_impl::fail_fast_reply() const {
    reply r;
    r.type = resp3_type::simple_error;
    r.str = fail_fast_text_;
    return r;
}

void client_impl::complete_refused(exec_handler handler, bool direct, error_code ec, reply r) {
    // A direct handler has no executor of its own and expects the strand.
    if (direct)
        detail::complete_posted(std::move(handler), asio::any_io_executor(strand_), ec,
                                std::move(r));
    else
        detail::complete_posted(std::move(handler), executor_, ec, std::move(r));
}

bool client_impl::refuse_now(const exec_options& opts, exec_handler& handler) {
    if (!fail_fast_ || connected()) return false;
    complete_refused(std::move(handler), opts.direct, fail_fast_ec_, fail_fast_reply());
    return true;
}

bool client_impl::refuse_now(target_ptr& target) {
    if (!fail_fast_ || connected()) return false;
    // By hand, as in exec(opts, target): a target is no handler.
    asio::post(strand_, [target = std::move(target), ec = fail_fast_ec_,
                         r = fail_fast_reply()]() mutable {
        auto* t = target.get();
        t->on_reply(std::move(target), ec, std::move(r));
    });
    return true;
}

void client_impl::fail_queued_fast() {
    completions done;
    queue_.fail_all(fail_fast_ec_, done);
    for (auto& c : done) c.result = fail_fast_reply();
    run_completions(done);
}

void client_impl::after_push(const request_queue::options& qo) {
    if (qo.deadline < expire_timer_.expiry()) expire_timer_.cancel();
    // A burst goes out in slices, so that the server starts on the first
    // while the client is still producing the rest, instead of client and
    // server taking turns. Each slice of one burst is twice the one before:
    // 16 commands go out at once, and thousands (a watchdog tick) still take
    // only a few writes. The remainder goes when the handler that queued it
    // returns (or the reader has handed out a read's replies), which ends
    // the burst. An idle connection (nothing in flight) sends at once: there
    // is nothing to batch with, and a lone command should not wait. That
    // holds in the reader too once it has handed out the read's last reply:
    // the command goes out before the handler that queued it unwinds, and
    // the unwinding overlaps the server's work instead of delaying it.
    if (queue_.waiting_count() >= slice_) {
        slice_ = std::min(slice_ * 2, max_slice);
        flush();
    } else if (queue_.written_count() == 0 && (!in_reader_ || !parser_.has_reply())) {
        flush();
    } else {
        schedule_flush();
    }
}

void client_impl::run_completions(completions& done) {
    stats_.queued.store(queue_.size(), std::memory_order_relaxed);
    // A handler that dispatch() runs inline may throw. The rest of the list
    // is still completed (dropped, a waiting acquire would be left in the
    // lock layer's lists), and the first exception then leaves
    // io_context::run(), as it would have from dispatch().
    std::exception_ptr thrown;
    for (auto& c : done) {
        try {
            complete(c);
        } catch (...) {
            if (!thrown) thrown = std::current_exception();
        }
    }
    done.clear();
    if (thrown) asio::post(executor_, [thrown] { std::rethrow_exception(thrown); });
}

void client_impl::complete(completion& c) {
    if (!c.ec && c.result.is_error()) {
        c.ec = classify_server_error(c.result.str);
        // The server's own words reach the log and last_error(), with the
        // command they answered. NOSCRIPT is routine: the lock layer falls
        // back to EVAL.
        std::string name(c.name.view());
        if (name.empty() && c.target) {
            std::string bytes;
            c.target->write_command(bytes);
            const auto of_bytes = command_name::of_payload(bytes);
            name = of_bytes.view();
        }
        std::string text = name.empty() ? c.result.str : name + ": " + c.result.str;
        if (c.ec == error::no_permission) text = "permission denied: " + text;
        if (c.ec == error::no_script) {
            logger_->debug("{}", escaped{text});
        } else if (cfg_.mode == topology::sentinel && sentinel::is_readonly_error(c.result.str)) {
            // The primary was demoted: find the new one (the command fails).
            note_error(c.ec, text);
            rediscover(text);
        } else {
            logger_->warn("server error: {}", escaped{text});
            note_error(c.ec, std::move(text));
        }
    }
    if (c.ec == error::timeout || c.ec == error::not_connected)
        stats_.timeouts.fetch_add(1, std::memory_order_relaxed);
    if (c.target) {
        auto* t = c.target.get();
        t->on_reply(std::move(c.target), c.ec, std::move(c.result));
        return;
    }
    if (c.direct) {
        // By hand: the lock layer's own handler, called on the strand it
        // expects (where this runs), not through any associated executor.
        std::move(c.handler)(c.ec, std::move(c.result));
        return;
    }
    auto slot = asio::get_associated_cancellation_slot(c.handler);
    if (slot.is_connected()) slot.clear();
    detail::complete_now(std::move(c.handler), false, executor_, c.ec, std::move(c.result));
}

// ---- writing ----

void client_impl::schedule_flush() {
    // Commands pushed by one handler go out in one write: the flush runs
    // once that handler returns. While the reader hands out replies it
    // flushes by itself (handle_replies), so nothing is posted then.
    if (!can_write_ || writing_ || flush_posted_ || in_reader_) return;
    flush_posted_ = true;
    asio::post(strand_, [self = shared_from_this()] {
        self->flush_posted_ = false;
        self->slice_ = first_slice;
        self->flush();
    });
}

void client_impl::flush() noexcept {
    if (!can_write_ || writing_ || !conn_ || !queue_.has_writable()) return;
    try {
        const std::string& bytes = queue_.stage();
        const auto count = queue_.staged_count();
        std::size_t sent = 0;
        if (!conn_->tls) {
            // The socket is in non-blocking mode: this sends what the
            // kernel takes now, so the server starts on these commands
            // while the reader is still handing out the replies before them.
            error_code ec;
            sent = conn_->socket.write_some(asio::buffer(bytes), ec);
            if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
                fail_write(ec);
                return;
            }
            if (sent == bytes.size()) {
                write_done(count);
                return;
            }
        }
        // The rest waits for the socket. Only this write is in flight until
        // its completion runs; commands pushed meanwhile wait for it.
        writing_ = true;
        auto on_done = asio::bind_executor(
            strand_, [self = shared_from_this(), conn = conn_, count](error_code ec, std::size_t) {
                self->on_write_complete(conn, count, ec);
            });
        const auto rest = asio::buffer(bytes) + sent;
        if (conn_->tls)
            asio::async_write(*conn_->tls, rest, std::move(on_done));
        else
            asio::async_write(conn_->socket, rest, std::move(on_done));
    } catch (const std::exception& e) {
        logger_->error("write failed: {}", escaped{e.what()});
        fail_write(make_error_code(boost::system::errc::not_enough_memory));
    }
}

void client_impl::on_write_complete(const std::shared_ptr<connection>& conn, std::size_t count,
                                    error_code ec) {
    // A write of a connection that is gone: run() has already failed or
    // re-queued its commands.
    if (conn != conn_) return;
    writing_ = false;
    if (ec) {
        fail_write(ec);
        return;
    }
    write_done(count);
    flush();
}

void client_impl::write_done(std::size_t count) {
    queue_.on_write_done();
    stats_.commands_sent.fetch_add(count, std::memory_order_relaxed);
    stats_.writes.fetch_add(1, std::memory_order_relaxed);
}

void client_impl::fail_write(error_code ec) noexcept {
    // writer() ends the connection with this error; the reader and the
    // health check are cancelled with it.
    can_write_ = false;
    if (!write_error_) write_error_ = ec;
    write_signal_.cancel();
}

// ---- the health check and the expiry of queued commands ----

client_impl::awaitable<error_code> client_impl::health_check() {
    stop_writing on_exit{*this};
    asio::steady_timer timer(executor_);
    const auto interval = cfg_.health_check_interval;
    for (;;) {
        timer.expires_after(interval);
        auto [ec] = co_await timer.async_wait(use_nothrow);
        if (ec) co_return ec;
        if (clock::now() - last_read_ < interval) continue;
        // Quiet for a whole interval: ask. PING is answered even while the
        // connection is subscribed under RESP3.
        auto [pec, r] = co_await asio::async_initiate<decltype(use_nothrow),
                                                      void(error_code, reply)>(
            [this](auto handler) {
                exec_options opts;
                opts.timeout = cfg_.command_timeout;
                push_request(command{"PING"}.payload(), opts, exec_handler(std::move(handler)));
            },
            use_nothrow);
        if (pec == error::timeout || pec == error::not_connected) {
            logger_->warn("health check: no PING reply within {} ms",
                          std::chrono::duration_cast<std::chrono::milliseconds>(
                              cfg_.command_timeout)
                              .count());
            co_return error::timeout;
        }
        if (pec) co_return pec;
    }
}

client_impl::awaitable<void> client_impl::expire_loop() {
    auto self = shared_from_this();
    while (!stopped()) {
        expire_timer_.expires_at(queue_.next_deadline());
        co_await expire_timer_.async_wait(use_nothrow);
        if (stopped()) break;
        completions done;
        // A command that timed out while the client could not connect says so.
        const error_code ec = connected() ? error_code(error::timeout)
                                          : error_code(error::not_connected);
        std::size_t written = 0;
        queue_.expire(clock::now(), ec, done, &written);
        if (!done.empty()) {
            std::string name(done.front().name.view());
            note_error(ec, (name.empty() ? std::string("a command") : name) +
                               (ec == error::timeout ? ": no reply within its timeout"
                                                     : ": not connected within its timeout"));
        }
        run_completions(done);
        if (written > 0 && can_write_ && !stopped()) {
            // A written command got no reply in time: the replies ahead of
            // it are late (a stalled or trickling server), and every command
            // behind it waits for them. The stream is reset, so the
            // commands still queued go out on a fresh connection; a
            // server that trickles bytes can no longer keep them waiting.
            logger_->warn("{} written command(s) to {} got no reply in time; resetting the "
                          "connection",
                          written, escaped{peer()});
            fail_write(error::timeout);
        }
    }
}

}  // namespace detail
}  // namespace corolock
