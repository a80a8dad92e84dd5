// Fuzz target for the etcd backend's lock keys: split_lock_key undoes
// lock_prefix(prefix, name) + owner for any prefix, non-empty name (as a
// lock's always is) and non-empty owner, and refuses the key of an empty
// name; any key it accepts is exactly such a key (written again from the
// name and owner it found, it is the same bytes), with a non-empty owner.
// It never throws.
#include "fuzz_check.hpp"
#include "targets.hpp"

#include "etcd/etcd_admin.hpp"
#include "etcd/etcd_backend.hpp"

#include <string>

namespace {

using corolock::detail::etcd::lock_prefix;
using corolock::detail::etcd::split_lock_key;

}  // namespace

int corolock_fuzz_etcd_lock_key(const std::uint8_t* data, std::size_t size) {
    corolock::fuzz::input in(data, size);
    const std::string prefix(in.take(in.take_byte() % 16));
    const std::string_view rest = in.rest();

    // The rest as a key read back from a (maybe hostile) gateway.
    std::string_view name, owner;
    if (split_lock_key(rest, prefix, name, owner)) {
        FUZZ_REQUIRE(!owner.empty());
        FUZZ_REQUIRE(lock_prefix(prefix, name) + std::string(owner) == rest);
    }

    // The rest as a name and an owner this backend writes.
    corolock::fuzz::input fields = in;
    std::string written_name(fields.take_until('\0'));
    std::string written_owner(fields.rest());
    if (written_owner.empty()) written_owner = "o";
    // A lock name is never empty (mutex refuses it), and a key of one is
    // no lock's ("0:" would be a length with a leading zero).
    FUZZ_REQUIRE(!split_lock_key(lock_prefix(prefix, "") + written_owner, prefix, name, owner));
    if (written_name.empty()) written_name = "n";
    const std::string key = lock_prefix(prefix, written_name) + written_owner;
    FUZZ_REQUIRE(split_lock_key(key, prefix, name, owner));
    FUZZ_REQUIRE(name == written_name && owner == written_owner);
    // Under another prefix of the same length it is no lock's key.
    if (!prefix.empty()) {
        const std::string other = prefix.substr(0, prefix.size() - 1) + '\x01';
        if (other != prefix) FUZZ_REQUIRE(!split_lock_key(key, other, name, owner));
    }
    return 0;
}
