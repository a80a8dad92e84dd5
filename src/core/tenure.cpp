#include "core/tenure.hpp"

#include "core/backend.hpp"
#include "core/logging.hpp"
#include "core/metrics_recorder.hpp"

#include <spdlog/spdlog.h>

namespace corolock::detail {

namespace {

// A tenure object for a new tenure of `st`: the handle's last one when only
// the handle refers to it, else the spare slot's when only the slot does.
std::shared_ptr<tenure> unused_tenure(lock_state& st, std::shared_ptr<tenure>* spare) {
    if (spare && *spare && *spare == st.current) spare->reset();
    if (st.current && st.current.use_count() == 1) return st.current;
    if (spare && *spare && spare->use_count() == 1) return std::exchange(*spare, nullptr);
    return std::make_shared<tenure>();
}

}  // namespace

joined_tenure begin_or_join(lock_state& st, std::uint64_t level, const lease_terms& asked,
                            reentry_terms rule, tenure::clock::time_point deadline,
                            std::shared_ptr<tenure>* spare) {
    joined_tenure out;
    if (auto* live = st.live()) {
        const bool renewing = live->terms.renew_every.count() > 0;
        switch (rule) {
        case reentry_terms::all:
            live->terms.join(asked);
            break;
        case reentry_terms::renewal_only:
            live->terms.join(
                lease_terms{live->terms.lease, asked.renew_every, live->terms.lock_delay});
            break;
        case reentry_terms::none:
            break;
        }
        out.t = st.current;
        if (deadline > out.t->deadline()) out.t->publish_deadline(deadline);
        out.start_renewals = !renewing && live->terms.renew_every.count() > 0;
    } else {
        out.t = unused_tenure(st, spare);
        out.t->reset(++st.tenures, asked);
        out.t->publish_deadline(deadline);
        st.current = out.t;
        out.began = true;
        out.start_renewals = asked.renew_every.count() > 0;
    }
    st.levels.push_back(level);
    st.held.fetch_add(1, std::memory_order_acq_rel);
    return out;
}

release_step take_level(lock_state& st, std::uint64_t level, const tenure& t) {
    auto it = std::find(st.levels.begin(), st.levels.end(), level);
    auto* live = st.live();
    if (live && live != &t) return release_step::later_tenure;
    if (t.lost() || it == st.levels.end()) return release_step::gone;
    st.levels.erase(it);
    st.held.fetch_sub(1, std::memory_order_acq_rel);
    return st.levels.empty() ? release_step::last_level : release_step::more_levels;
}

bool lose_live(lock_state& st, metrics_recorder& m, spdlog::logger& log, const char* why) {
    auto* t = st.live();
    if (!t || t->lost()) return false;
    log.warn("lock {} lost: {}", escaped{st.name}, why);
    m.lost(st.backend->event_observer(), log, st.name, why);
    t->mark_lost(tenure::clock::now());
    st.lost_epoch = t->epoch;
    return true;
}

}  // namespace corolock::detail
