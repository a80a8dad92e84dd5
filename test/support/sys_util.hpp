// Small helpers the server fixtures share: an exception from errno, a
// bounded wait on a socket, a fresh temporary directory, and a count in a
// server's text reply.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace corolock::test {

// `what: strerror(err)`.
std::runtime_error sys_error(const std::string& what, int err);

// Waits until fd is ready for `events` (poll(2) flags) or has an error the
// next call will report; throws "timed out <what>" at the deadline.
void wait_fd(int fd, short events, std::chrono::steady_clock::time_point deadline, const char* what);

// A new directory `$TMPDIR/corolock-<tag>-XXXXXX` (TMPDIR unset or empty:
// /tmp), as an absolute path: servers resolve some paths before they change
// to their working directory. Throws sys_error on failure.
std::string make_temp_dir(const std::string& tag);

// How many times `what` occurs in `text`, without overlaps (INFO's
// "state=online" per replica, for example).
std::size_t count_of(std::string_view text, std::string_view what);

}  // namespace corolock::test
