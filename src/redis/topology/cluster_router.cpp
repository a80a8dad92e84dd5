#include "redis/topology/cluster_router.hpp"

#include "core/logging.hpp"
#include "core/url_text.hpp"

#include <corolock/command.hpp>
#include <corolock/detail/completion.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

namespace corolock::detail::cluster {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// ---- the key of a command ----

namespace {

// The bulk strings of a RESP array, in order; at most `max` of them.
std::size_t split(std::string_view p, std::string_view* out, std::size_t max) noexcept {
    std::size_t n = 0;
    auto line = [&](std::string_view& rest) -> std::string_view {
        const auto end = rest.find("\r\n");
        if (end == std::string_view::npos) return {};
        auto l = rest.substr(0, end);
        rest = rest.substr(end + 2);
        return l;
    };
    auto head = line(p);
    if (head.empty() || head[0] != '*') return 0;
    while (n < max && !p.empty()) {
        auto len_line = line(p);
        if (len_line.size() < 2 || len_line[0] != '$') return n;
        std::size_t len = 0;
        const auto [ptr, ec] =
            std::from_chars(len_line.data() + 1, len_line.data() + len_line.size(), len);
        if (ec != std::errc() || len + 2 > p.size()) return n;
        out[n++] = p.substr(0, len);
        p = p.substr(len + 2);
    }
    return n;
}

bool is_transport(const error_code& ec) {
    return ec == error::connection_lost || ec == error::timeout || ec == error::not_connected ||
           ec == error::never_connected || ec == error::client_stopped ||
           ec == error::connect_timeout;
}

}  // namespace

std::string_view command_key(std::string_view payload) noexcept {
    std::array<std::string_view, 4> w{};
    const auto n = split(payload, w.data(), w.size());
    if (n < 2) return {};
    const auto name = w[0];
    if (iequals(name, "EVAL") || iequals(name, "EVALSHA") || iequals(name, "EVAL_RO") ||
        iequals(name, "EVALSHA_RO") || iequals(name, "FCALL") || iequals(name, "FCALL_RO")) {
        if (n < 4 || w[2] == "0") return {};
        return w[3];
    }
    for (std::string_view keyless : {"PING", "CONFIG", "INFO", "CLUSTER", "SCAN", "SCRIPT",
                                     "COMMAND", "HELLO", "CLIENT", "TIME", "DBSIZE", "ACL",
                                     "ROLE", "ASKING", "READONLY", "ECHO", "MEMORY", "LATENCY",
                                     "SLOWLOG", "WAIT", "FUNCTION", "PUBSUB", "SELECT"})
        if (iequals(name, keyless)) return {};
    return w[1];
}

// ---- one routed command ----

class cluster_router::routed final : public reply_target {
public:
    routed(client_impl::exec_options o, clock::time_point deadline)
        : opts(o), policy({deadline}), deadline(deadline) {}

    void on_reply(std::shared_ptr<reply_target> self, error_code ec, reply r) override {
        auto me = std::static_pointer_cast<routed>(std::move(self));
        if (auto rt = router.lock())
            rt->on_answer(me, ec, std::move(r));
        else
            deliver(ec ? ec : error_code(error::client_stopped), std::move(r));
    }
    void write_command(std::string& out) const override {
        if (inner)
            inner->write_command(out);
        else
            out.append(payload);
    }
    std::size_t command_size() const noexcept override {
        return inner ? inner->command_size() : payload.size();
    }

    void deliver(error_code ec, reply r) {
        if (inner) {
            auto t = std::move(inner);
            auto* p = t.get();
            p->on_reply(std::move(t), ec, std::move(r));
            return;
        }
        if (!handler) return;
        auto h = std::move(handler);
        handler = {};
        if (opts.direct) {
            std::move(h)(ec, std::move(r));
            return;
        }
        auto slot = asio::get_associated_cancellation_slot(h);
        if (slot.is_connected()) slot.clear();
        detail::complete_now(std::move(h), false, executor, ec, std::move(r));
    }

    std::weak_ptr<cluster_router> router;
    target_ptr inner;
    std::string payload;
    exec_handler handler;
    asio::any_io_executor executor;
    client_impl::exec_options opts;
    redirect_policy policy;
    clock::time_point deadline;
    std::uint16_t slot = 0;
    bool keyed = false;
    node_address at;  // where it went last
};

// Forwards one node's connection events to the router.
class cluster_router::node_listener final : public connection_listener {
public:
    node_listener(std::weak_ptr<cluster_router> r, node_address a)
        : router_(std::move(r)), addr_(std::move(a)) {}
    void on_connected() override {
        if (auto r = router_.lock()) r->on_node_connected(addr_);
    }
    void on_disconnected() override {
        if (auto r = router_.lock()) r->on_node_disconnected(addr_);
    }
    void on_push(const reply& msg) override {
        if (auto r = router_.lock()) r->on_node_push(msg);
    }
    void on_stopped() override {}

private:
    std::weak_ptr<cluster_router> router_;
    node_address addr_;
};

// ---- the router ----

cluster_router::cluster_router(client_impl& front)
    : front_(front), refresh_timer_(front.strand()) {}

void cluster_router::start() { request_refresh(); }

void cluster_router::stop() noexcept {
    if (stopped_) return;
    stopped_ = true;
    refresh_timer_.cancel();
    auto nodes = std::move(nodes_);
    nodes_.clear();
    for (auto& [name, n] : nodes) n.client->stop();
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& c : pending) {
        try {
            c->deliver(error::client_stopped, {});
        } catch (...) {
        }
    }
}

void cluster_router::abandon() noexcept {
    stopped_ = true;
    pending_.clear();
    nodes_.clear();
}

void cluster_router::exec(std::string payload, client_impl::exec_options opts,
                          exec_handler handler) {
    const auto timeout = opts.timeout.count() > 0 ? opts.timeout : front_.cfg().command_timeout;
    auto c = std::make_shared<routed>(opts, clock::now() + timeout);
    c->router = weak_from_this();
    c->payload = std::move(payload);
    // swap, not move-assignment: Asio 1.81's any_completion_handler move
    // assignment copies its source as an lvalue, wrapping it in itself
    // without end (a stack overflow).
    c->handler.swap(handler);
    c->executor = front_.get_executor();
    const auto key = command_key(c->payload);
    c->keyed = !key.empty();
    if (c->keyed) c->slot = key_slot(key);
    route(c);
}

void cluster_router::exec(client_impl::exec_options opts, target_ptr target) {
    const auto timeout = opts.timeout.count() > 0 ? opts.timeout : front_.cfg().command_timeout;
    auto c = std::make_shared<routed>(opts, clock::now() + timeout);
    c->router = weak_from_this();
    std::string bytes;
    target->write_command(bytes);
    c->inner = std::move(target);
    const auto key = command_key(bytes);
    c->keyed = !key.empty();
    if (c->keyed) c->slot = key_slot(key);
    route(c);
}

void cluster_router::route(const std::shared_ptr<routed>& c) {
    if (stopped_) {
        c->deliver(error::client_stopped, {});
        return;
    }
    if (!have_map_) {
        pending_.push_back(c);
        request_refresh();
        return;
    }
    const node_address* to = nullptr;
    std::vector<node_address> any;
    if (c->keyed) {
        to = map_.primary_of(c->slot);
    } else {
        any = map_.primaries();
        if (!any.empty()) to = &any.front();
    }
    if (to == nullptr) {
        // No primary serves the slot (a failover under way): as CLUSTERDOWN.
        on_answer(c, error::server_error,
                  [] {
                      reply r;
                      r.type = resp3_type::simple_error;
                      r.str = "CLUSTERDOWN Hash slot not served";
                      return r;
                  }());
        return;
    }
    send_to(c, *to, false);
}

std::shared_ptr<client_impl> cluster_router::make_node_client(const node_address& a) const {
    config cfg = front_.cfg();
    cfg.mode = topology::single;
    cfg.nodes.clear();
    cfg.host = a.host;
    cfg.port = a.port;
    return std::make_shared<client_impl>(front_.get_executor(), std::move(cfg), front_.strand());
}

cluster_router::node& cluster_router::node_for(const node_address& a) {
    const auto name = to_string(a);
    auto it = nodes_.find(name);
    if (it != nodes_.end()) return it->second;
    node n;
    n.client = make_node_client(a);
    n.listener = std::make_shared<node_listener>(weak_from_this(), a);
    n.client->add_listener(n.listener);
    n.client->start();
    front_.log().debug("cluster: opened a connection to {}", escaped{name});
    return nodes_.emplace(name, std::move(n)).first->second;
}

void cluster_router::send_to(const std::shared_ptr<routed>& c, const node_address& to,
                             bool asking) {
    c->at = to;
    auto& n = node_for(to);
    client_impl::exec_options o = c->opts;
    const auto left = c->deadline - clock::now();
    o.timeout = std::max<clock::duration>(left, 1ms);
    if (asking) {
        // The next command on this connection may touch the importing slot.
        client_impl::exec_options ao;
        ao.direct = true;
        ao.timeout = o.timeout;
        n.client->exec(command{"ASKING"}.payload(), ao, exec_handler([](error_code, reply) {}));
        o.priority = false;  // right behind its ASKING
    }
    n.client->exec(o, c);
}

void cluster_router::on_answer(const std::shared_ptr<routed>& c, error_code ec, reply r) {
    if (stopped_ || front_.stopped()) {
        c->deliver(error::client_stopped, std::move(r));
        return;
    }
    const auto now = clock::now();
    using what = redirect_policy::what;
    if (r.is_error()) {
        const auto kind = parse_redirect(r.str).kind;
        auto d = c->policy.on_error(r.str, c->at, now);
        switch (kind) {
        case redirect_kind::moved:
            counters_.moved.fetch_add(1, std::memory_order_relaxed);
            // Expected after a failover or a migration: the map is updated.
            front_.log().debug("cluster: {}", escaped{r.str});
            break;
        case redirect_kind::ask: counters_.ask.fetch_add(1, std::memory_order_relaxed); break;
        case redirect_kind::tryagain:
            counters_.tryagain.fetch_add(1, std::memory_order_relaxed);
            break;
        case redirect_kind::clusterdown:
            counters_.clusterdown.fetch_add(1, std::memory_order_relaxed);
            break;
        case redirect_kind::none: break;
        }
        if (d.update_map) map_.assign(c->slot, d.target);
        if (d.refresh_map) request_refresh();
        switch (d.action) {
        case what::deliver: c->deliver(ec, std::move(r)); return;
        case what::retry_at: send_to(c, d.target, false); return;
        case what::ask_at: send_to(c, d.target, true); return;
        case what::retry_later: retry_later(c, d.delay); return;
        case what::fail:
            front_.log().warn("cluster: giving up on a command after {} redirection(s): {}",
                              c->policy.redirects(), escaped{r.str});
            c->deliver(d.ec, std::move(r));
            return;
        }
    }
    // The node went away under the command (retired after a failover, or
    // its connection dropped). Safe to send again elsewhere when the command
    // is idempotent or was never written.
    const bool unsent = ec == error::never_connected || ec == error::not_connected;
    if (ec && is_transport(ec) && (c->opts.idempotent || unsent)) {
        auto d = c->policy.on_unreachable(now);
        request_refresh();
        if (d.action == what::retry_later) {
            counters_.reroutes.fetch_add(1, std::memory_order_relaxed);
            retry_later(c, d.delay);
            return;
        }
    }
    // A retired node's stop is no stop of this client: the lock layer
    // retries a lost connection, never a stopped client.
    if (ec == error::client_stopped) ec = error::connection_lost;
    c->deliver(ec, std::move(r));
}

void cluster_router::retry_later(const std::shared_ptr<routed>& c, clock::duration delay) {
    // The timer is the wait's, not the command's: a command never owns the
    // handler that owns it.
    auto timer = std::make_shared<asio::steady_timer>(front_.strand());
    timer->expires_after(delay);
    timer->async_wait([weak = weak_from_this(), c, timer](error_code ec) {
        auto self = weak.lock();
        if (!self || self->stopped_) {
            c->deliver(error::client_stopped, {});
            return;
        }
        (void)ec;
        self->route(c);
    });
}

// ---- the map ----

std::vector<node_address> cluster_router::refresh_candidates() const {
    std::vector<node_address> out;
    // Connected primaries first, then the seeds.
    for (const auto& a : map_.primaries()) {
        auto it = nodes_.find(to_string(a));
        if (it != nodes_.end() && it->second.client->connected()) out.push_back(a);
    }
    for (const auto& s : front_.cfg().nodes) {
        node_address a{s.host, s.port};
        if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
    }
    for (const auto& a : map_.primaries())
        if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
    return out;
}

void cluster_router::request_refresh() {
    if (stopped_) return;
    if (refreshing_) {
        refresh_again_ = true;
        return;
    }
    refreshing_ = true;
    refresh_again_ = false;
    counters_.refreshes.fetch_add(1, std::memory_order_relaxed);
    refresh_never_connected_ = true;
    candidates_ = refresh_candidates();
    refresh_from(0, false);
}

void cluster_router::refresh_from(std::size_t i, bool slots_fallback) {
    if (stopped_) return;
    if (i >= candidates_.size()) {
        refresh_failed();
        return;
    }
    const auto at = candidates_[i];
    client_impl::exec_options o;
    o.direct = true;
    o.idempotent = true;
    o.timeout = front_.cfg().command_timeout;
    const auto payload = slots_fallback ? command{"CLUSTER", "SLOTS"}.payload()
                                        : command{"CLUSTER", "SHARDS"}.payload();
    node_for(at).client->exec(
        payload, o,
        exec_handler([weak = weak_from_this(), i, at, slots_fallback](error_code ec, reply r) {
            auto self = weak.lock();
            if (!self || self->stopped_) return;
            if (!slots_fallback && r.is_error() &&
                (r.str.find("unknown subcommand") != std::string::npos ||
                 r.str.find("Unknown subcommand") != std::string::npos)) {
                // Redis before 7.0: no CLUSTER SHARDS, and no sharded
                // pub/sub either; unlock messages go by PUBLISH, which the
                // cluster broadcasts to every node.
                if (self->sharded_.exchange(false))
                    self->front_.log().warn(
                        "cluster: {} has no CLUSTER SHARDS (Redis before 7.0): unlock messages "
                        "fall back to PUBLISH, broadcast to every node of the cluster",
                        escaped{to_string(at)});
                self->refresh_from(i, true);
                return;
            }
            slot_map m;
            std::string why;
            const bool tls = self->front_.cfg().tls.enabled;
            const bool ok =
                !ec && (slots_fallback ? slot_map::from_slots(r, at.host, m, why)
                                       : slot_map::from_shards(r, tls, at.host, m, why));
            if (!ok || m.empty()) {
                if (ec) {
                    self->refresh_error_ = ec;
                    self->refresh_why_ = r.str;
                }
                if (ec != error::never_connected)
                    self->refresh_never_connected_ = false;
                else if (auto n = self->nodes_.find(to_string(at)); n != self->nodes_.end())
                    self->refresh_why_ = n->second.client->last_error().message;  // the cause
                self->front_.log().debug("cluster: no slot map from {}: {}", escaped{to_string(at)},
                                         ec ? ec.message() : why.empty() ? to_string(r) : why);
                self->refresh_from(i + 1, false);
                return;
            }
            self->on_map(std::move(m));
        }));
}

void cluster_router::on_map(slot_map m) {
    map_ = std::move(m);
    have_map_ = true;
    refreshing_ = false;
    refresh_failures_ = 0;
    retire_absent();
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& c : pending) route(c);
    // A primary of the map that cannot be reached is a failover under way:
    // look again soon. So is a slot without a primary.
    bool again = refresh_again_ || !map_.covers_all();
    for (const auto& a : map_.primaries()) {
        auto it = nodes_.find(to_string(a));
        if (it != nodes_.end() && !it->second.client->connected() &&
            it->second.client->stats().connects > 0)
            again = true;
    }
    if (again) {
        refresh_timer_.expires_after(100ms);
        refresh_timer_.async_wait([weak = weak_from_this()](error_code ec) {
            if (auto self = weak.lock(); self && !ec) self->request_refresh();
        });
    }
}

void cluster_router::refresh_failed() {
    refreshing_ = false;
    ++refresh_failures_;
    // Before a first map, with config::fail_fast_when_refused: when no
    // candidate has a connection to ask (each failed its command at once
    // with never_connected), the commands waiting for the map fail now, as
    // a single server's do, instead of at their timeout.
    const bool nobody = !have_map_ && front_.cfg().fail_fast_when_refused && refresh_never_connected_;
    if (nobody) front_.note_error(error::never_connected, refresh_why_);
    expire_pending(nobody);
    const auto delay = std::min<clock::duration>(50ms * (1 << std::min(refresh_failures_, 5)),
                                                 front_.cfg().reconnect_max);
    refresh_timer_.expires_after(delay);
    refresh_timer_.async_wait([weak = weak_from_this()](error_code ec) {
        if (auto self = weak.lock(); self && !ec) self->request_refresh();
    });
}

void cluster_router::expire_pending(bool all) {
    const auto now = clock::now();
    std::vector<std::shared_ptr<routed>> late;
    std::erase_if(pending_, [&](const auto& c) {
        if (!all && c->deadline > now) return false;
        late.push_back(c);
        return true;
    });
    for (auto& c : late) {
        reply r;
        r.type = resp3_type::simple_error;
        r.str = "no node of the cluster answered with a slot map";
        error_code code = have_map_ ? error::cluster_down : error::never_connected;
        // No map yet because of something retrying will not fix: say so.
        if (!have_map_ && retry_cannot_fix(refresh_error_)) {
            code = refresh_error_;
            if (!refresh_why_.empty()) {
                r.str += ": ";
                r.str += refresh_why_;
            }
        }
        c->deliver(code, std::move(r));
    }
}

void cluster_router::retire_absent() {
    const auto primaries = map_.primaries();
    std::vector<std::shared_ptr<client_impl>> retired;
    for (auto it = nodes_.begin(); it != nodes_.end();) {
        const bool serves = std::any_of(primaries.begin(), primaries.end(), [&](const auto& a) {
            return to_string(a) == it->first;
        });
        if (serves) {
            ++it;
            continue;
        }
        front_.log().info("cluster: {} serves no slot now; closing its connection",
                          escaped{it->first});
        retired.push_back(std::move(it->second.client));
        it = nodes_.erase(it);
    }
    // Their queued commands come back as client_stopped, and go elsewhere.
    // Posted: this may run inside one of their own completions.
    for (auto& c : retired) asio::post(front_.strand(), [c] { c->stop(); });
}

void cluster_router::on_node_connected(const node_address&) {
    front_.on_node_connected();
}

void cluster_router::on_node_disconnected(const node_address& a) {
    front_.log().info("cluster: lost the connection to {}", escaped{to_string(a)});
    request_refresh();
}

void cluster_router::on_node_push(const reply& r) { front_.on_node_push(r); }

}  // namespace corolock::detail::cluster
