#include "support/subscriber.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace corolock::test {

using namespace std::chrono_literals;

subscriber::subscriber(const redis_server& server, const std::string& channel) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(server.port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    std::string cmd = "*2\r\n$9\r\nSUBSCRIBE\r\n$";
    cmd += std::to_string(channel.size());
    cmd += "\r\n";
    cmd += channel;
    cmd += "\r\n";
    REQUIRE(::send(fd_, cmd.data(), cmd.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(cmd.size()));
    const auto confirm = next(2s);  // {subscribe, channel, 1}
    REQUIRE(confirm.size() == 3);
    REQUIRE(confirm[0] == "subscribe");
}

subscriber::~subscriber() { ::close(fd_); }

std::string subscriber::message(std::chrono::milliseconds limit) {
    const auto m = next(limit);
    if (m.size() != 3 || m[0] != "message") return {};
    return m[2];
}

std::vector<std::string> subscriber::next(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        if (auto parsed = parse(); !parsed.empty()) return parsed;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return {};
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return {};
        char buf[4096];
        const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n <= 0) return {};
        buffer_.append(buf, static_cast<std::size_t>(n));
    }
}

std::vector<std::string> subscriber::parse() {
    std::size_t at = 0;
    auto line = [&](std::string& out) {
        const auto end = buffer_.find("\r\n", at);
        if (end == std::string::npos) return false;
        out = buffer_.substr(at, end - at);
        at = end + 2;
        return true;
    };
    std::string head;
    if (!line(head) || head.empty() || head[0] != '*') return {};
    const auto count = std::stoul(head.substr(1));
    std::vector<std::string> out;
    for (std::size_t i = 0; i < count; ++i) {
        std::string item;
        if (!line(item) || item.empty()) return {};
        if (item[0] == ':') {
            out.push_back(item.substr(1));
            continue;
        }
        const auto len = std::stoul(item.substr(1));
        if (buffer_.size() < at + len + 2) return {};
        out.push_back(buffer_.substr(at, len));
        at += len + 2;
    }
    buffer_.erase(0, at);
    return out;
}

}  // namespace corolock::test
