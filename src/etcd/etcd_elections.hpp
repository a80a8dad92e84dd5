// Leader election on etcd: the election seam (core/election_service.hpp)
// over one etcd backend. The candidates queue on the plain mutex (its keys
// are served by create revision: first come, first served); beside the
// lock's keys  <prefix><len>:<NAME>/<owner>  the service keeps one key
// (docs/election.md, "On etcd"):
//   <prefix><len>:<NAME>:leader   "<epoch> <owner> <value>" of the term that
//                                 proclaimed last; removed by its withdrawal
// It is outside the lock's prefix (the lock never sees it as a candidate),
// and  <prefix><len>:<NAME>  is a prefix of both, so one etcd watch of that
// range hears every change of the name's leader: a proclaim, a withdrawal,
// a release, a lease's end.
#pragma once

#include "core/election_service.hpp"

#include <string>

namespace corolock::detail::etcd {

class etcd_backend;

class etcd_elections final : public election_service {
public:
    etcd_elections(etcd_backend& b, std::string prefix) : backend_(b), prefix_(std::move(prefix)) {}

    void proclaim(std::string name, std::string owner, std::uint64_t epoch, std::string value,
                  done_handler h) override;
    void withdraw(std::string name, std::string owner, std::uint64_t epoch,
                  done_handler h) override;
    void read(std::string name, read_handler h) override;
    std::shared_ptr<leader_watch> watch(std::string name) override;

private:
    etcd_backend& backend_;
    const std::string prefix_;
};

}  // namespace corolock::detail::etcd
