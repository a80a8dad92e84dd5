// The ZooKeeper backend's acquire operation (zk_backend.hpp describes the
// recipe): one create transaction, then, unless the node was alone, turns
// at listing the directory and watching the predecessor until it owns.
#include "zk/zk_backend.hpp"

#include "core/backoff.hpp"
#include "core/coroutine_backend.hpp"
#include "core/watchdog_schedule.hpp"
#include "zk/lock_recipe.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <zookeeper/zookeeper.h>

#include <string>
#include <vector>

namespace corolock::detail::zk {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

namespace {

std::string child_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }


struct acquire_op : waking_acquire<zk_backend>, std::enable_shared_from_this<acquire_op> {
    acquire_op(std::shared_ptr<zk_backend> b, std::shared_ptr<zk_lock_state> s, lock_options o,
               bool once, lock_backend::acquire_handler h, bool d)
        : waking_acquire(std::move(b), o, once, std::move(h), d), st(std::move(s)) {}

    std::shared_ptr<zk_lock_state> st;
    std::uint64_t waiter_id = 0;  // told of session events while registered

    // This attempt's node, while it waits or until its grant.
    std::string node;
    std::int64_t czxid = 0;  // 0: unknown (a node found again after a lost answer)
    std::uint64_t generation = 0;

    ~acquire_op() {
        if (waiter_id != 0) backend->remove_waiter(waiter_id);
    }

    void end_run() noexcept {
        if (waiter_id != 0) backend->remove_waiter(std::exchange(waiter_id, 0));
        waking_acquire::end_run();
    }

    // An attempt whose create's answer was lost and that is not known yet
    // to have made a node or not (find_attempt_node): its id, else "".
    std::string unresolved;

    // The attempt's node, deleted in the background; or, when its create's
    // answer was lost and the acquire ends before it found out, the node
    // the create may have made, looked for by its attempt id first (left, it
    // would live as long as the session and, once lowest, block every
    // waiter).
    void give_back() {
        backend->delete_in_background(std::exchange(node, {}), generation, cleanup);
        if (!unresolved.empty())
            backend->delete_attempt_in_background(st->dir, std::exchange(unresolved, {}),
                                                  generation, cleanup);
    }

    // Deleted before the caller hears lock_held or wait_timeout, so that it
    // can exit at once leaving nothing queued.
    asio::awaitable<void> give_back_now() {
        auto path = std::exchange(node, {});
        if (path.empty() || backend->stopped() || generation != backend->zk().generation())
            co_return;
        auto& zk = backend->zk();
        co_await ask<int>(backend->strand(), [&](auto h) { zk.remove(path, std::move(h)); });
    }

    bool wait_over() const {
        auto d = wait_deadline();
        return d && clock::now() >= *d;
    }
    // A try (try_once, or a zero wait): it does not wait for the lock, but
    // it waits for the session as long as the C client gives a connection
    // attempt (session_bound()), no longer.
    bool is_try() const { return try_once || (opts.wait && opts.wait->count() == 0); }
    clock::time_point session_bound() const { return started + backend->connect_bound(); }
    // The next look: at the wait's end (a try's: the session's bound, since
    // its wait ended as it began), and at least once a second anyway. Never
    // in the past for a try before its bound, so that a loop waiting for the
    // session waits for it instead of spending its rounds at once.
    clock::time_point next_look() const {
        auto until = clock::now() + std::chrono::seconds(1);
        if (is_try()) until = std::min(until, session_bound());
        else if (auto d = wait_deadline()) until = std::min(until, *d);
        return until;
    }

    asio::awaitable<void> run() {
        try {
            co_await run_inner();
        } catch (...) {
            give_back();
            complete(error::client_stopped, {});
        }
        end_run();
    }

    enum class step { granted, restart, finished };

    asio::awaitable<void> run_inner() {
        auto& zk = backend->zk();
        const auto& strand = backend->strand();
        const auto level = st->next_level++;
        const lease_terms terms{opts.lease,
                                opts.watchdog ? opts.renew_interval : clock::duration::zero()};

        // A re-entry: a write to the handle's own node mints its token.
        if (auto* t = st->live()) {
            const auto epoch = t->epoch;
            const auto sent = clock::now();
            auto [rc, stat] = co_await ask<int, node_stat>(strand, [&](auto h) {
                zk.set_data(st->node, backend->holder_value(), std::move(h));
            });
            t = st->live();
            if (t && t->epoch == epoch && !t->lost() && rc == ZOK &&
                clock::now() < backend->deadline_of(*st)) {
                if (abandoned) co_return;  // the level was never handed out
                this->count_grant(st->name, false);
                auto tt = backend->on_granted(st, level, terms, sent);
                co_return complete({}, make_guard(st, level, static_cast<std::uint64_t>(stat.mzxid),
                                                  std::move(tt)));
            }
            if (unanswered(rc) || rc == ZCLOSING) co_return complete(error_of(rc), {});
            // The node is gone (or the deadline passed): its tenure is lost,
            // told now if its node watch has not told it yet, so that the
            // grant below begins a tenure of its own. Take a new one below.
            if (t && t->epoch == epoch && !t->lost())
                backend->lose_tenure(st, rc == ZNONODE ? "its node was gone at a re-entry"
                                         : rc == ZOK   ? "its deadline passed at a re-entry"
                                                       : "a re-entry's write to its node failed");
        }

        waiter_id = backend->add_waiter([weak = weak_from_this()] {
            if (auto self = weak.lock()) self->poke();
        });
        bool contended = false;
        for (int round = 0; round < 1000; ++round) {
            if (abandoned || backend->stopped()) break;
            if (!zk.timing().connected()) {
                // Not connected (yet): a try waits for the session until
                // its bound, woken by the session's event.
                if (is_try() && clock::now() >= session_bound())
                    co_return complete(error::connection_lost, {});
                if (!(co_await wait_until(next_look()))) break;
                if (!is_try() && wait_over()) co_return complete(error::wait_timeout, {});
                continue;
            }
            const auto attempt = attempt_id(st->owner, ++st->attempts);
            generation = zk.generation();
            const auto sent = clock::now();
            bool alone = false;  // the node is its directory's only child
            {
                auto [rc, path, dir] = co_await ask<int, std::string, node_stat>(
                    strand, [&](auto h) {
                        zk.create_child(st->dir, node_prefix(attempt), backend->holder_value(),
                                        std::move(h));
                    });
                if (rc == ZNONODE) {
                    // The lock's directory is not there (first use, or the
                    // ensemble removed the empty container), or not even
                    // the ones above it: make them.
                    auto [drc] = co_await ask<int>(strand, [&](auto h) {
                        backend->make_dirs(st->dir, std::move(h));
                    });
                    if (drc != ZOK && !unanswered(drc)) co_return complete(error_of(drc), {});
                    continue;
                }
                if (unanswered(rc)) {
                    // Made or not: look for it by its attempt id once the
                    // session answers again. Until it is known, the
                    // attempt is unresolved: an acquire that ends meanwhile
                    // (cancelled, stopped, out of tries) leaves its clean-up
                    // to the background (give_back).
                    unresolved = attempt;
                    if (!(co_await find_attempt_node(attempt))) {
                        if (!unresolved.empty()) give_back();
                        continue;
                    }
                } else if (rc != ZOK) {
                    co_return complete(error_of(rc), {});
                } else {
                    node = path;
                    czxid = dir.mzxid;  // the transaction's zxid: the node's creation
                    alone = dir.num_children == 1;
                }
            }
            if (abandoned) break;
            if (alone) {
                // First in line by construction: every earlier node, and
                // every token minted on it, came before this creation.
                grant(level, terms, static_cast<std::uint64_t>(czxid), contended, sent);
                co_return;
            }
            const auto s = co_await take_turns(level, terms, contended);
            if (s != step::restart) co_return;
            give_back();
            if (!handler) co_return;  // answered (an error) or abandoned
        }
        give_back();
        if (backend->stopped()) complete(error::client_stopped, {});
        else if (!abandoned) complete(error::server_error, {});
    }

    // After a create whose answer was lost: the node, if the ensemble made
    // it in this session. False: not made (or its session is gone).
    asio::awaitable<bool> find_attempt_node(const std::string& attempt) {
        auto& zk = backend->zk();
        // Asked again after an unanswered look, jittered (core/backoff.hpp).
        backoff again(std::chrono::milliseconds(50), std::chrono::milliseconds(400));
        for (int i = 0; i < 100 && !abandoned && !backend->stopped(); ++i) {
            if (zk.generation() != generation) co_return false;
            if (!zk.timing().connected()) {
                if (is_try() && clock::now() >= session_bound()) co_return false;
                if (!(co_await wait_until(next_look()))) co_return false;
                continue;
            }
            auto [rc, kids, dir] = co_await ask<int, std::vector<std::string>, node_stat>(
                backend->strand(), [&](auto h) { zk.children(st->dir, std::move(h)); });
            if (unanswered(rc)) {
                if (!(co_await wait_until(clock::now() + again.next()))) co_return false;
                continue;
            }
            if (rc != ZOK) co_return false;
            unresolved.clear();  // an answer of the session after the create: made or not
            if (auto found = zk::find_attempt(kids, attempt)) {
                node = st->dir + "/" + *found;
                czxid = 0;  // unknown: the grant mints a token by a write
                co_return true;
            }
            co_return false;
        }
        co_return false;
    }

    // Lists the directory until this attempt owns the lock, fails, or must
    // start again (its node is gone).
    asio::awaitable<step> take_turns(std::uint64_t level, const lease_terms& terms,
                                     bool& contended) {
        auto& zk = backend->zk();
        const auto& strand = backend->strand();
        const auto mine = child_of(node);
        for (int turn = 0; turn < 1'000'000; ++turn) {
            if (abandoned || backend->stopped()) co_return step::restart;
            if (zk.generation() != generation) co_return step::restart;  // node expired
            if (!zk.timing().connected()) {
                // A try waits for the session (its node lives as long) until
                // its bound; a wait until its end.
                if (is_try() && clock::now() >= session_bound()) {
                    complete(error::connection_lost, {});
                    co_return step::restart;
                }
                if (!(co_await wait_until(next_look()))) co_return step::restart;
                if (!is_try() && wait_over()) co_return co_await time_out();
                continue;
            }
            const auto sent = clock::now();
            auto [rc, kids, dir] = co_await ask<int, std::vector<std::string>, node_stat>(
                strand, [&](auto h) { zk.children(st->dir, std::move(h)); });
            if (abandoned || backend->stopped()) co_return step::restart;
            if (unanswered(rc)) {
                // The connection dropped: the session event follows.
                if (!(co_await wait_until(clock::now() + std::chrono::milliseconds(50))))
                    co_return step::restart;
                continue;
            }
            if (rc == ZNONODE) co_return step::restart;
            if (rc != ZOK) {
                complete(error_of(rc), {});
                co_return step::restart;
            }
            const auto place = place_in_line(kids, mine);
            if (place.what == standing::kind::missing) co_return step::restart;
            if (place.what == standing::kind::owner) {
                std::uint64_t token = 0;
                auto decided = sent;
                if (czxid != 0 && creation_is_token(czxid, dir.pzxid)) {
                    token = static_cast<std::uint64_t>(czxid);
                } else {
                    decided = clock::now();
                    auto [src, stat] = co_await ask<int, node_stat>(strand, [&](auto h) {
                        zk.set_data(node, backend->holder_value(), std::move(h));
                    });
                    if (src == ZNONODE) co_return step::restart;
                    if (src != ZOK) {
                        complete(error_of(src), {});
                        co_return step::restart;
                    }
                    token = static_cast<std::uint64_t>(stat.mzxid);
                }
                grant(level, terms, token, contended, decided);
                co_return step::granted;
            }
            if (is_try()) {
                co_await give_back_now();
                complete(error::lock_held, {});
                co_return step::finished;
            }
            contended = true;
            // Watch the predecessor only; gone already: look again.
            auto [wrc, wstat] = co_await ask<int, node_stat>(strand, [&](auto h) {
                std::weak_ptr<acquire_op> weak = weak_from_this();
                zk.watch_data(st->dir + "/" + place.predecessor, std::move(h), [weak] {
                    if (auto self = weak.lock()) self->poke();
                });
            });
            (void)wstat;
            if (wrc == ZNONODE) continue;
            if (unanswered(wrc)) {
                if (!(co_await wait_until(clock::now() + std::chrono::milliseconds(50))))
                    co_return step::restart;
                continue;
            }
            if (wrc != ZOK) {
                complete(error_of(wrc), {});
                co_return step::restart;
            }
            if (!(co_await wait_until(next_look()))) co_return step::restart;
            if (wait_over()) co_return co_await time_out();
        }
        co_return step::restart;
    }

    asio::awaitable<step> time_out() {
        co_await give_back_now();
        complete(error::wait_timeout, {});
        co_return step::finished;
    }

    void grant(std::uint64_t level, const lease_terms& terms, std::uint64_t token, bool contended,
               clock::time_point decided) {
        auto& zk = backend->zk();
        auto deadline = zk.timing().deadline();
        if (terms.renew_every.count() == 0)
            deadline = std::min(deadline, watchdog_schedule::deadline_for(decided, terms.lease));
        if (abandoned || clock::now() >= deadline || generation != zk.generation()) {
            give_back();
            if (!abandoned) complete(error::lock_lost, {});
            return;
        }
        st->node = std::exchange(node, {});
        st->generation = generation;
        count_grant(st->name, contended);
        auto t = backend->on_granted(st, level, terms, decided);
        complete({}, make_guard(st, level, token, std::move(t)));
    }
};

}  // namespace

void zk_backend::acquire(const std::shared_ptr<lock_state>& base, const lock_options& opts,
                         const acquire_request&, bool try_once, acquire_handler handler,
                         bool direct) {
    start_acquire<acquire_op>(shared_from_this(), base, opts, try_once, std::move(handler), direct);
}

}  // namespace corolock::detail::zk
