// The fair mutex's protocol (docs/protocol.md, "The fair mutex"): the
// scripts of fair_scripts.cpp with their keys and arguments. The waiter's
// side of the handoff is in acquire_wait.cpp and lock_service.cpp.
#include "redis/lock/fair_scripts.hpp"
#include "redis/lock/lock_kind.hpp"
#include "redis/lock/lock_service.hpp"

namespace corolock::detail {

namespace {

class fair_kind final : public lock_kind {
public:
    const script& acquire_script() const noexcept override { return fair_acquire_script(); }
    // The seq is the steady clock when the attempt is written (its arguments
    // are made then): a handoff echoes it, and the waiter's deadline is
    // measured from it (docs/safety.md, "The handoff deadline").
    void acquire_arguments(const redis_lock_state& st, const acquire_request&,
                           std::uint64_t level, const lease_terms& terms,
                           script_args& out) const noexcept override {
        // No lock-delay here (redis_backend::offers_lock_delay): the lease is
        // what the server keeps.
        const auto lease = terms.lease;
        keys(st, out);
        out.arg(std::string_view(st.owner));
        out.arg(std::chrono::duration_cast<std::chrono::milliseconds>(lease).count());
        out.arg(static_cast<std::int64_t>(level));
        out.arg(std::string_view(st.client().holder()));
        out.arg(fair_entry_lease(lease).count());
        out.arg(static_cast<std::int64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                clock::now().time_since_epoch())
                .count()));
    }
    error_code parse_acquire_reply(const reply& r, acquire_reply& out) const noexcept override {
        return parse_lock_acquire_reply(r, out);
    }

    const script& release_script(bool sharded) const noexcept override {
        return fair_release_script(sharded);
    }
    void release_arguments(const redis_lock_state& st, std::optional<std::uint64_t> level,
                           script_args& out) const noexcept override {
        keys(st, out);
        owner_and_level(st, level, out);
        out.arg(st.keys.channel());
    }

    // The mutex's renewal: it only reads `owner`.
    const script& renew_script() const noexcept override { return detail::renew_script(); }
    void renew_arguments(const redis_lock_state& st, std::int64_t lease_ms,
                         script_args& out) const noexcept override {
        out.key(st.keys.lock());
        out.arg(std::string_view(st.owner));
        out.arg(lease_ms);
    }

private:
    static void keys(const redis_lock_state& st, script_args& out) noexcept {
        out.key(st.keys.lock());
        out.key(st.keys.fence());
        out.key(st.keys.queue());
        out.key(st.keys.entries());
    }
};

const fair_kind the_fair_mutex;

}  // namespace

const lock_kind& fair_lock_kind() noexcept { return the_fair_mutex; }

}  // namespace corolock::detail
