// Leader election on Redis (one server, Sentinel, Cluster): the election
// seam (core/election_service.hpp) over one client. Beside the name's fair
// mutex it keeps, in the name's slot (docs/protocol.md, "Leader election"):
//   corolock:{NAME}:leader  hash: owner, epoch, value of the live term
//   corolock:{NAME}:elect   channel: "*" on every proclaim and withdrawal
#pragma once

#include "core/election_service.hpp"

namespace corolock::detail {

class client_impl;

class redis_elections final : public election_service {
public:
    explicit redis_elections(client_impl& c) noexcept : client_(c) {}

    void proclaim(std::string name, std::string owner, std::uint64_t epoch, std::string value,
                  done_handler h) override;
    void withdraw(std::string name, std::string owner, std::uint64_t epoch,
                  done_handler h) override;
    void read(std::string name, read_handler h) override;
    std::shared_ptr<leader_watch> watch(std::string name) override;

private:
    client_impl& client_;
};

}  // namespace corolock::detail
