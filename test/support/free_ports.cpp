#include "support/free_ports.hpp"

#include "support/sys_util.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

namespace corolock::test {

namespace {

// Owns one socket.
class socket_fd {
public:
    socket_fd() noexcept : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {}
    ~socket_fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    socket_fd(socket_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    socket_fd& operator=(socket_fd&&) = delete;
    int get() const noexcept { return fd_; }

private:
    int fd_;
};

sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
}

std::pair<int, int> ephemeral_range() {
    std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
    int lo = 0, hi = 0;
    if (in >> lo >> hi && lo > 0 && hi >= lo && hi <= 65535) return {lo, hi};
    return {32768, 60999};  // Linux's default
}

bool port_bindable(std::uint16_t port) {
    socket_fd fd;
    if (fd.get() < 0) return false;
    const auto addr = loopback(port);
    return ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
}

// A port from bind(port 0). The socket stays open (in `held`) so that
// consecutive picks differ.
std::uint16_t port_from_kernel(std::vector<socket_fd>& held) {
    socket_fd fd;
    if (fd.get() < 0) throw sys_error("pick_free_ports: socket", errno);
    auto addr = loopback(0);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
        throw sys_error("pick_free_ports: bind 127.0.0.1:0", errno);
    socklen_t len = sizeof addr;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
        throw sys_error("pick_free_ports: getsockname", errno);
    held.push_back(std::move(fd));
    return ntohs(addr.sin_port);
}

}  // namespace

std::vector<std::uint16_t> pick_free_ports(std::size_t n) {
    thread_local std::mt19937 rng([] {
        std::random_device rd;
        std::seed_seq seq{rd(), static_cast<unsigned>(::getpid()),
                          static_cast<unsigned>(
                              std::chrono::steady_clock::now().time_since_epoch().count())};
        return std::mt19937(seq);
    }());
    const auto [lo, hi] = ephemeral_range();
    int first = 0, last = -1;
    constexpr int window_min = 1000;
    if (lo - 1 - 10000 >= window_min) {
        first = 10000;
        last = lo - 1;
    } else if (65535 - (hi + 1) >= window_min) {
        first = hi + 1;
        last = 65535;
    }
    std::vector<std::uint16_t> ports;
    if (last >= first) {
        std::uniform_int_distribution<int> dist(first, last);
        for (int tries = 0; tries < 200 + 20 * static_cast<int>(n) && ports.size() < n; ++tries) {
            const auto p = static_cast<std::uint16_t>(dist(rng));
            if (std::find(ports.begin(), ports.end(), p) == ports.end() && port_bindable(p))
                ports.push_back(p);
        }
    }
    std::vector<socket_fd> held;
    while (ports.size() < n) ports.push_back(port_from_kernel(held));
    return ports;
}

}  // namespace corolock::test
