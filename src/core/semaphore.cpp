#include <corolock/semaphore.hpp>

#include "core/backend.hpp"

namespace corolock {

namespace {

// Throws for a capacity outside [1, max_semaphore_capacity].
detail::lock_spec semaphore_spec(std::uint32_t capacity) {
    if (capacity == 0 || capacity > max_semaphore_capacity) {
        throw boost::system::system_error(
            error::invalid_argument, "semaphore capacity must be from 1 to " +
                                         std::to_string(max_semaphore_capacity) + ", got " +
                                         std::to_string(capacity));
    }
    detail::lock_spec spec;
    spec.kind = detail::lock_spec::kind_t::semaphore;
    spec.capacity = capacity;
    return spec;
}

}  // namespace

semaphore::semaphore(const backend& b, std::string name, std::uint32_t capacity)
    : lock_handle(b, std::move(name), semaphore_spec(capacity)) {}

}  // namespace corolock
