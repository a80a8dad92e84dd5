// What a backend's admin answers to `corolock list`: the held locks it
// found, by name, each with its status as that admin reads it, and whether
// a bound (time, steps, locks) ended the walk early; and the bounds' defaults.
#pragma once

#include <corolock/admin.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace corolock::detail {

// `o` with every bound left zero (or a negative time) set to
// lock_list_defaults: the one place the defaults are applied, for each
// backend's list. `page` is the default page size where a backend's own
// differs (PostgreSQL reads names 1000 a page).
inline lock_list_options with_list_defaults(lock_list_options o,
                                            std::size_t page = lock_list_defaults::count_per_step) {
    if (o.count_per_step == 0) o.count_per_step = page;
    if (o.max_steps == 0) o.max_steps = lock_list_defaults::max_steps;
    if (o.max_locks == 0) o.max_locks = lock_list_defaults::max_locks;
    if (o.max_time <= decltype(o.max_time)::zero()) o.max_time = lock_list_defaults::max_time;
    return o;
}

template <class Status>
struct listed_locks {
    struct entry {
        std::string name;
        Status status;  // held is always true
    };
    std::vector<entry> locks;
    bool truncated = false;  // a bound ended the listing: there may be more
};

}  // namespace corolock::detail
