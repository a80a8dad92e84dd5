// Which loopback servers a process talks to: the remote ports of its
// established IPv4 TCP connections to 127.0.0.1, read from /proc (its
// socket descriptors, matched by inode against its net/tcp table). For a
// failover test that kills the member a given client is connected to, as
// the server side sees it rather than as the client's URL suggests.
// Linux only; the process must be ours (its /proc/PID/fd is readable).
#pragma once

#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace corolock::test {

inline std::set<std::uint16_t> loopback_peer_ports(pid_t pid) {
    const std::string proc = "/proc/" + std::to_string(pid);
    std::set<std::string> inodes;  // of its sockets, as "socket:[N]" names N
    if (DIR* d = ::opendir((proc + "/fd").c_str())) {
        while (const dirent* e = ::readdir(d)) {
            char target[64];
            const auto n = ::readlink((proc + "/fd/" + e->d_name).c_str(), target, sizeof target - 1);
            if (n <= 0) continue;
            const std::string link(target, static_cast<std::size_t>(n));
            if (link.rfind("socket:[", 0) == 0 && link.back() == ']')
                inodes.insert(link.substr(8, link.size() - 9));
        }
        ::closedir(d);
    }
    std::set<std::uint16_t> ports;
    std::ifstream table(proc + "/net/tcp");
    std::string line;
    std::getline(table, line);  // the header
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    while (std::getline(table, line)) {
        std::istringstream in(line);
        std::string sl, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
        if (!(in >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
              timeout >> inode))
            continue;
        // 01: ESTABLISHED; 0100007F: 127.0.0.1 in the kernel's byte order.
        if (state != "01" || remote.rfind("0100007F:", 0) != 0 || !inodes.count(inode)) continue;
        ports.insert(static_cast<std::uint16_t>(std::stoul(remote.substr(9), nullptr, 16)));
    }
    return ports;
}

}  // namespace corolock::test
