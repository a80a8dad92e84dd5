#include "zk/zk_backend.hpp"

#include "core/coroutine_backend.hpp"
#include "core/holder_record.hpp"
#include "core/logging.hpp"
#include "core/watchdog_schedule.hpp"
#include "zk/lock_recipe.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <spdlog/spdlog.h>

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <optional>
#include <tuple>

namespace corolock::detail::zk {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

// ---- state ----

zk_lock_state::zk_lock_state(std::shared_ptr<lock_backend> b, std::string lock_name,
                             std::string lock_dir)
    : tenure_state(std::move(b), std::move(lock_name), random_owner_id()),
      dir(std::move(lock_dir)) {}

// ---- the backend ----

zk_backend::zk_backend(asio::any_io_executor ex, zk_options opts, const backend_config& settings)
    : tenure_backend(ex, settings),
      opts_(std::move(opts)),
      holder_argument_(holder_argument(opts_.holder_label)) {}

zk_backend::~zk_backend() {
    if (session_) session_->stop();
}

void zk_backend::start() {
    std::weak_ptr<zk_backend> weak = shared_from_this();
    session_ = std::make_shared<session>(strand_, opts_, *logger_, [weak](session::event e) {
        if (auto self = weak.lock()) self->on_session_event(e);
    });
    asio::post(strand_, [s = session_] { s->start(); });
}

void zk_backend::wake_for_stop() {
    auto waiters = waiters_;
    for (auto& [id, poke] : waiters) poke();
}

void zk_backend::stop_protocol() noexcept {
    // Closing the session deletes what it still holds.
    session_->stop();
}

std::shared_ptr<lock_state> zk_backend::make_state(std::string name, const lock_spec& spec) {
    if (spec.kind != lock_spec::kind_t::mutex)
        throw boost::system::system_error(
            error::invalid_argument,
            "the ZooKeeper backend offers corolock::mutex only (docs/backends.md)");
    auto dir = lock_dir(opts_.root, name);
    return std::make_shared<zk_lock_state>(shared_from_this(), std::move(name), std::move(dir));
}

std::string zk_backend::holder_value() const {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    return holder_record(std::chrono::duration_cast<std::chrono::microseconds>(now).count(),
                         holder_argument_);
}

std::uint64_t zk_backend::add_waiter(std::function<void()> poke) {
    const auto id = next_waiter_++;
    waiters_.emplace(id, std::move(poke));
    return id;
}

void zk_backend::remove_waiter(std::uint64_t id) noexcept { waiters_.erase(id); }

void zk_backend::on_session_event(session::event e) {
    if (e == session::event::expired) {
        // Every node of the old session is gone: its tenures are lost.
        for_each_held([this](const auto& st) { lose_tenure(st, "the ZooKeeper session expired"); });
    }
    if (e == session::event::expired) {  // its nodes went with it
        undeleted_.clear();
        unfound_.clear();
    }
    if (e == session::event::connected) {
        // Node watches that could not be set while the connection was down,
        // and deletes that went unanswered: again now that the session answers.
        for_each_held([this](const auto& st) {
            watch_node(std::static_pointer_cast<zk_lock_state>(st));
        });
        auto undeleted = std::exchange(undeleted_, {});
        for (auto& [path, generation] : undeleted) delete_in_background(path, generation);
        auto unfound = std::exchange(unfound_, {});
        for (auto& [where, generation] : unfound)
            delete_attempt_in_background(where.first, where.second, generation);
    }
    if (e != session::event::suspended) {
        auto waiters = waiters_;
        for (auto& [id, poke] : waiters) poke();
    }
}

clock::time_point zk_backend::deadline_of(const zk_lock_state& st) const noexcept {
    if (st.generation != session_->generation()) return clock::time_point::min();
    return std::min(session_->timing().deadline(), st.lease_end);
}

std::shared_ptr<tenure> zk_backend::on_granted(const std::shared_ptr<zk_lock_state>& st,
                                               std::uint64_t level, const lease_terms& terms,
                                               clock::time_point decided_sent) {
    // A re-entry's create or setData counts its own lease from its request
    // (watchdog off): every term joins.
    auto joined = begin_or_join(*st, level, terms, reentry_terms::all);
    auto t = std::move(joined.t);
    if (joined.began) {
        st->lease_end = clock::time_point::max();
        hold(st);
    }
    // With the watchdog off the lease ends by itself, counted from the
    // request that decided this grant; a re-entry extends it.
    if (t->terms.renew_every.count() == 0) {
        const auto end = watchdog_schedule::deadline_for(decided_sent, terms.lease);
        st->lease_end = st->lease_end == clock::time_point::max() ? end
                                                                  : std::max(st->lease_end, end);
    } else {
        st->lease_end = clock::time_point::max();
    }
    t->publish_deadline(deadline_of(*st));
    arm_deadline(st, t->epoch);
    watch_node(st);
    return t;
}

void zk_backend::watch_node(const std::shared_ptr<zk_lock_state>& st) {
    auto* t = st->live();
    if (!t || st->node_watched || st->node.empty() || stopped() ||
        st->generation != session_->generation())
        return;
    st->node_watched = true;
    // The tenure whose node this is, while it lasts.
    auto current = [weak = std::weak_ptr<zk_lock_state>(st), epoch = t->epoch,
                    path = st->node]() -> std::shared_ptr<zk_lock_state> {
        auto s = weak.lock();
        if (!s) return nullptr;
        const auto* live = s->live();
        if (!live || live->epoch != epoch || s->node != path) return nullptr;
        return s;
    };
    auto self = shared_from_this();
    session_->watch_data(
        st->node,
        [this, self, current](int rc, node_stat) {
            asio::post(strand_, [this, self, current, rc] {
                auto s = current();
                if (!s || rc == ZOK) return;
                s->node_watched = false;  // not set: again at the next connection
                if (rc == ZNONODE) lose_tenure(s, "its node was deleted (corolock break, or by hand)");
            });
        },
        // Changed (a re-entry's write), deleted, or the session ended: look
        // again (a node that is gone answers ZNONODE).
        [this, self, current] {
            asio::post(strand_, [this, self, current] {
                auto s = current();
                if (!s) return;
                s->node_watched = false;
                watch_node(s);
            });
        });
}

void zk_backend::on_tenure_end(const std::shared_ptr<tenure_state>& st) noexcept {
    static_cast<zk_lock_state&>(*st).node_watched = false;  // a watch still set fires for nobody
}

void zk_backend::give_back(const std::shared_ptr<tenure_state>& base) {
    auto& st = static_cast<zk_lock_state&>(*base);
    delete_in_background(std::exchange(st.node, {}), st.generation);
}

clock::time_point zk_backend::deadline_now(const tenure_state& st) const noexcept {
    return deadline_of(static_cast<const zk_lock_state&>(st));
}

clock::duration zk_backend::deadline_recheck() const noexcept {
    // Once per heartbeat interval: the published deadline follows the
    // session's (which each answered heartbeat moves) before it passes.
    return std::max<clock::duration>(session_->timing().heartbeat_interval(),
                                     std::chrono::milliseconds(10));
}

const char* zk_backend::deadline_passed(const tenure_state& st, clock::time_point now) const {
    return static_cast<const zk_lock_state&>(st).lease_end <= now
               ? "its lease ended (watchdog off)"
               : "no answer from the ensemble within the session timeout";
}

void zk_backend::delete_in_background(std::string path, std::uint64_t generation,
                                      const background_work::job& parent) {
    if (path.empty() || stopped() || generation != session_->generation()) return;
    delete_attempt(std::move(path), generation, work_->begin_with(parent), retry_pauses());
}

void zk_backend::delete_attempt(std::string path, std::uint64_t generation,
                                background_work::job job, retry tries) {
    session_->remove(path, [this, self = shared_from_this(), path, generation, job,
                            tries](int rc) mutable {
        // A lost answer: the node may still be there while its session
        // lives. Try again, a few times, a little later; after that, at each
        // reconnection of the same session (an outage without a quorum can
        // outlast any fixed run of tries, and the session outlives it).
        if (unanswered(rc) && !stopped() && generation == session_->generation()) {
            if (tries.left > 0) {
                const auto wait = take_try(tries);  // before the copy below
                after_pause(wait, [this, self, path = std::move(path), generation, job,
                                    tries]() mutable {
                    delete_attempt(std::move(path), generation, job, tries);
                });
                return;
            }
            log().warn("zookeeper: no answer to deleting {}; trying again once reconnected",
                       escaped{path});
            undeleted_.emplace(std::move(path), generation);
        }
        work_->end(job);
    });
}

zk_backend::retry zk_backend::retry_pauses() {
    // From 100 ms, doubling to 1 s, with jitter (core/backoff.hpp): 20
    // tries span 10-17 s; after them, each reconnection tries again.
    return {detail::backoff(std::chrono::milliseconds(100), std::chrono::seconds(1)), 20};
}

std::chrono::steady_clock::duration zk_backend::take_try(retry& tries) {
    --tries.left;
    return tries.pauses.next();
}

void zk_backend::after_pause(std::chrono::steady_clock::duration wait, std::function<void()> f) {
    auto timer = std::make_shared<asio::steady_timer>(strand_);
    timer->expires_after(wait);
    timer->async_wait([timer, f = std::move(f)](error_code) { f(); });
}

void zk_backend::delete_attempt_in_background(std::string dir, std::string attempt,
                                              std::uint64_t generation,
                                              const background_work::job& parent) {
    if (stopped() || generation != session_->generation()) return;
    find_attempt_to_delete(std::move(dir), std::move(attempt), generation,
                           work_->begin_with(parent), retry_pauses());
}

void zk_backend::find_attempt_to_delete(std::string dir, std::string attempt,
                                        std::uint64_t generation, background_work::job job,
                                        retry tries) {
    session_->children(dir, [this, self = shared_from_this(), dir, attempt, generation, job,
                             tries](int rc, std::vector<std::string> kids, node_stat) mutable {
        if (stopped() || generation != session_->generation()) {
            work_->end(job);  // the session's ephemeral nodes went with it
            return;
        }
        if (unanswered(rc)) {
            // As delete_attempt: a few tries, then at each reconnection.
            if (tries.left > 0) {
                const auto wait = take_try(tries);  // before the copy below
                after_pause(wait, [this, self, dir = std::move(dir), attempt = std::move(attempt),
                                    generation, job, tries]() mutable {
                    find_attempt_to_delete(std::move(dir), std::move(attempt), generation, job,
                                           tries);
                });
                return;
            }
            log().warn("zookeeper: no answer to listing {}; looking for attempt {} again once "
                       "reconnected", escaped{dir}, escaped{attempt});
            unfound_.emplace(std::make_pair(std::move(dir), std::move(attempt)), generation);
        } else if (rc == ZOK) {
            if (auto found = zk::find_attempt(kids, attempt)) {
                delete_attempt(dir + "/" + *found, generation, job, retry_pauses());  // ends the job
                return;
            }
        }
        // Not there (never made), or no directory: nothing to delete.
        work_->end(job);
    });
}

void zk_backend::make_dirs(const std::string& dir, std::function<void(int rc)> done) {
    // The lock's own directory alone once the ancestors are known to be
    // there; NONODE for it: they are gone, all again.
    if (ancestors_made_) {
        session_->create(dir, {}, ZOO_CONTAINER, [this, self = shared_from_this(), dir,
                                                  done = std::move(done)](int rc, std::string,
                                                                          node_stat) mutable {
            if (rc != ZNONODE) return done(rc == ZNODEEXISTS ? ZOK : rc);
            ancestors_made_ = false;
            make_dirs(dir, std::move(done));
        });
        return;
    }
    // Each ancestor in turn, from the top; "exists" counts as made.
    auto steps = std::make_shared<std::vector<std::string>>();
    for (auto pos = dir.find('/', 1); pos != std::string::npos; pos = dir.find('/', pos + 1))
        steps->push_back(dir.substr(0, pos));
    steps->push_back(dir);
    auto next = std::make_shared<std::function<void(std::size_t)>>();
    *next = [this, self = shared_from_this(), steps, next, done = std::move(done)](std::size_t i) {
        if (i == steps->size()) {
            ancestors_made_ = true;
            auto d = done;
            *next = nullptr;  // breaks the cycle
            return d(ZOK);
        }
        const int flags = i + 1 == steps->size() ? ZOO_CONTAINER : 0;
        session_->create((*steps)[i], {}, flags, [next, done, i](int rc, std::string, node_stat) {
            if (rc != ZOK && rc != ZNODEEXISTS) {
                auto d = done;
                *next = nullptr;
                return d(rc);
            }
            (*next)(i + 1);
        });
    };
    (*next)(0);
}


// ---- release ----

void zk_backend::release(const std::shared_ptr<lock_state>& base, std::uint64_t level,
                         std::shared_ptr<const tenure> t, release_handler handler, bool direct) {
    auto st = std::static_pointer_cast<zk_lock_state>(base);
    auto finish = [this, st, direct](release_handler h, error_code ec) {
        answer_release(*st, std::move(h), direct, ec);
    };
    const bool expired = clock::now() >= deadline_of(*st);
    const auto step = take_level(*st, level, *t);
    if (step == release_step::later_tenure) return finish(std::move(handler), error::lock_lost);
    if (step == release_step::gone) {
        // The tenure ended without this release: the directory says how.
        // Held by another owner: not_owner; by nobody: expired.
        auto h = std::make_shared<release_handler>(std::move(handler));
        session_->children(st->dir, [finish, h](int rc, std::vector<std::string> kids,
                                                node_stat) mutable {
            error_code result = error::expired;
            if (rc != ZOK && rc != ZNONODE)
                result = error_of(rc);
            else if (!lowest(kids).empty())
                result = error::not_owner;
            finish(std::move(*h), result);
        });
        return;
    }
    if (step == release_step::more_levels)
        return finish(std::move(handler), expired ? error_code(error::expired) : error_code{});
    const auto path = std::exchange(st->node, {});
    const auto generation = st->generation;
    end_tenure(st);
    if (generation != session_->generation())
        return finish(std::move(handler), error::expired);
    auto h = std::make_shared<release_handler>(std::move(handler));
    session_->remove(path, [this, self = shared_from_this(), finish, expired, path, generation,
                            h](int rc) mutable {
        error_code result = expired ? error_code(error::expired) : error_code{};
        if (rc == ZNONODE)
            result = error::expired;
        else if (rc != ZOK)
            result = error_of(rc);
        // Answer lost: delete it once the session answers again.
        if (unanswered(rc)) delete_in_background(path, generation);
        finish(std::move(*h), result);
    });
}

std::shared_ptr<lock_backend> connect(asio::any_io_executor ex, std::string_view url,
                                      const backend_config& settings) {
    zk_options o;
    std::string why;
    if (auto ec = parse_url(url, o, why); ec) throw boost::system::system_error(ec, why);
    o.holder_label = settings.holder_label;
    auto b = std::make_shared<zk_backend>(std::move(ex), std::move(o), settings);
    b->start();
    return b;
}

}  // namespace corolock::detail::zk
