#include <corolock/multi_lock.hpp>

#include "core/backend.hpp"  // normalize_options

#include <corolock/printable.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>

namespace corolock {

namespace asio = boost::asio;
using completion = asio::any_completion_handler<void(error_code)>;

namespace {
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

// One release of several members: every member is released at once, and
// `done` hears the first member's error (in their order) after the last
// answer.
struct release_round {
    release_round(std::size_t n, completion d) : errors(n), left(n), done(std::move(d)) {}
    std::vector<error_code> errors;
    std::atomic<std::size_t> left;
    completion done;
};

void release_all(std::vector<guard>& members, completion done) {
    auto round = std::make_shared<release_round>(members.size(), std::move(done));
    for (std::size_t i = 0; i < members.size(); ++i) {
        members[i].async_release([round, i](error_code ec) {
            round->errors[i] = ec;
            if (round->left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
            const auto failed = std::find_if(round->errors.begin(), round->errors.end(),
                                             [](const error_code& e) { return bool(e); });
            std::move(round->done)(failed == round->errors.end() ? error_code{} : *failed);
        });
    }
}

// Releases the members taken so far and waits for the answers (a failed
// acquire completes only once none of its names is held).
asio::awaitable<void> give_back(std::vector<guard> held) {
    co_await asio::async_initiate<decltype(use_nothrow), void(error_code)>(
        [&held](auto handler) { release_all(held, completion(std::move(handler))); }, use_nothrow);
}

// The caller's cancellation, passed on to the acquire's coroutine only once
// its body runs: Asio 1.81's co_spawn frame, cancelled before the body
// started, throws operation_aborted out of io_context::run() instead.
struct acquire_cancellation {
    asio::cancellation_signal signal;  // the coroutine's
    bool started = false;
    bool early = false;  // emitted before the body started
};

struct acquire_outcome {
    error_code ec;
    std::vector<guard> held;
};

// The members in canonical order, each waiting for what is left of the
// overall wait. Cancellation (any kind the caller emits) reaches the member
// acquire in flight; between members it is checked before the next starts.
asio::awaitable<acquire_outcome> acquire_in_order(std::shared_ptr<std::vector<mutex>> members,
                                                  bool try_once, lock_options opts,
                                                  std::shared_ptr<acquire_cancellation> cancel) {
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
    cancel->started = true;
    std::optional<std::chrono::steady_clock::time_point> deadline;
    if (!try_once && opts.wait) deadline = std::chrono::steady_clock::now() + *opts.wait;
    acquire_outcome out;
    out.held.reserve(members->size());
    for (auto& m : *members) {
        const auto cs = co_await asio::this_coro::cancellation_state;
        if (cancel->early || cs.cancelled() != asio::cancellation_type::none) {
            out.ec = asio::error::operation_aborted;
            break;
        }
        auto step = opts;
        step.wait = detail::remaining_wait(deadline, std::chrono::steady_clock::now());
        std::tuple<error_code, guard> r;
        if (try_once)
            r = co_await m.async_try_acquire(step, use_nothrow);
        else
            r = co_await m.async_acquire(step, use_nothrow);
        if (std::get<0>(r)) {
            out.ec = std::get<0>(r);
            break;
        }
        out.held.push_back(std::move(std::get<1>(r)));
    }
    // A member lost while a later one was awaited: the set was never held.
    if (!out.ec && std::any_of(out.held.begin(), out.held.end(), [](const guard& g) { return g.lost(); }))
        out.ec = error::lock_lost;
    if (out.ec && !out.held.empty()) co_await give_back(std::exchange(out.held, {}));
    co_return out;
}

// The multi_guard's lost watch: one until_lost per member; the first answer
// decides, and cancels the others.
struct lost_watch {
    explicit lost_watch(std::size_t n, completion h, asio::any_io_executor e)
        : signals(n), answered(n, false), handler(std::move(h)), ex(std::move(e)) {}
    std::vector<asio::cancellation_signal> signals;
    // Only a wait still pending is cancelled: an answered one's slot may
    // point into a lock state that is gone.
    std::vector<bool> answered;
    std::atomic<bool> decided{false};
    completion handler;
    asio::any_io_executor ex;
    asio::cancellation_slot caller_slot;

    void cancel_members() {
        for (std::size_t i = 0; i < signals.size(); ++i)
            if (!answered[i]) signals[i].emit(asio::cancellation_type::terminal);
    }
    void finish(std::size_t i, error_code ec) {
        answered[i] = true;
        if (decided.exchange(true, std::memory_order_acq_rel)) return;
        if (caller_slot.is_connected()) caller_slot.clear();
        cancel_members();
        detail::complete_now(std::move(handler), false, ex, ec);
    }
};
}  // namespace

namespace detail {
std::vector<std::string> canonical_names(std::vector<std::string> names) {
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
}

std::optional<std::chrono::steady_clock::duration> remaining_wait(
    std::optional<std::chrono::steady_clock::time_point> deadline,
    std::chrono::steady_clock::time_point now) {
    if (!deadline) return std::nullopt;
    return std::max<std::chrono::steady_clock::duration>(*deadline - now,
                                                         std::chrono::steady_clock::duration::zero());
}
}  // namespace detail

// ---- multi_guard ----

bool multi_guard::owns_lock() const noexcept {
    return std::any_of(members_.begin(), members_.end(), [](const guard& g) { return g.owns_lock(); });
}

std::vector<std::pair<std::string, std::uint64_t>> multi_guard::tokens() const {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    out.reserve(members_.size());
    for (const auto& g : members_) out.emplace_back(g.name(), g.token());
    return out;
}

std::uint64_t multi_guard::token(std::string_view name) const noexcept {
    for (const auto& g : members_)
        if (g.name() == name) return g.token();
    return 0;
}

multi_guard::clock::time_point multi_guard::lease_deadline() const noexcept {
    if (members_.empty()) return clock::time_point::min();
    auto earliest = clock::time_point::max();
    for (const auto& g : members_) earliest = std::min(earliest, g.lease_deadline());
    return earliest;
}

bool multi_guard::lost() const noexcept {
    return std::any_of(members_.begin(), members_.end(), [](const guard& g) { return g.lost(); });
}

asio::any_io_executor multi_guard::client_executor() const noexcept { return ex_; }

asio::any_io_executor multi_guard::executor() const noexcept {
    if (ex_) return ex_;
    return asio::system_executor();
}

void multi_guard::release_impl(completion handler, bool direct) {
    if (!owns_lock()) {
        detail::complete_posted(std::move(handler), ex_, error::released);
        return;
    }
    release_all(members_, [handler = std::move(handler), direct, ex = ex_](error_code ec) mutable {
        detail::complete_now(std::move(handler), direct, ex, ec);
    });
}

void multi_guard::until_lost_impl(completion handler) const {
    if (members_.empty()) {
        detail::complete_posted(std::move(handler), {}, error::released);
        return;
    }
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto watch = std::make_shared<lost_watch>(members_.size(), std::move(handler), ex_);
    if (slot.is_connected()) {
        watch->caller_slot = slot;
        slot.assign([w = std::weak_ptr<lost_watch>(watch)](asio::cancellation_type) {
            if (auto watch = w.lock()) watch->cancel_members();
        });
    }
    for (std::size_t i = 0; i < members_.size(); ++i) {
        members_[i].async_until_lost(asio::bind_cancellation_slot(
            watch->signals[i].slot(), [watch, i](error_code ec) { watch->finish(i, ec); }));
    }
}

asio::awaitable<void> multi_guard::until_lost() const {
    auto [ec] = co_await async_until_lost(use_nothrow);
    if (ec != error::lock_lost) throw boost::system::system_error(ec, "corolock: until_lost");
}

asio::awaitable<error_code> multi_guard::release() {
    auto [ec] = co_await async_release(use_nothrow);
    co_return ec;
}

// ---- multi_lock ----

multi_lock::multi_lock(const backend& b, std::vector<std::string> names) : executor_(b.get_executor()) {
    names = detail::canonical_names(std::move(names));
    if (names.empty())
        throw boost::system::system_error(error::invalid_argument, "multi_lock needs at least one name");
    // Two names the server locks as one (PostgreSQL: one advisory key) would
    // wait for each other inside one acquire: refused, naming both. (Taking
    // the key once would leave the second name's fence unbumped.)
    std::map<std::string, const std::string*> keys;
    for (const auto& n : names) {
        auto [it, fresh] = keys.emplace(detail::backend_access::impl(b)->exclusion_key(n), &n);
        if (!fresh)
            throw boost::system::system_error(
                error::invalid_argument, "multi_lock: '" + printable(*it->second) + "' and '" +
                                             printable(n) + "' are one lock on the server (" +
                                             it->first + "): take one of them");
    }
    members_ = std::make_shared<std::vector<mutex>>();
    members_->reserve(names.size());
    for (auto& n : names) members_->emplace_back(b, std::move(n));
}

std::vector<std::string> multi_lock::names() const {
    std::vector<std::string> out;
    out.reserve(members_->size());
    for (const auto& m : *members_) out.push_back(m.name());
    return out;
}

asio::any_io_executor multi_lock::executor() const noexcept { return executor_; }

void multi_lock::start(bool try_once, lock_options opts,
                       asio::any_completion_handler<acquire_signature> handler, bool direct) {
    std::string why;
    auto checked = opts;
    if (auto ec = detail::normalize_options(checked, why); ec) {
        detail::complete_posted(std::move(handler), executor_, ec, multi_guard{});
        return;
    }
    auto cancel = std::make_shared<acquire_cancellation>();
    auto slot = asio::get_associated_cancellation_slot(handler);
    if (slot.is_connected()) {
        slot.assign([cancel](asio::cancellation_type type) {
            if (cancel->started)
                cancel->signal.emit(type);
            else
                cancel->early = true;
        });
    }
    asio::co_spawn(
        executor_, acquire_in_order(members_, try_once, opts, cancel),
        asio::bind_cancellation_slot(
            cancel->signal.slot(), [handler = std::move(handler), direct, ex = executor_, slot](
                                       std::exception_ptr e, acquire_outcome out) mutable {
                if (slot.is_connected()) slot.clear();
                if (e) std::rethrow_exception(e);  // out of run(), as from any handler
                multi_guard g;
                if (!out.ec) g = multi_guard(std::move(out.held), ex);
                detail::complete_now(std::move(handler), direct, ex, out.ec, std::move(g));
            }));
}

asio::awaitable<multi_guard> multi_lock::acquire(lock_options opts) {
    auto [ec, g] = co_await async_acquire(opts, use_nothrow);
    if (ec) throw boost::system::system_error(ec, "corolock: acquire of a multi-lock");
    co_return std::move(g);
}

asio::awaitable<std::optional<multi_guard>> multi_lock::try_acquire(lock_options opts) {
    auto [ec, g] = co_await async_try_acquire(opts, use_nothrow);
    if (ec == error::lock_held) co_return std::nullopt;
    if (ec) throw boost::system::system_error(ec, "corolock: try_acquire of a multi-lock");
    co_return std::optional<multi_guard>(std::move(g));
}

}  // namespace corolock
