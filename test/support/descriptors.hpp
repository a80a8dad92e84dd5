// The descriptors open in this process, with their close-on-exec flag: what
// a child that execs would inherit (the flag clear). Read from
// /proc/self/fd; Linux only.
#pragma once

#include <dirent.h>
#include <fcntl.h>

#include <cstdlib>
#include <iterator>
#include <map>

namespace corolock::test {

inline std::map<int, bool> open_descriptors() {
    std::map<int, bool> out;
    DIR* d = ::opendir("/proc/self/fd");
    if (d == nullptr) return out;
    const int own = ::dirfd(d);
    while (const dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const int fd = std::atoi(e->d_name);
        if (fd == own) continue;
        const int flags = ::fcntl(fd, F_GETFD);
        if (flags >= 0) out[fd] = (flags & FD_CLOEXEC) != 0;
    }
    ::closedir(d);
    return out;
}

// The descriptors open now that were not in `before`, with their
// close-on-exec flag.
inline std::map<int, bool> opened_since(const std::map<int, bool>& before) {
    auto now = open_descriptors();
    for (auto it = now.begin(); it != now.end();)
        it = before.count(it->first) ? now.erase(it) : std::next(it);
    return now;
}

}  // namespace corolock::test
