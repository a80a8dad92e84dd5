#include "support/sys_util.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <poll.h>

#include <stdlib.h>

namespace corolock::test {

std::runtime_error sys_error(const std::string& what, int err) {
    return std::runtime_error(what + ": " + std::strerror(err));
}

namespace {

// Whole milliseconds from now until `deadline`, rounded up, clamped to
// [0, INT_MAX]: a poll(2) timeout that never wakes before the deadline.
int ms_until(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

}  // namespace

void wait_fd(int fd, short events, std::chrono::steady_clock::time_point deadline, const char* what) {
    while (true) {
        pollfd p{fd, events, 0};
        const int r = ::poll(&p, 1, ms_until(deadline));
        if (r > 0) return;  // ready, or an error the next call reports
        if (r == 0) throw std::runtime_error(std::string("timed out ") + what);
        if (errno != EINTR) throw sys_error("poll", errno);
    }
}

std::string make_temp_dir(const std::string& tag) {
    const char* env = std::getenv("TMPDIR");
    std::string tmpl = std::string(env != nullptr && *env != '\0' ? env : "/tmp") + "/corolock-" + tag +
                       "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw sys_error(tag + " server: mkdtemp " + tmpl, errno);
    return std::filesystem::absolute(tmpl).string();
}

std::size_t count_of(std::string_view text, std::string_view what) {
    std::size_t n = 0;
    for (auto pos = text.find(what); pos != std::string_view::npos; pos = text.find(what, pos + what.size()))
        ++n;
    return n;
}

}  // namespace corolock::test
