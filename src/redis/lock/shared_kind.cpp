// The shared mutex's protocol (docs/protocol.md, "The shared mutex"): the
// scripts of shared_scripts.cpp with their keys, arguments and replies.
#include "redis/lock/fair_scripts.hpp"  // fair_entry_lease: the marker's lease
#include "redis/lock/lock_kind.hpp"
#include "redis/lock/lock_service.hpp"
#include "redis/lock/shared_scripts.hpp"

namespace corolock::detail {

namespace {

class shared_kind final : public lease_set_kind {
public:
    const script& acquire_script() const noexcept override { return shared_acquire_script(); }
    void acquire_arguments(const redis_lock_state& st, const acquire_request& req,
                           std::uint64_t level, const lease_terms& terms,
                           script_args& out) const noexcept override {
        // No lock-delay here (redis_backend::offers_lock_delay): the lease is
        // what the server keeps.
        const auto lease = terms.lease;
        acquire_head(st, level, lease, out);
        out.arg(std::string_view(st.client().holder()));
        if (!req.shared)
            out.arg(std::string_view("x"));
        else
            out.arg(std::string_view(reader_yields(st.spec, req) ? "s" : "r"));
        out.arg(writer_marks(st.spec, req) ? fair_entry_lease(lease).count() : std::int64_t{0});
    }
    // The mutex's shape; {-1, ...} is a refused upgrade.
    error_code parse_acquire_reply(const reply& r, acquire_reply& out) const noexcept override {
        if (r.type == resp3_type::array && !r.elements.empty() &&
            r.elements[0].type == resp3_type::integer && r.elements[0].integer == -1)
            return error::upgrade_refused;
        return parse_lock_acquire_reply(r, out);
    }

    const script& release_script(bool sharded) const noexcept override {
        return shared_release_script(sharded);
    }
    const script& renew_script() const noexcept override { return shared_renew_script(); }
};

const shared_kind the_shared_mutex;

}  // namespace

const lock_kind& shared_lock_kind() noexcept { return the_shared_mutex; }

}  // namespace corolock::detail
