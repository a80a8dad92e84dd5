// How a backend runs one admin coroutine behind a seam hook
// (core/backend.hpp, admin_*): the hook's handler is completed once, with
// the coroutine's result, or earlier with operation_aborted when its
// cancellation slot asks (terminal or partial); the coroutine then runs on
// to its own end unobserved (each of its requests is bounded).
#pragma once

#include <corolock/admin.hpp>
#include <corolock/detail/completion.hpp>
#include <corolock/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>

#include <exception>
#include <memory>
#include <tuple>
#include <utility>

namespace corolock::detail {

template <class... Results>
class admin_call : public std::enable_shared_from_this<admin_call<Results...>> {
public:
    using handler_type = boost::asio::any_completion_handler<void(error_code, Results...)>;

    admin_call(handler_type h, boost::asio::any_io_executor strand)
        : handler_(std::move(h)), strand_(std::move(strand)) {}

    // Connects the handler's slot (before the work starts).
    void watch_cancellation() {
        namespace asio = boost::asio;
        auto slot = asio::get_associated_cancellation_slot(handler_);
        if (!slot.is_connected()) return;
        slot.assign([weak = this->weak_from_this(), strand = strand_](asio::cancellation_type t) {
            if ((t & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
                asio::cancellation_type::none)
                return;
            // Posted: completing clears the slot, which must not happen from
            // inside the slot's own handler.
            asio::post(strand, [weak] {
                if (auto c = weak.lock()) c->complete(asio::error::operation_aborted, Results{}...);
            });
        });
    }

    // The first call completes the handler; later ones find nothing to do.
    void complete(error_code ec, Results... results) {
        if (!handler_) return;
        auto slot = boost::asio::get_associated_cancellation_slot(handler_);
        if (slot.is_connected()) slot.clear();
        auto h = std::move(handler_);
        handler_ = {};
        complete_now(std::move(h), false, strand_, ec, std::move(results)...);
    }

private:
    handler_type handler_;
    boost::asio::any_io_executor strand_;
};

// Spawns make_work() (a callable returning
// awaitable<tuple<error_code, Results...>>, keeping what it needs alive in
// its captures) on `strand`, and completes `handler` as admin_call says.
template <class... Results, class MakeWork>
void run_admin(boost::asio::any_io_executor strand, MakeWork make_work,
               boost::asio::any_completion_handler<void(error_code, Results...)> handler) {
    namespace asio = boost::asio;
    auto call = std::make_shared<admin_call<Results...>>(std::move(handler), strand);
    call->watch_cancellation();
    asio::co_spawn(
        strand, std::move(make_work),
        asio::bind_executor(strand, [call](std::exception_ptr e,
                                           std::tuple<error_code, Results...> r) {
            // The admins answer by error code; only an allocation can throw.
            if (e) return call->complete(error::unexpected_reply, Results{}...);
            std::apply([&](error_code ec, Results&... out) { call->complete(ec, std::move(out)...); },
                       r);
        }));
}

// The seam hooks of a backend whose admin opens a session or connection of
// its own for each call (ZooKeeper, PostgreSQL). make() gives a shared_ptr
// to a fresh admin with connect(), status(name), list(lock_list_options)
// and break_lock(name, only_owner) (only_owner not empty: error::not_owner
// when someone else holds it); to_public(its status) is the public
// lock_status. The admin lives until its coroutine ends.
template <class Make, class ToPublic>
class session_admin {
public:
    session_admin(boost::asio::any_io_executor strand, Make make, ToPublic to_public)
        : strand_(std::move(strand)), make_(std::move(make)), to_public_(std::move(to_public)) {}

    void status(std::string name,
                boost::asio::any_completion_handler<void(error_code, lock_status)> h) const {
        on_session<lock_status>(
            [name = std::move(name)](auto& a, const ToPublic& to)
                -> boost::asio::awaitable<std::tuple<error_code, lock_status>> {
                auto [ec, st] = co_await a.status(name);
                co_return std::make_tuple(ec, ec ? lock_status{} : to(st));
            },
            std::move(h));
    }

    void list(lock_list_options o,
              boost::asio::any_completion_handler<void(error_code, lock_list)> h) const {
        on_session<lock_list>(
            [o = std::move(o)](auto& a, const ToPublic& to)
                -> boost::asio::awaitable<std::tuple<error_code, lock_list>> {
                auto [ec, found] = co_await a.list(o);
                lock_list out;
                if (!ec) {
                    out.truncated = found.truncated;
                    for (const auto& l : found.locks) out.locks.push_back({l.name, to(l.status)});
                }
                co_return std::make_tuple(ec, std::move(out));
            },
            std::move(h));
    }

    void break_lock(std::string name,
                    boost::asio::any_completion_handler<void(error_code, lock_status)> h) const {
        on_session<lock_status>(
            [name = std::move(name)](auto& a, const ToPublic& to)
                -> boost::asio::awaitable<std::tuple<error_code, lock_status>> {
                auto [ec, st] = co_await a.break_lock(name, std::string());
                co_return std::make_tuple(ec, ec ? lock_status{} : to(st));
            },
            std::move(h));
    }

    // The break of `owner`'s hold only; error::expired when nobody holds it.
    void release_owner(std::string name, std::string owner,
                       boost::asio::any_completion_handler<void(error_code)> h) const {
        on_session<>(
            [name = std::move(name), owner = std::move(owner)](
                auto& a, const ToPublic& to) -> boost::asio::awaitable<std::tuple<error_code>> {
                auto [ec, st] = co_await a.break_lock(name, owner);
                if (!ec && !to(st).held) ec = error::expired;
                co_return std::make_tuple(ec);
            },
            std::move(h));
    }

private:
    // Runs ask(admin, to_public) on a fresh admin once it connected; a
    // failed connect is the answer, with empty results. The closure (and so
    // what ask captured) lives in the spawned coroutine's frame until it ends.
    template <class... Results, class Ask>
    void on_session(Ask ask,
                    boost::asio::any_completion_handler<void(error_code, Results...)> h) const {
        run_admin<Results...>(
            strand_,
            [a = make_(), to = to_public_, ask = std::move(ask)]()
                -> boost::asio::awaitable<std::tuple<error_code, Results...>> {
                if (auto ec = co_await a->connect(); ec)
                    co_return std::tuple<error_code, Results...>{ec, Results{}...};
                co_return co_await ask(*a, to);
            },
            std::move(h));
    }

    boost::asio::any_io_executor strand_;
    Make make_;
    ToPublic to_public_;
};

}  // namespace corolock::detail
