// The lock kinds on a Redis client's own lock service: each client& form is
// the backend& form on client::lock_backend(). Here, not in src/core, so
// that the core and the lock headers name nothing of the Redis client.
#include <corolock/client.hpp>
#include <corolock/election.hpp>
#include <corolock/fair_mutex.hpp>
#include <corolock/multi_lock.hpp>
#include <corolock/mutex.hpp>
#include <corolock/semaphore.hpp>
#include <corolock/shared_mutex.hpp>

namespace corolock {

mutex::mutex(client& c, std::string name) : mutex(c.lock_backend(), std::move(name)) {}

fair_mutex::fair_mutex(client& c, std::string name) : fair_mutex(c.lock_backend(), std::move(name)) {}

election::election(client& c, std::string name) : election(c.lock_backend(), std::move(name)) {}

shared_mutex::shared_mutex(client& c, std::string name, shared_mutex_options o)
    : shared_mutex(c.lock_backend(), std::move(name), o) {}

semaphore::semaphore(client& c, std::string name, std::uint32_t capacity)
    : semaphore(c.lock_backend(), std::move(name), capacity) {}

multi_lock::multi_lock(client& c, std::vector<std::string> names)
    : multi_lock(c.lock_backend(), std::move(names)) {}

}  // namespace corolock
