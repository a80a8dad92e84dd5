#include <corolock/fair_mutex.hpp>

#include "core/backend.hpp"

namespace corolock {

namespace {
detail::lock_spec fair_spec() {
    detail::lock_spec spec;
    spec.kind = detail::lock_spec::kind_t::fair_mutex;
    return spec;
}
}  // namespace

fair_mutex::fair_mutex(const backend& b, std::string name)
    : lock_handle(b, std::move(name), fair_spec()) {}

}  // namespace corolock
