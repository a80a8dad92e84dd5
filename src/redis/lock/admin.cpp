#include <corolock/admin.hpp>

#include <corolock/command.hpp>
#include <corolock/detail/completion.hpp>
#include "core/listed_locks.hpp"
#include "redis/connection/client_impl.hpp"
#include "redis/topology/cluster_router.hpp"
#include "redis/lock/redis_backend.hpp"
#include "redis/lock/lock_service.hpp"
#include "redis/lock/scripts.hpp"
#include "redis/lock/fair_scripts.hpp"
#include "redis/lock/semaphore_scripts.hpp"
#include "redis/lock/shared_scripts.hpp"
#include "core/holder_record.hpp"
#include "core/lock_delay.hpp"
#include "core/logging.hpp"
#include <corolock/mutex.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <tuple>
#include <unordered_set>
#include <utility>

namespace corolock {

namespace asio = boost::asio;

namespace {

// One admin operation. Its handler is completed exactly once, on the
// client's strand: by the script's reply, or earlier by cancellation. The
// script's own completion may then arrive later and finds nothing to do.
template <class... Results>
struct admin_op : std::enable_shared_from_this<admin_op<Results...>> {
    using handler_type = asio::any_completion_handler<void(error_code, Results...)>;

    admin_op(handler_type h, asio::any_io_executor fallback)
        : handler(std::move(h)), fallback_executor(std::move(fallback)) {}

    handler_type handler;
    asio::any_io_executor fallback_executor;

    // An answer known inside the initiating call, before any cancellation
    // slot was assigned.
    void complete_posted(error_code ec) {
        auto h = std::move(handler);
        handler = {};
        detail::complete_posted(std::move(h), fallback_executor, ec, Results{}...);
    }

    void complete(error_code ec, Results... results) {
        if (!handler) return;
        auto slot = asio::get_associated_cancellation_slot(handler);
        if (slot.is_connected()) slot.clear();
        auto h = std::move(handler);
        handler = {};
        detail::complete_now(std::move(h), false, fallback_executor, ec, std::move(results)...);
    }
};

// Parses a script's reply into the operation's results; returns an error
// for a reply of the wrong shape.
template <class... Results>
using reply_parser = std::function<error_code(const reply&, Results&...)>;

template <class... Results>
void run_admin_script(const std::shared_ptr<detail::client_impl>& impl, std::string name,
                      const detail::script& s, std::vector<std::string> keys,
                      std::vector<std::string> args, bool idempotent,
                      reply_parser<Results...> parse,
                      typename admin_op<Results...>::handler_type handler,
                      std::string why = {}) {
    auto op = std::make_shared<admin_op<Results...>>(std::move(handler), impl->get_executor());

    // `why` arrives non-empty when the caller already found an argument bad.
    error_code ec = why.empty() ? validate_lock_name(name, why) : error::invalid_argument;
    if (ec) {
        impl->log().debug("admin {}: {}", s.name, detail::escaped{why});
        op->complete_posted(ec);
        return;
    }

    auto slot = asio::get_associated_cancellation_slot(op->handler);
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<admin_op<Results...>>(op),
                     strand = impl->strand()](asio::cancellation_type type) {
            if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
                asio::cancellation_type::none)
                return;
            // Posted: completing clears the slot, which must not happen from
            // inside the slot's own handler.
            asio::post(strand, [weak] {
                if (auto o = weak.lock()) o->complete(asio::error::operation_aborted, Results{}...);
            });
        });
    }

    asio::post(impl->strand(), [impl, op, &s, keys = std::move(keys), args = std::move(args),
                                idempotent, parse = std::move(parse)]() mutable {
        if (impl->stopped()) {
            op->complete(error::client_stopped, Results{}...);
            return;
        }
        auto svc = detail::lock_service::of(*impl);
        const std::vector<std::string_view> key_views(keys.begin(), keys.end());
        const std::vector<std::string_view> arg_views(args.begin(), args.end());
        svc->run_script(s, key_views, arg_views, idempotent,
                        [op, parse = std::move(parse)](error_code ec, reply r) {
                            std::tuple<Results...> results{};
                            if (!ec) {
                                ec = std::apply(
                                    [&](Results&... out) { return parse(r, out...); }, results);
                            }
                            std::apply(
                                [&](Results&... out) { op->complete(ec, std::move(out)...); },
                                results);
                        });
    });
}

bool is_integer(const reply& r) noexcept { return r.type == resp3_type::integer; }

// A Lua string comes back as a bulk string (an empty one included).
bool is_text(const reply& r) noexcept { return r.is_string(); }

}  // namespace

namespace detail {

namespace {

std::optional<lock_type> parse_lock_type(std::string_view kind) noexcept {
    if (kind == "mutex") return lock_type::mutex;
    if (kind == "fair") return lock_type::fair_mutex;
    if (kind == "shared") return lock_type::shared_mutex;
    if (kind == "semaphore") return lock_type::semaphore;
    return std::nullopt;
}

std::uint64_t count_of(const reply& r) noexcept {
    return r.integer > 0 ? static_cast<std::uint64_t>(r.integer) : 0;
}

// One of a semaphore's owners: {owner, grants, permits, lease left ms,
// holder or ''}.
bool parse_owner(const reply& r, std::int64_t now_us, lock_owner_status& out) {
    const auto& e = r.elements;
    if (r.type != resp3_type::array || e.size() != 5 || !is_text(e[0]) || !is_integer(e[1]) ||
        !is_integer(e[2]) || !is_integer(e[3]) || !is_text(e[4]))
        return false;
    out.owner = e[0].str;
    out.levels = e[1].integer;
    out.permits = count_of(e[2]);
    out.ttl = std::chrono::milliseconds(e[3].integer);
    out.holder = parse_holder_record(e[4].str, now_us);
    return true;
}

// The status and break scripts' reply (scripts.cpp, describe): {kind, held,
// owner or '', pttl, levels, last token, holder or '', server time in µs,
// queued, capacity, permits in use, holder count, owners, lock-delay in ms}.
error_code parse_description(const reply& r, lock_status& out) {
    const auto& e = r.elements;
    if (r.type != resp3_type::array || e.size() != 14 || !is_text(e[0]) || !is_text(e[2]) ||
        !is_text(e[6]) || e[12].type != resp3_type::array)
        return error::unexpected_reply;
    for (const std::size_t i : {1, 3, 4, 5, 7, 8, 9, 10, 11, 13})
        if (!is_integer(e[i])) return error::unexpected_reply;
    const auto type = parse_lock_type(e[0].str);
    if (!type) return error::unexpected_reply;
    out.type = *type;
    out.held = e[1].integer != 0;
    out.owner = out.held ? e[2].str : std::string();
    const auto pttl = e[3].integer;
    // PTTL: -1 means the key exists without a TTL, -2 that it is gone.
    out.ttl = std::chrono::milliseconds(!out.held || pttl == -2 ? 0 : pttl);
    out.levels = out.held ? e[4].integer : 0;
    out.last_token = count_of(e[5]);
    const auto now_us = e[7].integer;
    // A field of another shape (written by hand) leaves the holder absent.
    if (out.held) out.holder = parse_holder_record(e[6].str, now_us);
    out.queued = count_of(e[8]);
    out.capacity = static_cast<std::uint32_t>(
        std::min<std::uint64_t>(count_of(e[9]), std::numeric_limits<std::uint32_t>::max()));
    out.permits_in_use = count_of(e[10]);
    out.holder_count = count_of(e[11]);
    if (out.held) {
        out.lock_delay = std::chrono::milliseconds(count_of(e[13]));
        out.delayed_for = detail::delayed_for(out.ttl, out.lock_delay);
    }
    out.holders.resize(std::min(e[12].elements.size(), max_listed_lock_owners));
    for (std::size_t i = 0; i < out.holders.size(); ++i)
        if (!parse_owner(e[12].elements[i], now_us, out.holders[i])) return error::unexpected_reply;
    return {};
}

void lock_status_for(const std::shared_ptr<client_impl>& impl, std::string name,
                     lock_status_handler handler) {
    const lock_keys keys(name, extra_keys::queue);
    const lock_keys lease_keys(name, extra_keys::leases);
    run_admin_script<lock_status>(
        impl, std::move(name), status_script(),
        {std::string(keys.lock()), std::string(keys.fence()), std::string(keys.entries()),
         std::string(lease_keys.leases())},
        {},
        /*idempotent=*/true, reply_parser<lock_status>(&parse_description),
        std::move(handler));
}

// The token-state script's reply (scripts.cpp, token_state_lua): {held,
// the fence counter's decimal text}; only `held` and `last_token` are set.
error_code parse_token_state(const reply& r, lock_status& out) {
    const auto& e = r.elements;
    if (r.type != resp3_type::array || e.size() != 2 || !is_integer(e[0]) || !is_text(e[1]))
        return error::unexpected_reply;
    const std::string_view t = e[1].str;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), out.last_token);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size())
        return error::unexpected_reply;
    out.held = e[0].integer != 0;
    return {};
}

void break_lock_for(const std::shared_ptr<client_impl>& impl, std::string name,
                    lock_status_handler handler) {
    const lock_keys keys(name, extra_keys::queue);
    const lock_keys lease_keys(name, extra_keys::leases);
    // Not idempotent: a re-sent break could remove the next holder's lock.
    run_admin_script<lock_status>(
        impl, std::move(name), break_script(impl->sharded_pubsub()),
        {std::string(keys.lock()), std::string(keys.fence()), std::string(keys.entries()),
         std::string(lease_keys.leases())},
        {std::string(keys.channel())}, /*idempotent=*/false,
        reply_parser<lock_status>(&parse_description), std::move(handler));
}

}  // namespace

// The seam (core/backend.hpp), on the client behind this backend: its
// cluster front on a Cluster.
void redis_backend::admin_status(std::string name, status_handler handler) {
    lock_status_for(client().shared_from_this(), std::move(name), std::move(handler));
}

// One small read-only script instead of the whole status (status and
// break's describe() only for a semaphore or a shared mutex).
void redis_backend::admin_token_state(std::string name, status_handler handler) {
    const lock_keys keys(name, extra_keys::queue);
    const lock_keys lease_keys(name, extra_keys::leases);
    run_admin_script<lock_status>(
        client().shared_from_this(), std::move(name), token_state_script(),
        {std::string(keys.lock()), std::string(keys.fence()), std::string(keys.entries()),
         std::string(lease_keys.leases())},
        {},
        /*idempotent=*/true, reply_parser<lock_status>(&parse_token_state), std::move(handler));
}

void redis_backend::admin_break(std::string name, status_handler handler) {
    break_lock_for(client().shared_from_this(), std::move(name), std::move(handler));
}

namespace {

// A release script's {status, receivers} as release_owner's result; `held`:
// whether the lock was held (by anyone) when its kind was read.
error_code release_result(const reply& r, bool held) {
    if (r.type != resp3_type::array || r.elements.size() != 2 || !is_integer(r.elements[0]))
        return error::unexpected_reply;
    switch (static_cast<release_status>(r.elements[0].integer)) {
    case release_status::released:
    // With every level named at once, 2 and 3 cannot come back; were they
    // to, the owner's levels are gone or going, which is success.
    case release_status::level_released:
    case release_status::already_released: return {};
    // A semaphore's release cannot tell "nobody" from "not this owner".
    case release_status::expired: return held ? error::not_owner : error::expired;
    case release_status::not_owner: return error::not_owner;
    }
    return error::unexpected_reply;
}

// The owner's every level (grant) released by its kind's own release
// script, as that kind's handles give up a lost lease.
void release_as(const std::shared_ptr<client_impl>& impl, std::string name, std::string owner,
                const lock_status& st, asio::any_completion_handler<void(error_code)> handler) {
    const lock_keys keys(name, extra_keys::queue);
    const bool shard = impl->sharded_pubsub();
    std::vector<std::string> key_list{std::string(keys.lock())};
    std::vector<std::string> args{std::move(owner), std::string(all_levels)};
    const script* s = &release_script(shard);
    switch (st.type) {
    case lock_type::mutex: key_list.emplace_back(keys.channel()); break;
    case lock_type::fair_mutex:
        s = &fair_release_script(shard);
        key_list.insert(key_list.end(), {std::string(keys.fence()), std::string(keys.queue()),
                                         std::string(keys.entries())});
        args.emplace_back(keys.channel());
        break;
    case lock_type::semaphore:
    case lock_type::shared_mutex: {
        s = st.type == lock_type::semaphore ? &semaphore_release_script(shard)
                                            : &shared_release_script(shard);
        const lock_keys lease_keys(name, extra_keys::leases);
        key_list.insert(key_list.end(),
                        {std::string(lease_keys.leases()), std::string(keys.channel())});
        break;
    }
    }
    reply_parser<> parse = [held = st.held](const reply& r) { return release_result(r, held); };
    run_admin_script<>(impl, std::move(name), *s, std::move(key_list), std::move(args),
                       /*idempotent=*/true, std::move(parse), std::move(handler));
}

}  // namespace

void redis_backend::admin_release_owner(std::string name, std::string owner,
                                        release_handler handler) {
    auto impl = client().shared_from_this();
    // The kind first (read-only), then its release. Each kind's scripts
    // refuse the others' hashes, so a kind changing in between is harmless.
    auto slot = asio::get_associated_cancellation_slot(handler);
    lock_status_for(
        impl, name,
        asio::bind_cancellation_slot(
            slot, [impl, name, owner = std::move(owner),
                   h = std::move(handler)](error_code ec, lock_status st) mutable {
                if (ec)
                    detail::complete_now(std::move(h), false, impl->get_executor(), ec);
                else
                    release_as(impl, std::move(name), std::move(owner), st, std::move(h));
            }));
}

namespace {

// One async_list_locks: SCAN steps, each followed by a status script per
// lock key it returned, all on the client's strand. Completion (and
// cancellation) go through an admin_op, as for the single-lock tools.
//
// On a Cluster the front has no connection of its own and would send a
// keyless SCAN to one primary only: a PING through it first waits for the
// slot map, then each primary of the map is scanned in turn over a
// connection of this listing's own (sharing the front's strand, stopped
// with the listing); the status scripts go through the front, to the node
// of their key's slot.
class list_op : public std::enable_shared_from_this<list_op> {
public:
    list_op(std::shared_ptr<client_impl> impl, lock_list_options o, lock_list_handler h)
        : impl_(std::move(impl)), options_(with_list_defaults(std::move(o))),
          op_(std::make_shared<admin_op<lock_list>>(std::move(h), impl_->get_executor())) {
        // A lock-only client's replies are capped at 1024 elements.
        options_.count_per_step = std::min<std::size_t>(options_.count_per_step, 1000);
        match_ = "corolock:{" + (options_.pattern.empty() ? std::string("*") : options_.pattern) + "}";
    }
    list_op(const list_op&) = delete;
    list_op& operator=(const list_op&) = delete;
    ~list_op() { stop_nodes(); }

    void start() {
        connect_cancellation();
        // A pattern with a brace was refused before (core/admin.cpp).
        asio::post(impl_->strand(), [self = shared_from_this()] {
            if (self->impl_->stopped()) {
                self->finish(error::client_stopped);
            } else {
                self->deadline_ = std::chrono::steady_clock::now() + self->options_.max_time;
                if (self->impl_->router() != nullptr)
                    self->find_primaries();
                else
                    self->scan();
            }
        });
    }

private:
    bool finished() const noexcept { return !op_->handler; }

    void connect_cancellation() {
        auto slot = asio::get_associated_cancellation_slot(op_->handler);
        if (!slot.is_connected()) return;
        slot.assign([weak = std::weak_ptr<admin_op<lock_list>>(op_),
                     strand = impl_->strand()](asio::cancellation_type type) {
            if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
                asio::cancellation_type::none)
                return;
            asio::post(strand, [weak] {
                if (auto o = weak.lock()) o->complete(asio::error::operation_aborted, lock_list{});
            });
        });
    }

    void find_primaries() {
        client_impl::exec_options opts;
        opts.idempotent = true;
        impl_->exec(command{"PING"}.payload(), opts,
                    asio::bind_executor(impl_->strand(),
                                        [self = shared_from_this()](error_code ec, reply) {
                                            self->on_map(ec);
                                        }));
    }

    void on_map(error_code ec) {
        if (finished()) return;
        if (ec) return finish(ec);
        for (const auto& a : impl_->router()->primaries()) {
            auto n = impl_->router()->make_node_client(a);
            n->start();
            nodes_.push_back(std::move(n));
        }
        if (nodes_.empty()) return finish(error::cluster_down);
        scan();
    }

    void stop_nodes() noexcept {
        for (auto& n : nodes_) n->stop();
    }

    void scan() {
        ++steps_;
        command cmd{"SCAN", cursor_, "MATCH", match_, "COUNT",
                    std::to_string(options_.count_per_step), "TYPE", "hash"};
        client_impl::exec_options opts;
        opts.idempotent = true;
        auto& on = nodes_.empty() ? *impl_ : *nodes_[node_];
        on.exec(cmd.payload(), opts,
                    asio::bind_executor(impl_->strand(),
                                        [self = shared_from_this()](error_code ec, reply r) {
                                            self->on_scan(ec, std::move(r));
                                        }));
    }

    void on_scan(error_code ec, reply r) {
        if (finished()) return;
        if (ec) return finish(ec);
        // {cursor, {key...}}
        if (r.type != resp3_type::array || r.elements.size() != 2 || !r.elements[0].is_string() ||
            r.elements[1].type != resp3_type::array)
            return finish(error::unexpected_reply);
        cursor_ = r.elements[0].str;
        std::string why;
        for (const auto& key : r.elements[1].elements) {
            const auto name = lock_name_of_key(key.str);
            if (!key.is_string() || name.empty() || validate_lock_name(name, why)) continue;
            // SCAN may return a key twice (when the keyspace is rehashed).
            if (!seen_.emplace(name).second) continue;
            ++pending_;
            lock_status_for(impl_, std::string(name),
                            asio::bind_executor(impl_->strand(),
                                                [self = shared_from_this(), n = std::string(name)](
                                                    error_code e, lock_status st) mutable {
                                                    self->on_status(std::move(n), e, std::move(st));
                                                }));
        }
        if (pending_ == 0) next();
    }

    void on_status(std::string name, error_code ec, lock_status st) {
        --pending_;
        if (finished()) return;
        // A hash under a lock's name that corolock did not write is not a lock.
        if (ec && ec != error::wrong_type && !step_error_) step_error_ = ec;
        if (!ec && st.held) {
            if (result_.locks.size() < options_.max_locks)
                result_.locks.push_back({std::move(name), std::move(st)});
            else
                result_.truncated = true;
        }
        if (pending_ == 0) step_error_ ? finish(step_error_) : next();
    }

    void next() {
        if (cursor_ == "0") {
            // This node is done; on a Cluster, the next primary's scan starts at 0.
            if (node_ + 1 >= nodes_.size()) return finish({});
            ++node_;
        }
        if (steps_ >= options_.max_steps || result_.locks.size() >= options_.max_locks ||
            std::chrono::steady_clock::now() >= deadline_) {
            result_.truncated = true;
            return finish({});
        }
        scan();
    }

    void finish(error_code ec) {
        stop_nodes();
        if (ec) result_ = {};
        op_->complete(ec, std::move(result_));
    }

    std::shared_ptr<client_impl> impl_;
    lock_list_options options_;
    std::shared_ptr<admin_op<lock_list>> op_;
    std::string match_;
    std::string cursor_ = "0";
    std::size_t steps_ = 0;
    std::size_t pending_ = 0;  // status scripts of this step not answered yet
    error_code step_error_;
    std::chrono::steady_clock::time_point deadline_;
    lock_list result_;
    std::unordered_set<std::string> seen_;
    std::vector<std::shared_ptr<client_impl>> nodes_;  // a Cluster's primaries, in scan order
    std::size_t node_ = 0;                             // the one being scanned
};

}  // namespace

void redis_backend::admin_list(lock_list_options options, list_handler handler) {
    std::make_shared<list_op>(client().shared_from_this(), std::move(options), std::move(handler))
        ->start();
}

}  // namespace detail

}  // namespace corolock
