// The holder record: who holds a lock, written beside the lock for people
// reading it (corolock status, corolock list), never read by the protocol.
//
//   <since µs> <pid> <host> <label>
//
// since: when the tenure began, in microseconds since the Unix epoch; pid
// and host: the acquiring process's (the host with spaces and control bytes
// as '?', so it is one word); label: the rest, possibly empty, any bytes, cut
// to max_holder_label_length. Redis keeps it in the lock hash's holder field
// (the acquire script prepends the server's TIME to holder_argument); etcd
// in the value of the holder's key (the backend writes the whole record,
// since by its own wall clock). docs/protocol.md and docs/backends.md.
#pragma once

#include <corolock/lock_holder.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace corolock::detail {

// "<pid> <host> <label>": this process's id and host name, and the label
// cut to max_holder_label_length bytes. Formatted once per client or backend.
std::string holder_argument(std::string_view label);

// The wall clock now, in µs since the Unix epoch: a record's since, and
// what a record read back is measured against (for display only: no lease
// depends on it).
std::int64_t wall_clock_us() noexcept;

// The whole record: since, a space, then holder_argument's text.
std::string holder_record(std::int64_t since_us, std::string_view argument);

// The record read back, with held_for = now_us - since (never negative).
// nullopt when the text has another shape (written by hand, or by an older
// corolock: the owner id alone).
std::optional<lock_holder> parse_holder_record(std::string_view record, std::int64_t now_us);

}  // namespace corolock::detail
