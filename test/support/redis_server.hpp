// A throwaway redis-server for the integration and fault tests.
//
// Each instance runs its own redis-server (from $COROLOCK_REDIS_SERVER, else
// PATH) on a free loopback port, without persistence, in a private temporary
// directory; it answers PING before the constructor returns. The test can
// talk to it through cmd() on a small blocking admin connection that does not
// use the library under test, and can kill, restart, pause and resume it.
//
// Lifecycle calls (kill9, restart, pause, ...) belong to the thread that owns
// the object; cmd()/cmd1() may be called from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace corolock::test {

class child_process;

// The names of the certificate TLS servers share unless they name their own
// (redis_server_options::tls_names).
inline constexpr std::string_view default_tls_names = "IP:127.0.0.1,DNS:localhost";

struct redis_server_options {
    std::string password;      // --requirepass for the default user
    std::string acl_user;      // an extra ACL user with every permission
    std::string acl_password;  // its password (empty: nopass)
    bool tls = false;          // also listen with TLS; url() then points there
    // With tls: use the CA, certificate and key already in this directory
    // (another TLS server's dir(), which must outlive this one) instead of
    // making new ones, so that a fleet's servers trust each other.
    std::string tls_files_from;
    // With tls: a certificate of its own (signed by the CA above, or a new
    // one) carrying these names, as openssl's subjectAltName takes them
    // ("DNS:data.corolock.test,IP:127.0.0.1"). Empty: the shared one, with
    // default_tls_names (the first server's, made with the CA).
    std::string tls_names;
    std::vector<std::string> extra_args;  // appended to redis-server's command line
    // Non-empty: run a Sentinel (redis-server CONF --sentinel) instead of a
    // server. These lines start its config file, written once in the
    // server's directory; the Sentinel rewrites it as it learns, and a
    // restart() reads it back. No ACL users are added to a Sentinel.
    std::vector<std::string> sentinel_config;
    std::chrono::milliseconds start_timeout{10'000};  // until the server answers PING
    std::chrono::milliseconds admin_timeout{5'000};   // bound on each cmd() call
};

// The integration tier run as the restricted ACL user (ctest label "acl"):
// with COROLOCK_TEST_AS_ACL_USER=1 in the environment, every redis_server
// also has this user, with the rules of docs/security.md's "The minimal ACL"
// read from the document itself, and config_for() and client_url() log lock
// clients in as it. cmd(), the fixture's own admin connection, stays as it is.
struct restricted_user {
    static constexpr const char* name = "corolock-restricted";
    static constexpr const char* password = "restricted-pw";
    static bool enabled();  // the environment switch
    // The documented rules (what follows "ACL SETUSER locks"), with PASSWORD
    // replaced by `pass`. Throws std::runtime_error if the section is missing.
    static std::vector<std::string> documented_rules(const std::string& pass = password);
};

// An error reply (-ERR ...) to cmd(); what() is the server's message.
struct redis_reply_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class redis_server {
public:
    // Starts the server; throws std::runtime_error (with the end of the
    // server's log) if it does not answer PING within start_timeout.
    explicit redis_server(redis_server_options opts = {});

    // Stops the server (SIGTERM, then SIGKILL after a bounded wait) and
    // removes its directory. Never throws.
    ~redis_server();

    redis_server(const redis_server&) = delete;
    redis_server& operator=(const redis_server&) = delete;

    // "redis://127.0.0.1:PORT", or "rediss://127.0.0.1:TLS_PORT" for a TLS
    // server. Never carries credentials: tests set them on the config.
    std::string url() const;

    std::uint16_t port() const noexcept { return port_; }          // plain TCP (admin) port
    std::uint16_t tls_port() const noexcept { return tls_port_; }  // 0 without TLS
    pid_t pid() const noexcept;                                    // -1 when not running
    const std::string& dir() const noexcept { return dir_; }
    const redis_server_options& options() const noexcept { return opts_; }

    // PEM files of a TLS server: the CA that signed its certificate, and an
    // unrelated CA that did not. Empty without TLS.
    std::string ca_file() const;
    std::string wrong_ca_file() const;

    // Runs one command on the admin connection (plain TCP, authenticated,
    // database 0) and returns the reply flattened in order: integers in
    // decimal, a nil bulk string as "", a nil array as nothing. Throws
    // redis_reply_error for an error reply, std::runtime_error when the
    // server cannot be reached or does not answer within admin_timeout (the
    // connection is then dropped and the next call opens a new one).
    std::vector<std::string> cmd(const std::vector<std::string>& args) const;
    // The first element of cmd()'s result, or "" for an empty reply.
    std::string cmd1(const std::vector<std::string>& args) const;

    void set_admin_timeout(std::chrono::milliseconds t);

    // SIGKILL, and waits (bounded) until the process is reaped.
    void kill9();
    // SIGTERM, bounded wait, then SIGKILL. A no-op when not running.
    void stop();
    // Starts the server again on the same port(s) and directory (stopping it
    // first if it runs) and waits until it answers PING. The data set starts
    // empty: nothing is persisted.
    void restart();
    // SIGSTOP: the server stops answering but keeps its connections; waits
    // (bounded) until the kernel reports the process stopped.
    void pause();
    // SIGCONT.
    void resume();
    bool running() const;

    // The last max_bytes of the server's log and of what it printed itself.
    std::string log_tail(std::size_t max_bytes = 4096) const;

private:
    enum class start_result { ready, address_in_use };
    start_result start_once(std::chrono::steady_clock::time_point deadline);
    void generate_tls_files();
    void drop_process() noexcept;
    void close_admin() const noexcept;

    redis_server_options opts_;
    std::string redis_bin_;
    std::string dir_;
    std::string log_file_;
    std::string tls_dir_;   // where ca.crt (and ca.key) are
    std::string cert_dir_;  // where server.crt and server.key are
    std::uint16_t port_ = 0;
    std::uint16_t tls_port_ = 0;
    std::unique_ptr<child_process> proc_;
    std::string earlier_output_;  // what previous runs printed to stdout/stderr
    bool paused_ = false;

    mutable std::mutex admin_mu_;  // one command at a time on the admin connection
    mutable int admin_fd_ = -1;
    std::chrono::milliseconds admin_timeout_;
};

}  // namespace corolock::test
