// What PostgreSQL's pg_locks says about a corolock lock: for the tests that
// check the server's view (who holds, who waits) or end the holder's backend.
#pragma once

#include "pg/protocol.hpp"
#include "support/pg_server.hpp"

#include <string>
#include <utility>
#include <vector>

namespace corolock::test {

// The sessions (pid, granted) holding or waiting for the lock `name`.
inline std::vector<std::pair<std::string, bool>> lock_sessions(const pg_server& s, const std::string& name) {
    const auto key = corolock::detail::pg::advisory_key(name);
    const auto rows = s.query(
        "SELECT pid::text, granted::text FROM pg_locks WHERE locktype = 'advisory' AND classid = " +
        std::to_string(corolock::detail::pg::key_classid(key)) +
        " AND objid = " + std::to_string(corolock::detail::pg::key_objid(key)) + " AND objsubid = 1");
    std::vector<std::pair<std::string, bool>> out;
    for (const auto& r : rows) out.emplace_back(*r.at(0), *r.at(1) == "true");
    return out;
}

inline std::string holder_pid(const pg_server& s, const std::string& name) {
    for (const auto& [pid, granted] : lock_sessions(s, name))
        if (granted) return pid;
    return {};
}

}  // namespace corolock::test
