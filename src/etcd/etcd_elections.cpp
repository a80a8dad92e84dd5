#include "etcd/etcd_elections.hpp"

#include "core/backoff.hpp"
#include "core/holder_record.hpp"
#include "core/leader_record.hpp"
#include "core/election_task.hpp"
#include "core/strand_leader_watch.hpp"
#include "etcd/etcd_backend.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <utility>

namespace corolock::detail::etcd {

namespace asio = boost::asio;

namespace {

// <prefix><len>:<NAME>: a prefix of the lock's keys and of the leader key.
std::string name_base(const std::string& prefix, std::string_view name) {
    auto base = lock_prefix(prefix, name);
    base.pop_back();  // the lock prefix's '/'
    return base;
}

std::string leader_key(const std::string& prefix, std::string_view name) {
    return name_base(prefix, name) + ":leader";
}

// A subscription: one etcd watch of the name's range (the lock's keys and
// the leader key), on the transport's strand. Every event, and the watch's
// creation (a change may have come before it was in place), is an
// announcement; a broken watch is one too, and is started again.
class etcd_watch final : public strand_leader_watch {
public:
    etcd_watch(std::shared_ptr<etcd_backend> b, std::string base)
        : strand_leader_watch(b->wire().get_executor(), b->get_executor()),
          backend_(std::move(b)),
          base_(std::move(base)),
          restart_timer_(strand()) {}

    ~etcd_watch() override {
        if (stream_) stream_->cancel();
    }

    void open() {
        asio::post(strand(), [self = weak_self(this).lock()] { self->start(); });
    }

private:
    bool backend_stopped() const noexcept override { return backend_->stopped(); }

    void on_close() noexcept override {
        restart_timer_.cancel();
        if (auto s = std::move(stream_)) s->cancel();
    }

    // Strand only.
    void start() {
        if (closed() || backend_->stopped()) return;
        watch_request req;
        req.key = base_;
        req.range_end = prefix_end(base_);
        const int gen = ++generation_;
        stream_ = backend_->wire().watch(
            std::move(req), [weak = weak_self(this), gen](error_code ec, watch_update u) {
                auto self = weak.lock();
                if (!self || self->generation_ != gen) return;
                self->on_update(ec, u);
            });
    }

    void on_update(error_code ec, const watch_update& u) {
        if (ec) {
            stream_.reset();
            if (closed() || ec == asio::error::operation_aborted) return;
            if (ec == error::client_stopped || backend_->stopped()) return end();
            // Broken: whatever came meanwhile is unknown; read again, and
            // watch again after a pause.
            announce();
            restart_timer_.expires_after(restart_.next());
            restart_timer_.async_wait([weak = weak_self(this)](error_code tec) {
                if (tec) return;
                if (auto w = weak.lock()) w->start();
            });
            return;
        }
        if (u.created) restart_.reset();
        if (u.created || !u.events.empty()) announce();
    }

    std::shared_ptr<etcd_backend> backend_;
    const std::string base_;
    asio::steady_timer restart_timer_;
    backoff restart_{std::chrono::milliseconds(200), std::chrono::seconds(5)};
    std::shared_ptr<watch_stream> stream_;
    int generation_ = 0;
};

}  // namespace

void etcd_elections::proclaim(std::string name, std::string owner, std::uint64_t epoch,
                              std::string value, done_handler h) {
    auto b = std::static_pointer_cast<etcd_backend>(backend_.shared_from_this());
    auto box = boxed(std::move(h));
    // The lock's key of this owner still carries the grant's put (its mod
    // revision is the token): the term is live on the server.
    txn_request req;
    req.compares.push_back({lock_prefix(prefix_, name) + owner, compare::target::mod_revision,
                            compare::op::equal, static_cast<std::int64_t>(epoch)});
    req.success.push_back(
        put_request{leader_key(prefix_, name), encode_leader_record(epoch, owner, value), 0});
    b->wire().txn(std::move(req), [b, box](error_code ec, txn_result r) {
        if (!ec && !r.succeeded) ec = error::lock_lost;
        complete_now(std::move(*box), false, b->get_executor(), ec);
    });
}

void etcd_elections::withdraw(std::string name, std::string owner, std::uint64_t epoch,
                              done_handler h) {
    auto b = std::static_pointer_cast<etcd_backend>(backend_.shared_from_this());
    auto box = boxed(std::move(h));
    auto key = leader_key(prefix_, name);
    range_request get;
    get.key = key;
    // Read the record, then delete it if it is the term's, guarded by the
    // mod revision read (a later term's proclaim in between is kept).
    b->wire().range(std::move(get), [b, box, key, owner = std::move(owner), epoch](
                                         error_code ec, range_result r) mutable {
        leader_record rec;
        if (ec || r.kvs.empty() || !decode_leader_record(r.kvs.front().value, rec) ||
            rec.owner != owner || rec.epoch != epoch)
            return complete_now(std::move(*box), false, b->get_executor(), ec);
        txn_request del;
        del.compares.push_back(
            {key, compare::target::mod_revision, compare::op::equal, r.kvs.front().mod_revision});
        del.success.push_back(delete_request{key, {}});
        b->wire().txn(std::move(del), [b, box](error_code dec, txn_result) {
            complete_now(std::move(*box), false, b->get_executor(), dec);
        });
    });
}

void etcd_elections::read(std::string name, read_handler h) {
    auto b = std::static_pointer_cast<etcd_backend>(backend_.shared_from_this());
    auto box = boxed(std::move(h));
    const auto lock = lock_prefix(prefix_, name);
    // One revision: the lock's first key (its holder) and the record.
    txn_request req;
    range_request first;
    first.key = lock;
    first.range_end = prefix_end(lock);
    first.sort_by_create_revision = true;
    first.limit = 1;
    req.success.push_back(std::move(first));
    range_request rec;
    rec.key = leader_key(prefix_, name);
    req.success.push_back(std::move(rec));
    b->wire().txn(std::move(req), [b, box, lock](error_code ec, txn_result r) {
        // A lease's end deletes the holder's key, which the watch hears: no
        // cap on an observer's wait.
        leader_reading out;
        const range_result* holder = nullptr;
        const range_result* stored = nullptr;
        if (!ec) {
            if (!r.succeeded || r.responses.size() != 2) ec = error::unexpected_reply;
            else {
                holder = std::get_if<range_result>(&r.responses[0]);
                stored = std::get_if<range_result>(&r.responses[1]);
                if (!holder || !stored) ec = error::unexpected_reply;
            }
        }
        leader_record recd;
        if (!ec && !holder->kvs.empty() && !stored->kvs.empty() &&
            decode_leader_record(stored->kvs.front().value, recd)) {
            const auto& kv = holder->kvs.front();
            const std::string_view owner = std::string_view(kv.key).substr(lock.size());
            if (owner == recd.owner && static_cast<std::uint64_t>(kv.mod_revision) == recd.epoch) {
                leader_info l;
                l.epoch = recd.epoch;
                l.value = std::string(recd.value);
                l.holder = parse_holder_record(kv.value, wall_clock_us());
                out.leader = std::move(l);
            }
        }
        if (ec) out = {};
        complete_now(std::move(*box), false, b->get_executor(), ec, std::move(out));
    });
}

std::shared_ptr<leader_watch> etcd_elections::watch(std::string name) {
    auto b = std::static_pointer_cast<etcd_backend>(backend_.shared_from_this());
    auto w = std::make_shared<etcd_watch>(std::move(b), name_base(prefix_, name));
    w->open();
    return w;
}

election_service* etcd_backend::elections() noexcept { return &elections_; }

}  // namespace corolock::detail::etcd
