#include <corolock/mutex.hpp>

#include "core/backend.hpp"
#include "core/watchdog_schedule.hpp"

#include <algorithm>

namespace corolock {

error_code validate_lock_name(std::string_view name, std::string& why) {
    if (name.empty()) {
        why = "lock name is empty";
        return error::invalid_argument;
    }
    if (name.size() > max_lock_name_length) {
        why = "lock name is " + std::to_string(name.size()) + " bytes; the limit is " +
              std::to_string(max_lock_name_length);
        return error::invalid_argument;
    }
    // A plain scan: find_first_of searches the set once per byte of the name.
    if (std::any_of(name.begin(), name.end(), [](char c) { return c == '{' || c == '}'; })) {
        why = "lock name contains '{' or '}' (the name is the keys' cluster hash tag)";
        return error::invalid_argument;
    }
    why.clear();
    return {};
}

namespace detail {
error_code normalize_options(lock_options& o, std::string& why) {
    using std::chrono::milliseconds;
    if (o.lease < min_lease) {
        const auto floor = std::to_string(min_lease.count()) + " ms";
        why = o.lease.count() <= 0 ? "lease must be positive (at least " + floor + ")"
                                   : "lease must be at least " + floor;
        return error::invalid_argument;
    }
    if (o.wait && o.wait->count() < 0) {
        why = "wait must not be negative";
        return error::invalid_argument;
    }
    if (o.renew_interval.count() < 0 || (o.renew_interval.count() > 0 && o.renew_interval >= o.lease)) {
        why = "renew_interval must be positive and below the lease";
        return error::invalid_argument;
    }
    o.renew_interval = o.renew_interval_or_default();
    if (o.lock_delay.count() < 0 || o.lock_delay > max_lock_delay) {
        why = "lock_delay must be between 0 and " + std::to_string(max_lock_delay.count()) + " s";
        return error::invalid_argument;
    }
    if (o.replicas < 0) {
        why = "replicas must not be negative";
        return error::invalid_argument;
    }
    if (o.replicas_timeout.count() < 0 || o.replicas_timeout >= o.lease) {
        why = "replicas_timeout must be positive and below the lease";
        return error::invalid_argument;
    }
    o.replicas_timeout = o.replicas_timeout_or_default();
    // A renewal sent at the interval must have time for its round trip (and
    // a retry) before the local deadline: at least a quarter of the lease.
    if (o.watchdog && o.lease - detail::watchdog_schedule::drift(o.lease) - o.renew_interval <
                          o.lease / 4) {
        why = "renew_interval leaves less than a quarter of the lease for the renewal's round "
              "trip before the deadline (at most lease * 3/4 - lease/100 - 2 ms)";
        return error::invalid_argument;
    }
    return {};
}
}  // namespace detail

mutex::mutex(const backend& b, std::string name)
    : lock_handle(b, std::move(name), detail::lock_spec{}) {}

}  // namespace corolock
