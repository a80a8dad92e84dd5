// Throwaway ZooKeeper servers for the ZooKeeper tests: one standalone
// server, or an ensemble of several on loopback.
//
// Each server is a real ZooKeeper (Debian's zookeeper.jar, run by java:
// $COROLOCK_ZOOKEEPER_JAR and $COROLOCK_JAVA override where they are) with
// a zoo.cfg of its own in a private temporary directory: free loopback
// ports, the admin server off, a short tick (so session timeouts are
// quick), generous sync limits (so a busy machine does not cause
// elections). The constructor returns once every server serves clients
// (the four-letter word "srvr" reports a mode); when a port was taken
// before a server could bind it, it starts them all again on new ports (a
// bounded number of times). Servers are stopped, killed, paused and
// resumed by PID.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace corolock::test {

class child_process;

struct zk_server_options {
    std::size_t servers = 1;  // 1: standalone; 3 or 5: an ensemble
    std::chrono::milliseconds start_timeout{60'000};
    int tick_ms = 200;  // sessions may last 2 to 300 ticks (minSessionTimeout, maxSessionTimeout)
};

class zk_ensemble {
public:
    // Throws std::runtime_error (with the servers' output) if java or the
    // jar is missing, or the servers do not serve within start_timeout.
    explicit zk_ensemble(zk_server_options opts = {});
    // Kills every server (SIGKILL: nothing is worth keeping) and removes the
    // directory. Never throws.
    ~zk_ensemble();
    zk_ensemble(const zk_ensemble&) = delete;
    zk_ensemble& operator=(const zk_ensemble&) = delete;

    std::size_t size() const noexcept { return servers_.size(); }
    std::uint16_t client_port(std::size_t i) const { return servers_.at(i).client_port; }
    // "127.0.0.1:P1,127.0.0.1:P2,..." and "zk://" + that + root.
    std::string hosts() const;
    std::string url(const std::string& root = "") const;
    pid_t pid(std::size_t i) const noexcept;
    bool running(std::size_t i) const;
    // "leader", "follower" or "standalone" as server i reports it ("srvr"),
    // nullopt when it does not answer or does not serve.
    std::optional<std::string> mode(std::size_t i) const;
    // The server that reports itself leader (or standalone); waits, bounded
    // by start_timeout. Throws when there is none.
    std::size_t leader() const;
    // The ephemeral nodes' paths, as the leader (or the standalone server)
    // reports them ("dump"): a view independent of the library under test.
    // Throws std::runtime_error when no server answers.
    std::vector<std::string> ephemerals() const;
    // Waits until every running server serves. False after `limit`.
    bool wait_serving(std::chrono::milliseconds limit) const;

    void kill9(std::size_t i);   // SIGKILL, waits until reaped
    void pause(std::size_t i);   // SIGSTOP, waits until the kernel reports it stopped
    void resume(std::size_t i);  // SIGCONT
    // Starts a killed server again with its data, on its ports; waits
    // until it serves.
    void restart(std::size_t i);
    std::string log_tail(std::size_t i, std::size_t max_bytes = 4096) const;

private:
    struct server {
        std::uint16_t client_port = 0, peer_port = 0, election_port = 0;
        std::unique_ptr<child_process> proc;
        bool paused = false;
    };
    // One start on new ports: true once every server serves; false (all
    // dropped, `why` set) when a server could not bind a port.
    bool start_all(std::chrono::steady_clock::time_point deadline, std::string& why);
    void write_config(std::size_t i) const;
    void launch(std::size_t i);
    void drop(std::size_t i) noexcept;

    zk_server_options opts_;
    std::string java_, jar_, dir_;
    std::vector<server> servers_;
};

// One standalone server.
class zk_server : public zk_ensemble {
public:
    zk_server() : zk_ensemble(zk_server_options{}) {}
    std::uint16_t port() const { return client_port(0); }
};

}  // namespace corolock::test
