// The semaphore's protocol (docs/protocol.md, "The semaphore"): its
// scripts' arguments and replies behind lock_kind.
#include "redis/lock/lock_kind.hpp"

#include "redis/lock/lock_service.hpp"
#include "redis/lock/semaphore_scripts.hpp"

namespace corolock::detail {

namespace {

class semaphore_kind_impl final : public lease_set_kind {
public:
    const script& acquire_script() const noexcept override { return semaphore_acquire_script(); }
    void acquire_arguments(const redis_lock_state& st, const acquire_request& req,
                           std::uint64_t level, const lease_terms& terms,
                           script_args& out) const noexcept override {
        // No lock-delay here (redis_backend::offers_lock_delay): the lease is
        // what the server keeps.
        const auto lease = terms.lease;
        acquire_head(st, level, lease, out);
        out.arg(static_cast<std::int64_t>(req.permits));
        out.arg(static_cast<std::int64_t>(st.spec.capacity));
        out.arg(std::string_view(st.client().holder()));
    }
    // {1, token, grants, lease left, created} or {0, 0, free, wait cap, 0}:
    // the mutex's shape, the wait cap in the pttl's place.
    error_code parse_acquire_reply(const reply& r, acquire_reply& out) const noexcept override {
        return parse_lock_acquire_reply(r, out);
    }

    const script& release_script(bool sharded) const noexcept override {
        return semaphore_release_script(sharded);
    }
    const script& renew_script() const noexcept override { return semaphore_renew_script(); }
};

const semaphore_kind_impl the_semaphore;

}  // namespace

const lock_kind& semaphore_kind() noexcept { return the_semaphore; }

}  // namespace corolock::detail
