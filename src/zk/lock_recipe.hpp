// The lock recipe's decisions, without I/O: where a lock's nodes live, how
// a contender's node is named, who owns the lock, whom a waiter watches, and
// when a node's creation zxid may serve as the fencing token.
//
// A lock NAME is the directory  <root>/locks/<escaped NAME>  (a container
// node: the ensemble removes it once empty). Each acquire attempt creates
// one ephemeral sequential child in it named  _c_<attempt id>-lock-<seq>,
// where the attempt id is the handle's 128-bit random owner id and the
// attempt's number (Curator's "protected" names): a create whose answer was
// lost is found again by its id, and deleted.
// The owner is the child with the lowest sequence; a waiter watches only
// the child just before its own (no herd).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corolock::detail::zk {

// The directory of lock `name` under `root`. Bytes other than letters,
// digits, '-', '_' and '.' are written %XX, so every name is one node name
// ("a/b" and "a%2Fb" stay apart: '%' itself is escaped).
std::string lock_dir(std::string_view root, std::string_view name);
// The directory of every lock's directory: <root>/locks.
std::string locks_root(std::string_view root);
// The inverse of lock_dir's escaping (for listing); nullopt when malformed.
std::optional<std::string> unescape_name(std::string_view node);

// An attempt's id: the handle's owner id and the handle's count of its
// attempts, so that a node names its owner (for people, and for tests)
// and no two attempts share an id.
std::string attempt_id(std::string_view owner, std::uint64_t attempt);
// The owner id in a contender's child name; "" when it is not one.
std::string owner_of(std::string_view child);
// The name a contender's create asks for: the ensemble appends the sequence.
std::string node_prefix(std::string_view attempt_id);
// The sequence of a child of a lock directory, or nullopt when the child is
// not a contender's node.
std::optional<std::uint64_t> sequence_of(std::string_view child);
// The child created by attempt `attempt_id`, if it is among `children`.
std::optional<std::string> find_attempt(const std::vector<std::string>& children,
                                        std::string_view attempt_id);

// Where a contender stands among the lock directory's children.
struct standing {
    enum class kind { owner, waiting, missing } what = kind::missing;
    std::string predecessor;  // waiting: the child to watch
};
standing place_in_line(const std::vector<std::string>& children, std::string_view mine);
// The lowest contender among `children`, or "" when there is none.
std::string lowest(const std::vector<std::string>& children);

// Whether a new owner may take its node's creation zxid as its token: only
// when no child of the directory was created or deleted after its node (the
// directory's pzxid is the node's czxid), so every earlier holder's node,
// and every token it minted, came before that creation. Otherwise a write
// at the grant mints the token (its mzxid).
inline bool creation_is_token(std::int64_t node_czxid, std::int64_t dir_pzxid) noexcept {
    return node_czxid == dir_pzxid;
}

}  // namespace corolock::detail::zk
