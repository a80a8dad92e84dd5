// Uses the installed headers and library: parses a URL, builds a command,
// constructs a client and a mutex (no server is needed: nothing is awaited).
// It names io_service, as older Asio code does: corolock must not define
// BOOST_ASIO_NO_DEPRECATED for its users.
#include <corolock/corolock.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/io_service.hpp>

#include <iostream>

int main() {
    const auto cfg = corolock::config::from_url("redis://user:pw@127.0.0.1:6390/3");
    if (cfg.port != 6390 || cfg.database != 3 || cfg.username != "user") {
        std::cerr << "consumer: URL parsed wrongly\n";
        return 1;
    }
    const corolock::command cmd{"SET", "k", "v"};
    if (cmd.payload() != "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n") {
        std::cerr << "consumer: command serialized wrongly\n";
        return 1;
    }
    boost::asio::io_service ioc;
    corolock::client client{ioc.get_executor(), cfg};
    corolock::mutex lock{client, "consumer"};
    client.stop();
    ioc.run();
    std::cout << "consumer: ok, owner id " << lock.owner_id().size() * 4 << " bits\n";
    return 0;
}
