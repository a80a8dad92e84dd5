// The plain mutex's protocol (docs/protocol.md, "Scripts"), and the choice
// of a handle's kind.
#include "redis/lock/lock_kind.hpp"

#include "core/lock_delay.hpp"

#include "redis/lock/fair_scripts.hpp"
#include "redis/lock/lock_service.hpp"
#include "redis/lock/shared_scripts.hpp"

#include <boost/system/system_error.hpp>

namespace corolock::detail {

namespace {

std::int64_t as_int(const reply& r) noexcept {
    return r.type == resp3_type::integer ? r.integer : 0;
}

class mutex_kind final : public lock_kind {
public:
    const script& acquire_script() const noexcept override { return detail::acquire_script(); }
    void acquire_arguments(const redis_lock_state& st, const acquire_request&,
                           std::uint64_t level, const lease_terms& terms,
                           script_args& out) const noexcept override {
        out.key(st.keys.lock());
        out.key(st.keys.fence());
        out.arg(std::string_view(st.owner));
        out.arg(server_hold_ms(terms));
        out.arg(static_cast<std::int64_t>(level));
        out.arg(std::string_view(st.client().holder()));
        // Without a lock-delay the script gets what it always got.
        if (const auto delay = lock_delay_ms(terms); delay > 0) out.arg(delay);
    }
    error_code parse_acquire_reply(const reply& r, acquire_reply& out) const noexcept override {
        return parse_lock_acquire_reply(r, out);
    }

    const script& release_script(bool sharded) const noexcept override {
        return detail::release_script(sharded);
    }
    void release_arguments(const redis_lock_state& st, std::optional<std::uint64_t> level,
                           script_args& out) const noexcept override {
        out.key(st.keys.lock());
        out.key(st.keys.channel());
        owner_and_level(st, level, out);
    }

    const script& renew_script() const noexcept override { return detail::renew_script(); }
    void renew_arguments(const redis_lock_state& st, std::int64_t lease_ms,
                         script_args& out) const noexcept override {
        out.key(st.keys.lock());
        out.arg(std::string_view(st.owner));
        out.arg(lease_ms);
    }

    bool confirms_replicas() const noexcept override { return true; }
};

const mutex_kind the_mutex;

}  // namespace

void owner_and_level(const redis_lock_state& st, std::optional<std::uint64_t> level,
                     script_args& out) noexcept {
    out.arg(std::string_view(st.owner));
    if (level)
        out.arg(static_cast<std::int64_t>(*level));
    else
        out.arg(all_levels);
}

void lease_set_kind::release_arguments(const redis_lock_state& st,
                                       std::optional<std::uint64_t> level,
                                       script_args& out) const noexcept {
    out.key(st.keys.lock());
    out.key(st.keys.leases());
    out.key(st.keys.channel());
    owner_and_level(st, level, out);
}

void lease_set_kind::renew_arguments(const redis_lock_state& st, std::int64_t lease_ms,
                                     script_args& out) const noexcept {
    out.key(st.keys.lock());
    out.key(st.keys.leases());
    out.arg(std::string_view(st.owner));
    out.arg(lease_ms);
}

void lease_set_kind::acquire_head(const redis_lock_state& st, std::uint64_t level,
                                  clock::duration lease, script_args& out) noexcept {
    out.key(st.keys.lock());
    out.key(st.keys.leases());
    out.key(st.keys.fence());
    out.arg(std::string_view(st.owner));
    out.arg(std::chrono::duration_cast<std::chrono::milliseconds>(lease).count());
    out.arg(static_cast<std::int64_t>(level));
}

error_code parse_lock_acquire_reply(const reply& r, acquire_reply& out) noexcept {
    const auto n = r.elements.size();
    if (r.type != resp3_type::array || (n != 5 && n != 7)) return error::unexpected_reply;
    out.acquired = as_int(r.elements[0]) == 1;
    out.token = static_cast<std::uint64_t>(as_int(r.elements[1]));
    out.levels = as_int(r.elements[2]);
    out.pttl = as_int(r.elements[3]);
    out.created = as_int(r.elements[4]) == 1;
    if (n == 7) {
        out.expires_in_us = as_int(r.elements[5]);
        out.expires_at_ms = as_int(r.elements[6]);
    }
    return {};
}

namespace {
// The kinds Redis offers, by lock_spec::kind_t; null: not offered.
const lock_kind* find_kind(const lock_spec& spec) noexcept {
    switch (spec.kind) {
    case lock_spec::kind_t::mutex: return &the_mutex;
    case lock_spec::kind_t::semaphore: return &semaphore_kind();
    case lock_spec::kind_t::fair_mutex: return &fair_lock_kind();
    case lock_spec::kind_t::shared_mutex: return &shared_lock_kind();
    }
    return nullptr;
}
}  // namespace

const lock_kind& lock_kind::for_spec(const lock_spec& spec) {
    if (const auto* k = find_kind(spec)) return *k;
    throw boost::system::system_error(error::invalid_argument,
                                      "this lock kind is not offered on Redis yet");
}

const lock_kind& lock_kind::for_valid_spec(const lock_spec& spec) noexcept {
    const auto* k = find_kind(spec);
    return k ? *k : the_mutex;
}

}  // namespace corolock::detail
