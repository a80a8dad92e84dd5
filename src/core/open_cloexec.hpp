// Opens a TCP socket that is not inherited by a child process that execs:
// SOCK_CLOEXEC at creation, so no fork in another thread sees it without.
// Used by every connection corolock opens itself: Redis's (the client's and
// Sentinel's) and the etcd gateway's.
#pragma once

#include <corolock/error.hpp>

#include <boost/asio/ip/tcp.hpp>

#include <cerrno>
#include <sys/socket.h>
#include <unistd.h>

namespace corolock::detail {

inline error_code open_cloexec(boost::asio::ip::tcp::socket& socket,
                               const boost::asio::ip::tcp& protocol) {
    const int fd = ::socket(protocol.family(), SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0) return error_code(errno, boost::system::system_category());
    error_code ec;
    socket.assign(protocol, fd, ec);
    if (ec) ::close(fd);
    return ec;
}

}  // namespace corolock::detail
