// The core's way into a guard: its handle's state and the tenure it was
// granted in (a friend of corolock::guard).
#pragma once

#include "core/backend.hpp"

#include <corolock/guard.hpp>

#include <memory>

namespace corolock::detail {

struct guard_access {
    static const std::shared_ptr<lock_state>& state(const guard& g) noexcept { return g.state_; }
    static const std::shared_ptr<tenure>& held(const guard& g) noexcept { return g.tenure_; }
};

}  // namespace corolock::detail
