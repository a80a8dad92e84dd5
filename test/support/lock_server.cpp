// The conformance suite's servers, one factory per backend.
#include "support/lock_server.hpp"

#include "support/etcd_server.hpp"
#include "support/redis_server.hpp"

#include "etcd/codec.hpp"
#include "etcd/etcd_backend.hpp"
#include "redis/scripts.hpp"

#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace corolock::test {

namespace {

// One redis-server (redis_server.hpp), without TLS or credentials.
class redis_lock_server final : public lock_server {
public:
    std::string url() const override { return server_.url(); }
    std::string url_via(std::uint16_t port) const override {
        return "redis://127.0.0.1:" + std::to_string(port);
    }
    std::string scheme() const override { return "redis"; }
    std::uint16_t port() const override { return server_.port(); }
    pid_t pid() const override { return server_.pid(); }
    void kill9() override { server_.kill9(); }
    void pause() override { server_.pause(); }
    void resume() override { server_.resume(); }
    void restart() override { server_.restart(); }
    std::vector<std::string> owners(const std::string& name) const override {
        const auto key = detail::keys_for(name);
        auto owner = server_.cmd1({"HGET", std::string(key.lock()), "owner"});
        if (owner.empty()) return {};
        return {std::move(owner)};
    }

private:
    redis_server server_;
};

// One etcd member (etcd_server.hpp).
class etcd_lock_server final : public lock_server {
public:
    std::string url() const override { return "etcd://" + server_.endpoint(); }
    std::string url_via(std::uint16_t port) const override {
        return "etcd://127.0.0.1:" + std::to_string(port);
    }
    std::string scheme() const override { return "etcd"; }
    std::uint16_t port() const override { return server_.client_port(0); }
    pid_t pid() const override { return server_.pid(0); }
    // etcd rounds a lease up to whole seconds, and its lessor looks for
    // expired leases every 500 ms.
    std::chrono::milliseconds expiry_slack() const override {
        return std::chrono::milliseconds(1'600);
    }
    void kill9() override { server_.kill9(0); }
    void pause() override { server_.pause(0); }
    void resume() override { server_.resume(0); }
    void restart() override {
        if (server_.running(0)) server_.stop(0);
        server_.restart(0);
    }
    std::vector<std::string> owners(const std::string& name) const override {
        // The backend's default key prefix: the URLs above name none.
        const auto prefix = detail::etcd::lock_prefix(detail::etcd::backend_options{}.prefix, name);
        detail::etcd::range_request req;
        req.key = prefix;
        req.range_end = detail::etcd::prefix_end(prefix);
        req.keys_only = true;
        const auto answer = server_.post(0, "/v3/kv/range", detail::etcd::codec::encode_range(req));
        detail::etcd::range_result r;
        if (answer.status != 200 || detail::etcd::codec::decode_range(answer.body, r))
            throw std::runtime_error("etcd range of " + prefix + ": HTTP " +
                                     std::to_string(answer.status) + " " + answer.body);
        std::vector<std::string> out;
        for (const auto& kv : r.kvs) out.push_back(kv.key.substr(prefix.size()));
        return out;
    }

private:
    etcd_server server_;
};

// Adding a backend: write test/support/<name>_server.{hpp,cpp} (a real
// server on free loopback ports, stopped by PID), wrap it in a lock_server
// as the classes above do, and add a row to this table. Then list the name
// in the CMake cache variable COROLOCK_CONFORMANCE_BACKENDS (see
// test/CMakeLists.txt), which registers the suite once more under
// "conformance <name>: ".
const std::vector<std::pair<std::string, lock_server_factory>>& factories() {
    static const std::vector<std::pair<std::string, lock_server_factory>> table = {
        {"redis", [] { return std::unique_ptr<lock_server>(new redis_lock_server()); }},
        {"etcd", [] { return std::unique_ptr<lock_server>(new etcd_lock_server()); }},
    };
    return table;
}

}  // namespace

std::string conformance_backend() {
    const char* b = std::getenv("COROLOCK_CONFORMANCE_BACKEND");
    return b && *b ? std::string(b) : std::string("redis");
}

std::vector<std::string> lock_server_backends() {
    std::vector<std::string> out;
    for (const auto& [name, make] : factories()) out.push_back(name);
    return out;
}

std::unique_ptr<lock_server> start_lock_server(std::string_view backend) {
    for (const auto& [name, make] : factories())
        if (name == backend) return make();
    std::string known;
    for (const auto& n : lock_server_backends()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("no lock server for backend '" + std::string(backend) +
                                "' (known: " + known + ")");
}

}  // namespace corolock::test
