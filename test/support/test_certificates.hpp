// Throwaway TLS files for the fixtures that serve TLS (Redis, etcd,
// PostgreSQL), made with the openssl command ($COROLOCK_OPENSSL, else
// PATH): P-256 keys, much faster to make than RSA, valid three days.
#pragma once

#include <string>

namespace corolock::test {

// Writes into `dir`: ca.crt/ca.key (a test CA), wrong-ca.crt/wrong-ca.key
// (the same shape, an unrelated key: a client trusting only it must reject
// the server) and server.crt/server.key (signed by the CA, for TLS servers
// and clients, its subjectAltName `names`, e.g. "IP:127.0.0.1,DNS:localhost").
// With a `ca_dir` other than `dir` (one whose CA an earlier call made),
// only server.crt/server.key, signed by that CA: servers of one deployment
// under names of their own. Each certificate this process signs has a
// serial of its own. Throws std::runtime_error with openssl's output when a
// step fails.
void write_test_certificates(const std::string& dir, const std::string& names,
                             const std::string& ca_dir = {});

}  // namespace corolock::test
