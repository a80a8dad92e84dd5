// Leader election on ZooKeeper: the election seam (core/election_service.hpp)
// over one ZooKeeper backend. The candidates queue on the plain mutex (its
// ephemeral sequential nodes: first come, first served); beside them the
// lock's directory keeps one persistent node (docs/election.md, "On
// ZooKeeper"):
//   <lock dir>/leader   "<epoch> <owner> <value>" of the term that proclaimed
//                       last, or empty after its withdrawal
// It is no contender (lock_recipe.hpp: sequence_of), and being persistent it
// keeps the container directory, so that watches of it have a node to sit on.
#pragma once

#include "core/election_service.hpp"

#include <string>

namespace corolock::detail::zk {

class zk_backend;

class zk_elections final : public election_service {
public:
    zk_elections(zk_backend& b, std::string root) : backend_(b), root_(std::move(root)) {}

    void proclaim(std::string name, std::string owner, std::uint64_t epoch, std::string value,
                  done_handler h) override;
    void withdraw(std::string name, std::string owner, std::uint64_t epoch,
                  done_handler h) override;
    void read(std::string name, read_handler h) override;
    std::shared_ptr<leader_watch> watch(std::string name) override;

private:
    zk_backend& backend_;
    const std::string root_;
};

}  // namespace corolock::detail::zk
