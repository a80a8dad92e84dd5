// Free loopback ports for the servers the tests start (redis_server,
// etcd_cluster): one picker, so both follow the same rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace corolock::test {

// n distinct ports on 127.0.0.1 that were free when checked (by binding
// each). They are drawn at random from below the kernel's ephemeral range
// (or above it when that window is too small), never taken from bind(port 0):
// a port in the ephemeral range can be handed out as the source port of an
// outgoing connection, and while a test has killed a server, a client
// reconnecting to 127.0.0.1:P may be given P itself as its source port; TCP
// then connects the socket to itself, the "server" answers the client's own
// bytes, and a restart finds the port taken. Only when no window outside
// the ephemeral range is usable do the ports come from bind(port 0).
//
// Another process can still take a port before the server binds it: callers
// start again on new ports when that happens. Throws std::runtime_error when
// no socket can be made at all.
std::vector<std::uint16_t> pick_free_ports(std::size_t n);

}  // namespace corolock::test
