// corolock::election (election.hpp): a campaign is the name's fair mutex
// (or its plain one, where lock_backend::mutex_serves_in_order) acquired,
// then the leader record written through the backend's election service
// (core/election_service.hpp); observing is reads of that record, each after
// a wake-up on the name's channel. A term's events are counted here, for
// every backend (record_term). Everything of one election
// runs on its own strand; the backend's calls hop to the backend's.
#include <corolock/election.hpp>
#include <corolock/fair_mutex.hpp>
#include <corolock/mutex.hpp>

#include "core/backend.hpp"
#include "core/election_service.hpp"
#include "core/leader_filter.hpp"
#include "core/logging.hpp"
#include "core/metrics_recorder.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <optional>
#include <type_traits>
#include <tuple>
#include <utility>

namespace corolock {

namespace asio = boost::asio;

namespace detail {

enum class term_event { won, resigned, lost };

// Counts a term's event in the backend's metrics and tells the user's
// observer, on the backend's strand (the observer's contract); then `done`
// on its own executor, so that a campaign or a resignation completes only
// after its event is counted (as an acquire after on_acquired). The one
// place election events reach the metrics, whatever the backend.
void record_term(const std::shared_ptr<lock_backend>& impl, const std::string& name,
                 std::uint64_t epoch, term_event ev,
                 asio::any_completion_handler<void()> done = {}) noexcept {
    try {
        asio::dispatch(impl->strand(), [impl, name, epoch, ev, done = std::move(done)]() mutable {
            auto& m = impl->recorder();
            auto* o = impl->event_observer();
            switch (ev) {
            case term_event::won: m.term_won(o, impl->log(), name, epoch); break;
            case term_event::resigned: m.term_resigned(o, impl->log(), name, epoch); break;
            case term_event::lost: m.term_lost(o, impl->log(), name, epoch); break;
            }
            if (done) asio::dispatch(std::move(done));
        });
    } catch (...) {
        // Out of memory: the count is lost, and a caller waiting for it
        // is never resumed (its frame is destroyed with the handler).
    }
}

struct election_state {
    election_state(const backend& b, std::string n)
        : impl(backend_access::impl(b)),
          service(impl ? impl->elections() : nullptr),
          name(std::move(n)),
          strand(asio::make_strand(impl ? impl->get_executor()
                                        : asio::any_io_executor(asio::system_executor()))) {
        if (service == nullptr) return;
        auto handle = backend_access::handle(impl, false);
        if (impl->mutex_serves_in_order()) plain.emplace(std::move(handle), name);
        else lock.emplace(std::move(handle), name);
    }

    std::shared_ptr<lock_backend> impl;
    election_service* service;  // null: this backend has no election
    std::string name;
    // The candidates' queue, with a service only: the fair mutex, or the
    // plain one where the backend's plain mutex is first come, first served.
    std::optional<fair_mutex> lock;
    std::optional<mutex> plain;
    asio::any_io_executor strand;  // a strand on the backend's executor

    // --- strand only ---
    bool campaigning = false;
    std::weak_ptr<term_state> term;  // the term won last
    bool observing = false;
    leader_filter filter;
    std::shared_ptr<leader_watch> watch;  // opened by the first observe

    const std::string& owner_id() const { return lock ? lock->owner_id() : plain->owner_id(); }
    std::size_t held_levels() const { return lock ? lock->held_levels() : plain->held_levels(); }
    template <class Token>
    auto acquire(const lock_options& opts, Token token) {
        return lock ? lock->async_acquire(opts, token) : plain->async_acquire(opts, token);
    }
};

struct term_state {
    std::shared_ptr<election_state> election;
    guard lock;  // the fair mutex's level: the term itself
    std::string value;
    std::uint64_t epoch = 0;

    // --- strand only ---
    bool resigned = false;  // resign() ran, or the leadership was dropped
    bool ended = false;     // counted once, as resigned or lost
    asio::cancellation_signal stop_watch;

    // Counts the term's end once; `done` runs after it was counted (at once
    // when it already was).
    void count(term_event ev, asio::any_completion_handler<void()> done = {}) {
        if (ended) {
            if (done) asio::dispatch(std::move(done));
            return;
        }
        ended = true;
        record_term(election->impl, election->name, epoch, ev, std::move(done));
    }

    // Counts the loss when the guard's lost signal fires.
    static void watch_loss(const std::shared_ptr<term_state>& t) {
        t->lock.async_until_lost(asio::bind_cancellation_slot(
            t->stop_watch.slot(),
            asio::bind_executor(t->election->strand, [weak = std::weak_ptr<term_state>(t)](
                                                          error_code ec) {
                auto self = weak.lock();
                if (self && ec == error::lock_lost) self->count(term_event::lost);
            })));
    }

    // Strand only. Stops watching and lets the guard and the record go in
    // the background.
    void resign_in_background() {
        if (resigned) return;
        resigned = true;
        stop_watch.emit(asio::cancellation_type::terminal);
        count(lock.lost() ? term_event::lost : term_event::resigned);
        lock = guard{};
        election->service->withdraw(election->name, election->owner_id(), epoch,
                                    asio::bind_executor(election->strand, [](error_code) {}));
    }

    static leadership make(std::shared_ptr<term_state> t) { return leadership(std::move(t)); }
};

namespace {

const guard& empty_guard() {
    static const guard g;
    return g;
}

using awaitable_tuple = asio::as_tuple_t<asio::use_awaitable_t<>>;

// Awaits one call of the election service, whose handler `start` receives.
template <class Signature, class Start>
auto call(Start start) {
    awaitable_tuple token;
    return asio::async_initiate<awaitable_tuple, Signature>(
        [start = std::move(start)](auto h) mutable {
            start(asio::any_completion_handler<Signature>(std::move(h)));
        },
        token);
}

error_code code_of(const std::exception_ptr& ep) {
    try {
        std::rethrow_exception(ep);
    } catch (const boost::system::system_error& e) {
        return e.code();
    } catch (...) {
        return error::unexpected_reply;
    }
}

// Runs `coro` on the election's strand and completes `h` with its result
// (with the error only when `h` takes no result); `h`'s cancellation slot
// reaches the coroutine's operations.
template <class Result, class Signature>
void spawn(const asio::any_io_executor& strand, const asio::any_io_executor& ex,
           asio::awaitable<std::tuple<error_code, Result>> coro,
           asio::any_completion_handler<Signature> h) {
    auto slot = asio::get_associated_cancellation_slot(h);
    asio::co_spawn(strand, std::move(coro),
                   asio::bind_cancellation_slot(
                       slot, [h = std::move(h), ex](std::exception_ptr ep,
                                                    std::tuple<error_code, Result> r) mutable {
                           if (ep) r = {code_of(ep), Result{}};
                           if constexpr (std::is_same_v<Signature, done_signature>)
                               complete_now(std::move(h), false, ex, std::get<0>(r));
                           else
                               complete_now(std::move(h), false, ex, std::get<0>(r),
                                            std::move(std::get<1>(r)));
                       }));
}

// The one place a backend without election is refused.
template <class Handler, class... Empty>
bool refused(const std::shared_ptr<election_state>& e, Handler& h, Empty... empty) {
    if (e && e->service != nullptr) return false;
    if (e && e->impl)
        e->impl->log().debug("election {}: the {} backend has no leader election",
                             escaped{e->name}, e->impl->scheme());
    complete_posted(std::move(h), election_executor(e), error_code(error::not_supported),
                    std::move(empty)...);
    return true;
}

bool value_too_long(std::string_view v) { return v.size() > max_leader_value_length; }

asio::awaitable<std::tuple<error_code, leadership>> run_campaign(
    std::shared_ptr<election_state> e, std::string value, lock_options opts) {
    if (e->campaigning || e->held_levels() > 0)
        co_return std::tuple{error_code(error::invalid_argument), leadership{}};
    e->campaigning = true;
    auto [ec, g] = co_await e->acquire(opts, awaitable_tuple{});
    if (ec) {
        e->campaigning = false;
        co_return std::tuple{ec, leadership{}};
    }
    auto t = std::make_shared<term_state>();
    t->election = e;
    t->epoch = g.token();
    t->lock = std::move(g);
    t->value = value;
    auto [pec] = co_await call<void(error_code)>([&](auto h) {
        e->service->proclaim(e->name, e->owner_id(), t->epoch, value, std::move(h));
    });
    e->campaigning = false;
    auto cs = co_await asio::this_coro::cancellation_state;
    if (!pec && cs.cancelled() != asio::cancellation_type::none)
        pec = asio::error::operation_aborted;
    if (pec) {
        t->ended = true;  // never won: nothing to count
        t->resign_in_background();
        co_return std::tuple{pec, leadership{}};
    }
    co_await call<void()>([&](auto h) {
        record_term(e->impl, e->name, t->epoch, term_event::won, std::move(h));
    });
    term_state::watch_loss(t);
    e->term = t;
    co_return std::tuple{error_code{}, term_state::make(std::move(t))};
}

asio::awaitable<std::tuple<error_code, leader_state>> run_leader(std::shared_ptr<election_state> e,
                                                                  bool observe) {
    auto read = [&] {
        return call<void(error_code, leader_reading)>(
            [&](auto h) { e->service->read(e->name, std::move(h)); });
    };
    if (!observe) {
        auto [ec, r] = co_await read();
        co_return std::tuple{ec, std::move(r.leader)};
    }
    if (e->observing) co_return std::tuple{error_code(error::invalid_argument), leader_state{}};
    e->observing = true;
    struct done_observing {
        election_state& e;
        ~done_observing() { e.observing = false; }
    } done{*e};
    // Subscribed before the first read is sent, so no announcement after
    // that read is missed.
    if (!e->watch) e->watch = e->service->watch(e->name);
    for (;;) {
        auto [ec, r] = co_await read();
        if (ec) co_return std::tuple{ec, leader_state{}};
        if (e->filter.accept(r.leader)) co_return std::tuple{error_code{}, std::move(r.leader)};
        // Nobody announces a lease's end: a wait with the name locked is
        // capped at the lease left on the server.
        const auto cap = r.lease_left;
        auto w = e->watch;
        if (!w) co_return std::tuple{error_code(asio::error::operation_aborted), leader_state{}};
        auto [wec] = co_await call<void(error_code)>([&](auto h) { w->wait(cap, std::move(h)); });
        if (wec) co_return std::tuple{wec, leader_state{}};
    }
}

asio::awaitable<std::tuple<error_code, bool>> run_proclaim(std::shared_ptr<term_state> t,
                                                          std::string value) {
    if (t->resigned) co_return std::tuple{error_code(error::released), false};
    if (t->lock.lost()) co_return std::tuple{error_code(error::lock_lost), false};
    auto& e = *t->election;
    auto [ec] = co_await call<void(error_code)>([&](auto h) {
        e.service->proclaim(e.name, e.owner_id(), t->epoch, value, std::move(h));
    });
    if (!ec) t->value = std::move(value);
    co_return std::tuple{ec, true};
}

asio::awaitable<std::tuple<error_code, bool>> run_resign(std::shared_ptr<term_state> t) {
    if (t->resigned) co_return std::tuple{error_code(error::released), false};
    t->resigned = true;
    t->stop_watch.emit(asio::cancellation_type::terminal);
    // The release hands the name to the next candidate inside its script.
    auto [ec] = co_await t->lock.async_release(awaitable_tuple{});
    co_await call<void()>([&](auto h) {
        t->count(ec == error::lock_lost || t->lock.lost() ? term_event::lost : term_event::resigned,
                 std::move(h));
    });
    auto& e = *t->election;
    co_await call<void(error_code)>([&](auto h) {
        e.service->withdraw(e.name, e.owner_id(), t->epoch, std::move(h));
    });
    co_return std::tuple{ec, true};
}

}  // namespace

asio::any_io_executor election_executor(const std::shared_ptr<election_state>& e) noexcept {
    if (e && e->impl) return e->impl->get_executor();
    return asio::system_executor();
}

asio::any_io_executor term_executor(const std::shared_ptr<term_state>& t) noexcept {
    return election_executor(t ? t->election : nullptr);
}

void campaign_impl(const std::shared_ptr<election_state>& e, std::string value, lock_options opts,
                   asio::any_completion_handler<campaign_signature> h) {
    if (refused(e, h, leadership{})) return;
    if (value_too_long(value)) {
        complete_posted(std::move(h), election_executor(e), error_code(error::invalid_argument),
                        leadership{});
        return;
    }
    spawn<leadership>(e->strand, election_executor(e), run_campaign(e, std::move(value), opts),
                      std::move(h));
}

void leader_impl(const std::shared_ptr<election_state>& e, bool observe,
                 asio::any_completion_handler<leader_signature> h) {
    if (refused(e, h, leader_state{})) return;
    spawn<leader_state>(e->strand, election_executor(e), run_leader(e, observe), std::move(h));
}

void proclaim_impl(const std::shared_ptr<term_state>& t, std::string value,
                   asio::any_completion_handler<done_signature> h) {
    error_code ec;
    if (!t) ec = error::released;
    else if (value_too_long(value)) ec = error::invalid_argument;
    if (ec) return complete_posted(std::move(h), term_executor(t), ec);
    spawn<bool>(t->election->strand, term_executor(t), run_proclaim(t, std::move(value)),
                std::move(h));
}

void resign_impl(const std::shared_ptr<term_state>& t,
                 asio::any_completion_handler<done_signature> h) {
    if (!t) return complete_posted(std::move(h), term_executor(t), error_code(error::released));
    spawn<bool>(t->election->strand, term_executor(t), run_resign(t), std::move(h));
}

}  // namespace detail

// --- leadership ---

leadership& leadership::operator=(leadership&& other) noexcept {
    if (this != &other) {
        leadership dropped(std::move(*this));
        term_ = std::move(other.term_);
    }
    return *this;
}

leadership::~leadership() {
    if (!term_) return;
    try {
        const auto ex = term_->election->strand;
        asio::post(ex, [t = std::move(term_)] { t->resign_in_background(); });
    } catch (...) {
    }
}

leadership::operator bool() const noexcept { return term_ && term_->lock.owns_lock(); }
std::uint64_t leadership::epoch() const noexcept { return term_ ? term_->epoch : 0; }
const std::string& leadership::value() const noexcept {
    static const std::string none;
    return term_ ? term_->value : none;
}
leadership::clock::time_point leadership::lease_deadline() const noexcept {
    return term_ ? term_->lock.lease_deadline() : clock::time_point::min();
}
bool leadership::lost() const noexcept { return term_ && term_->lock.lost(); }
const guard& leadership::term_guard() const noexcept {
    return term_ ? term_->lock : detail::empty_guard();
}
asio::awaitable<void> leadership::until_lost() const { return term_guard().until_lost(); }

asio::awaitable<void> leadership::proclaim(std::string new_value) {
    auto [ec] = co_await async_proclaim(std::move(new_value), detail::awaitable_tuple{});
    if (ec) throw boost::system::system_error(ec, "proclaim");
}

asio::awaitable<error_code> leadership::resign() {
    auto [ec] = co_await async_resign(detail::awaitable_tuple{});
    co_return ec;
}

// --- election ---

election::election(const backend& b, std::string name) {
    std::string why;
    if (auto ec = validate_lock_name(name, why); ec) throw boost::system::system_error(ec, why);
    state_ = std::make_shared<detail::election_state>(b, std::move(name));
}

election& election::operator=(election&& other) noexcept {
    if (this != &other) {
        election dropped(std::move(*this));
        state_ = std::move(other.state_);
    }
    return *this;
}

election::~election() {
    if (!state_) return;
    try {
        const auto ex = state_->strand;
        // Closes the watch on the strand; when the io_context is destroyed
        // with this still queued, its destructor lets the watch go instead
        // (a subscription keeps itself alive until closed).
        struct closer {
            std::shared_ptr<detail::election_state> e;
            closer(std::shared_ptr<detail::election_state> s) : e(std::move(s)) {}
            closer(closer&&) noexcept = default;
            closer(const closer&) = delete;
            closer& operator=(const closer&) = delete;
            closer& operator=(closer&&) = delete;
            ~closer() {
                if (e && e->watch) e->watch->abandon();
            }
        };
        asio::post(ex, [c = closer(std::move(state_))] {
            if (auto w = std::move(c.e->watch)) w->close();
        });
    } catch (...) {
    }
}

const std::string& election::name() const noexcept {
    static const std::string none;
    return state_ ? state_->name : none;
}

asio::awaitable<leadership> election::campaign(std::string value, lock_options opts) {
    auto [ec, l] = co_await async_campaign(std::move(value), opts, detail::awaitable_tuple{});
    if (ec) throw boost::system::system_error(ec, "campaign for " + name());
    co_return std::move(l);
}

}  // namespace corolock
