// The Redis backend: the core's lock_backend over one client_impl. It lives
// inside the client_impl (handed out through an aliasing pointer, so a
// handle's state keeps the client alive without another allocation); the
// per-client lock machinery is lock_service, made on first use.
#pragma once

#include "core/backend.hpp"
#include "redis/election/redis_elections.hpp"

#include <corolock/backend.hpp>
#include <corolock/config.hpp>

namespace corolock::detail {

class client_impl;

class redis_backend final : public lock_backend {
public:
    explicit redis_backend(client_impl& c) noexcept : client_(c), elections_(c) {}

    boost::asio::any_io_executor get_executor() const noexcept override;
    const strand_type& strand() const noexcept override;
    bool stopped() const noexcept override;
    spdlog::logger& log() const noexcept override;
    observer* event_observer() const noexcept override;
    void stop() noexcept override;
    std::string_view scheme() const noexcept override;
    metrics_snapshot metrics() const noexcept override;
    metrics_recorder& recorder() noexcept override;

    using lock_backend::make_state;
    std::shared_ptr<lock_state> make_state(std::string name, const lock_spec& spec) override;
    // The plain mutex only: the fair, shared and semaphore scripts keep no
    // lock-delay record, and refuse one (docs/safety.md, "Lock-delay").
    bool offers_lock_delay(const lock_spec& spec) const noexcept override {
        return spec.kind == lock_spec::kind_t::mutex;
    }
    void abandon_tenure(const std::shared_ptr<lock_state>& st, std::shared_ptr<const tenure> t,
                        const char* why) override;
    void acquire(const std::shared_ptr<lock_state>& st, const lock_options& opts,
                 const acquire_request& req, bool try_once, acquire_handler handler,
                 bool direct) override;
    void release(const std::shared_ptr<lock_state>& st, std::uint64_t level,
                 std::shared_ptr<const tenure> t, release_handler handler, bool direct) override;
    void release_in_background(const std::shared_ptr<lock_state>& st,
                               std::uint64_t level) override;
    void drain(clock::duration bound, release_handler handler, bool direct) override;
    // The admin seam: redis/lock/admin.cpp.
    void admin_status(std::string name, status_handler handler) override;
    void admin_token_state(std::string name, status_handler handler) override;
    void admin_list(lock_list_options options, list_handler handler) override;
    void admin_break(std::string name, status_handler handler) override;
    void admin_release_owner(std::string name, std::string owner,
                             release_handler handler) override;

    // Leader election: redis/election/redis_elections.cpp.
    election_service* elections() noexcept override;

    // This backend, sharing ownership of its client.
    std::shared_ptr<lock_backend> shared() const;
    client_impl& client() const noexcept { return client_; }

private:
    client_impl& client_;
    redis_elections elections_;
};

// A started Redis client for `url` (its config's holder label, logger and
// observer from `settings`), as a backend. Throws system_error
// (invalid_argument) for a bad URL or configuration.
std::shared_ptr<lock_backend> connect_redis(boost::asio::any_io_executor ex, std::string_view url,
                                            const backend_config& settings);
// The same from a config (any topology, a Cluster included).
std::shared_ptr<lock_backend> connect_redis(boost::asio::any_io_executor ex, config cfg);

}  // namespace corolock::detail
