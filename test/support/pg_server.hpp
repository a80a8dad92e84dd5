// A throwaway PostgreSQL server for the PostgreSQL backend's tests.
//
// initdb into a private temporary directory, then `postgres` on a free
// loopback port with its unix socket in that directory; the constructor
// returns once it accepts connections. The programs come from
// $COROLOCK_PG_BINDIR, else PATH, else the newest /usr/lib/postgresql/*/bin
// (Debian's place for them). PostgreSQL refuses to run as root: as root, the
// programs run as the user "postgres" (or "nobody") through setpriv, and the
// directory is given to that user. The server is stopped, killed, paused
// and restarted by PID. query() is a small blocking libpq client of its own,
// independent of the library under test.
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

// Where initdb and postgres are, or "" when they are not found.
std::string find_pg_bindir();

class pg_server {
public:
    using rows = std::vector<std::vector<std::optional<std::string>>>;

    pg_server();
    ~pg_server();
    pg_server(const pg_server&) = delete;
    pg_server& operator=(const pg_server&) = delete;

    // postgresql://corolock@127.0.0.1:PORT/postgres
    std::string url() const;
    std::string url_via(std::uint16_t port) const;
    std::uint16_t port() const noexcept { return port_; }
    pid_t pid() const noexcept;
    bool running() const;

    // Turns TLS on (ssl=on, a reload): a certificate for 127.0.0.1 and
    // localhost signed by a throwaway CA (ca_file()); wrong_ca_file() is an
    // unrelated CA. Returns once a TLS connection is accepted. Plain
    // connections are still accepted.
    void enable_tls();
    std::string ca_file() const;
    std::string wrong_ca_file() const;

    // Runs one statement on a new connection; throws std::runtime_error
    // with the server's message on failure.
    rows query(const std::string& sql) const;

    void kill9();
    void stop();  // fast shutdown (SIGINT), bounded
    void pause();
    void resume();
    // Starts again on the same port and data (stopping it first if it runs).
    void restart();
    std::string log() const;

private:
    void start();
    std::vector<std::string> as_owner(std::vector<std::string> argv) const;

    std::string bindir_;
    std::string dir_;
    std::string run_as_;  // non-empty when started as root
    std::uint16_t port_ = 0;
    std::unique_ptr<child_process> proc_;
    std::string earlier_output_;
};

}  // namespace corolock::test
