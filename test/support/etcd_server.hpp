// Throwaway etcd servers for the etcd tests: one member, or a cluster of
// several on loopback.
//
// Each member is a real `etcd` (from $COROLOCK_ETCD, else PATH) with free
// loopback client and peer ports and a data directory in a private temporary
// directory; the constructor returns once every member reports healthy (the
// cluster has a leader: GET /health answers "true"), starting again on new
// ports (a bounded number of times) when one was taken before its bind.
// post() is a small blocking HTTP client, independent of the library under
// test, for the gateway's /v3/... calls. Members are stopped, killed,
// paused and resumed by PID.
//
// Lifecycle calls belong to the thread that owns the object; post() may be
// called from any thread.
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

struct etcd_server_options {
    std::size_t members = 1;
    std::chrono::milliseconds start_timeout{20'000};  // until every member is healthy
    std::chrono::milliseconds admin_timeout{5'000};   // bound on each post()
    int auth_token_ttl_seconds = 0;                   // --auth-token-ttl; 0: etcd's default
    bool tls = false;  // also serve TLS (a test CA's certificate for 127.0.0.1, not localhost) on tls_endpoint()
    // Raft timing (--heartbeat-interval, --election-timeout). The defaults
    // ride out a busy machine: a leader's heartbeats may stall for half a
    // second before a follower calls an election (a spurious one fails
    // requests and moves leases), where the former 20/200 ms gave way at a
    // fifth of that. Not more: etcd wants the election timeout at least 5
    // heartbeats, and raises every lease to its smallest TTL,
    // ceil((3 * election/heartbeat / 2) * heartbeat) in whole seconds: at
    // 100/600 ms that is 1 s, so a 1 s lease stays 1 s (the conformance
    // cases' expiry bounds and lock_server's expiry_slack count on it); at
    // 100/1000 ms it would be 2 s.
    int heartbeat_ms = 100;
    int election_timeout_ms = 600;
    std::vector<std::string> extra_args;              // appended to every member's command line
};

// An HTTP answer to post(): the status and the body (chunks joined).
struct http_answer {
    unsigned status = 0;
    std::string body;
};

class etcd_cluster {
public:
    // Throws std::runtime_error (with the members' output) if etcd is not
    // found or the cluster is not healthy within start_timeout.
    explicit etcd_cluster(etcd_server_options opts = {});
    // Stops every member (SIGTERM, then SIGKILL) and removes the directory.
    // Never throws.
    ~etcd_cluster();

    etcd_cluster(const etcd_cluster&) = delete;
    etcd_cluster& operator=(const etcd_cluster&) = delete;

    std::size_t size() const noexcept { return members_.size(); }
    // "127.0.0.1:PORT", member i's client address.
    std::string endpoint(std::size_t i) const;
    std::vector<std::string> endpoints() const;
    // "etcd://A,B,C": every member, from member `first` on, wrapping
    // around (a client prefers the first it lists).
    std::string url(std::size_t first = 0) const;
    // "127.0.0.1:PORT", member i's TLS client address (with tls only).
    std::string tls_endpoint(std::size_t i) const;
    // PEM files: the CA that signed the members' certificate, and one that did not.
    std::string ca_file() const { return dir_ + "/ca.crt"; }
    std::string wrong_ca_file() const { return dir_ + "/wrong-ca.crt"; }
    std::uint16_t client_port(std::size_t i) const;
    pid_t pid(std::size_t i) const noexcept;  // -1 when not running
    bool running(std::size_t i) const;

    // Blocking POST (or GET without a body) to member i, bounded by
    // admin_timeout. Throws std::runtime_error when it cannot be reached.
    http_answer post(std::size_t i, const std::string& path, const std::string& body = "{}",
                     const std::string& token = "") const;
    http_answer get(std::size_t i, const std::string& path) const;

    // The index of the leader as member i sees it (maintenance/status), or
    // nullopt when i does not answer or knows no leader.
    std::optional<std::size_t> leader_seen_by(std::size_t i) const;
    // The leader as the first running member that knows one sees it; waits
    // (bounded by start_timeout) for an election. Throws if there is none.
    std::size_t leader() const;

    // Adds user root with `password` (and the root role) and enables auth.
    void enable_auth(const std::string& password);
    // A token for user/password through /v3/auth/authenticate (throws on
    // failure, with etcd's message).
    std::string authenticate(std::size_t i, const std::string& user,
                             const std::string& password) const;

    void kill9(std::size_t i);   // SIGKILL, waits until reaped
    void stop(std::size_t i);    // SIGTERM, bounded wait, then SIGKILL
    void pause(std::size_t i);   // SIGSTOP, waits until the kernel reports it stopped
    void resume(std::size_t i);  // SIGCONT
    // Starts a stopped member again with its data, and waits until it is healthy.
    void restart(std::size_t i);

    std::string log_tail(std::size_t i, std::size_t max_bytes = 4096) const;

private:
    struct member {
        std::string name;
        std::uint16_t client_port = 0;
        std::uint16_t peer_port = 0;
        std::uint16_t tls_port = 0;
        std::unique_ptr<child_process> proc;
        std::string earlier_output;
        bool paused = false;
    };

    bool start_all(std::chrono::steady_clock::time_point deadline);
    void launch(std::size_t i, bool existing);
    void generate_tls_files() const;
    bool healthy(std::size_t i) const;
    void drop(std::size_t i) noexcept;

    etcd_server_options opts_;
    std::string etcd_bin_;
    std::string dir_;
    std::string cluster_token_;
    std::vector<member> members_;
};

// One member.
class etcd_server : public etcd_cluster {
public:
    explicit etcd_server(etcd_server_options opts = {}) : etcd_cluster(single(std::move(opts))) {}
    std::string endpoint() const { return etcd_cluster::endpoint(0); }

private:
    static etcd_server_options single(etcd_server_options o) {
        o.members = 1;
        return o;
    }
};

}  // namespace corolock::test
