#include "zk/zk_elections.hpp"

#include "core/backoff.hpp"
#include "core/holder_record.hpp"
#include "core/leader_record.hpp"
#include "core/election_task.hpp"
#include "core/strand_leader_watch.hpp"
#include "zk/lock_recipe.hpp"
#include "zk/zk_backend.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <zookeeper/zookeeper.h>

#include <memory>
#include <utility>

namespace corolock::detail::zk {

namespace asio = boost::asio;

namespace {

std::string leader_path(const std::string& dir) { return dir + "/leader"; }

using children_answer = std::tuple<int, std::vector<std::string>, node_stat>;
using data_answer = std::tuple<int, std::string, node_stat>;

asio::awaitable<children_answer> list(zk_backend& b, const std::string& dir) {
    return ask<int, std::vector<std::string>, node_stat>(
        b.strand(), [&b, dir](auto h) { b.zk().children(dir, std::move(h)); });
}

asio::awaitable<data_answer> get(zk_backend& b, const std::string& path) {
    return ask<int, std::string, node_stat>(
        b.strand(), [&b, path](auto h) { b.zk().get_data(path, std::move(h)); });
}

// The lock's holder node (the lowest contender) and its data and stat, or
// an empty name when nobody holds the lock.
struct holder_node {
    int rc = ZOK;
    std::string child;
    std::string data;
    node_stat stat;
};

asio::awaitable<holder_node> find_holder(zk_backend& b, const std::string& dir) {
    holder_node out;
    auto [rc, children, dstat] = co_await list(b, dir);
    if (rc == ZNONODE) co_return out;
    if (rc != ZOK) {
        out.rc = rc;
        co_return out;
    }
    auto child = lowest(children);
    if (child.empty()) co_return out;
    auto [grc, data, st] = co_await get(b, dir + "/" + child);
    if (grc == ZNONODE) co_return out;  // gone since the listing
    if (grc != ZOK) {
        out.rc = grc;
        co_return out;
    }
    out.child = std::move(child);
    out.data = std::move(data);
    out.stat = st;
    co_return out;
}

asio::awaitable<error_code> run_proclaim(std::shared_ptr<zk_backend> b, std::string dir,
                                         std::string owner, std::uint64_t epoch,
                                         std::string value) {
    // The term is live while the lowest contender is the owner's node and
    // still carries the grant's write (its mzxid is the token: an election
    // never re-enters). The write is one multi with a check of that node's
    // version, so a node changed or gone since is refused.
    auto h = co_await find_holder(*b, dir);
    if (h.rc != ZOK) co_return error_of(h.rc);
    if (h.child.empty() || owner_of(h.child) != owner ||
        h.stat.mzxid != static_cast<std::int64_t>(epoch))
        co_return error_code(error::lock_lost);
    const auto node = dir + "/" + h.child;
    const auto path = leader_path(dir);
    const auto record = encode_leader_record(epoch, owner, value);
    for (int attempt = 0; attempt < 2; ++attempt) {
        auto [rc] = co_await ask<int>(b->strand(), [&](auto done) {
            b->zk().checked_set(node, h.stat.version, path, record, std::move(done));
        });
        if (rc == ZOK) co_return error_code{};
        if (rc == ZBADVERSION) co_return error_code(error::lock_lost);
        if (rc != ZNONODE || attempt == 1)
            co_return rc == ZNONODE ? error_code(error::lock_lost) : error_of(rc);
        // The holder's node gone, or no leader node yet: make it, then once again.
        auto [crc, created, cst] = co_await ask<int, std::string, node_stat>(
            b->strand(), [&](auto done) { b->zk().create(path, {}, 0, std::move(done)); });
        if (crc == ZNONODE) co_return error_code(error::lock_lost);
        if (crc != ZOK && crc != ZNODEEXISTS) co_return error_of(crc);
    }
    co_return error_code(error::lock_lost);
}

asio::awaitable<error_code> run_withdraw(std::shared_ptr<zk_backend> b, std::string dir,
                                         std::string owner, std::uint64_t epoch) {
    const auto path = leader_path(dir);
    auto [rc, data, st] = co_await get(*b, path);
    if (rc == ZNONODE) co_return error_code{};
    if (rc != ZOK) co_return error_of(rc);
    leader_record r;
    if (!decode_leader_record(data, r) || r.owner != owner || r.epoch != epoch)
        co_return error_code{};
    // Emptied only at the version read: a later term's proclaim is kept.
    auto [src, sst] = co_await ask<int, node_stat>(b->strand(), [&](auto done) {
        b->zk().set_data(path, {}, std::move(done), st.version);
    });
    if (src != ZOK && src != ZBADVERSION && src != ZNONODE) co_return error_of(src);
    co_return error_code{};
}

asio::awaitable<std::tuple<error_code, leader_reading>> run_read(std::shared_ptr<zk_backend> b,
                                                                 std::string dir) {
    // The holder's session's end deletes its node, which the watch hears:
    // no cap on an observer's wait.
    leader_reading out;
    auto h = co_await find_holder(*b, dir);
    if (h.rc != ZOK) co_return std::tuple{error_of(h.rc), leader_reading{}};
    if (h.child.empty()) co_return std::tuple{error_code{}, std::move(out)};
    auto [rc, data, st] = co_await get(*b, leader_path(dir));
    if (rc == ZNONODE) co_return std::tuple{error_code{}, std::move(out)};
    if (rc != ZOK) co_return std::tuple{error_of(rc), leader_reading{}};
    leader_record r;
    if (decode_leader_record(data, r) && r.owner == owner_of(h.child) &&
        static_cast<std::int64_t>(r.epoch) == h.stat.mzxid) {
        leader_info l;
        l.epoch = r.epoch;
        l.value = std::string(r.value);
        l.holder = parse_holder_record(h.data, wall_clock_us());
        out.leader = std::move(l);
    }
    co_return std::tuple{error_code{}, std::move(out)};
}

// A subscription on the backend's strand: a child watch of the lock's
// directory (a candidate queued, a holder gone: released, broken, its
// session ended) and a data watch of the leader node (a proclaim, a
// withdrawal). ZooKeeper's watches fire once: each is set again as it
// fires, before the announcement is taken, so a read after it is ordered
// after the new watch in the session.
class zk_watch final : public strand_leader_watch {
public:
    zk_watch(std::shared_ptr<zk_backend> b, std::string dir)
        : strand_leader_watch(b->strand(), b->get_executor()),
          backend_(std::move(b)),
          dir_(std::move(dir)),
          retry_timer_(strand()) {}

    void open() {
        asio::post(strand(), [self = weak_self(this).lock()] { self->start(); });
    }

private:
    bool backend_stopped() const noexcept override { return backend_->stopped(); }
    void on_close() noexcept override { retry_timer_.cancel(); }

    // A session callback that runs `f` later on the strand (never inside
    // the C client), while this watch lives and is open.
    template <class F>
    auto later(F f) {
        return [weak = weak_self(this), ex = strand(), f](auto... args) {
            asio::post(ex, [weak, f, args...]() mutable {
                auto self = weak.lock();
                if (!self || self->over()) return;
                f(*self, std::move(args)...);
            });
        };
    }

    // Strand only. The directory and the leader node made (the node keeps
    // the container directory), then both watches set. Whatever changed
    // before they were set is unknown: an announcement.
    void start() {
        if (over()) return;
        backend_->make_dirs(dir_, later([](zk_watch& self, int rc) {
            if (rc != ZOK) return self.retry();
            self.backend_->zk().create(
                leader_path(self.dir_), {}, 0,
                self.later([](zk_watch& self, int crc, std::string, node_stat) {
                    if (crc != ZOK && crc != ZNODEEXISTS) return self.retry();
                    self.watch_children();
                    self.watch_leader();
                    self.announce();
                }));
        }));
    }

    void retry() {
        announce();
        retry_timer_.expires_after(pauses_.next());
        retry_timer_.async_wait([weak = weak_self(this)](error_code ec) {
            if (ec) return;
            if (auto w = weak.lock()) w->start();
        });
    }

    // Each watch set again as it fires, then the announcement.
    void watch_children() {
        backend_->zk().watch_children(
            dir_,
            later([](zk_watch& self, int rc, std::vector<std::string>, node_stat) {
                if (rc == ZOK) self.pauses_.reset();
                else self.retry();
            }),
            later([](zk_watch& self) {
                self.watch_children();
                self.announce();
            }));
    }

    void watch_leader() {
        backend_->zk().watch_data(leader_path(dir_), later([](zk_watch& self, int rc, node_stat) {
                                      if (rc != ZOK) self.retry();
                                  }),
                                  later([](zk_watch& self) {
                                      self.watch_leader();
                                      self.announce();
                                  }));
    }

    std::shared_ptr<zk_backend> backend_;
    const std::string dir_;
    asio::steady_timer retry_timer_;
    backoff pauses_{std::chrono::milliseconds(200), std::chrono::seconds(5)};
};

}  // namespace

void zk_elections::proclaim(std::string name, std::string owner, std::uint64_t epoch,
                            std::string value, done_handler h) {
    auto b = backend_.shared_from_this();
    run_election_task(
        b, run_proclaim(b, lock_dir(root_, name), std::move(owner), epoch, std::move(value)),
        std::move(h));
}

void zk_elections::withdraw(std::string name, std::string owner, std::uint64_t epoch,
                            done_handler h) {
    auto b = backend_.shared_from_this();
    run_election_task(b, run_withdraw(b, lock_dir(root_, name), std::move(owner), epoch),
                      std::move(h));
}

void zk_elections::read(std::string name, read_handler h) {
    auto b = backend_.shared_from_this();
    run_election_task(b, run_read(b, lock_dir(root_, name)), std::move(h));
}

std::shared_ptr<leader_watch> zk_elections::watch(std::string name) {
    auto w = std::make_shared<zk_watch>(backend_.shared_from_this(), lock_dir(root_, name));
    w->open();
    return w;
}

election_service* zk_backend::elections() noexcept { return &elections_; }

}  // namespace corolock::detail::zk
