// Fuzz target for core/holder_record.hpp: a record written by
// holder_record() reads back with parse_holder_record() field for field
// (since, pid, host, label; held_for = now - since, never negative) when
// its since is in range, and is refused otherwise; any text that parses
// gives a record that, written again, parses the same; nothing throws.
#include "fuzz_check.hpp"
#include "targets.hpp"

#include "core/holder_record.hpp"

#include <chrono>
#include <string>

namespace {

using corolock::lock_holder;
using corolock::detail::holder_record;
using corolock::detail::parse_holder_record;

constexpr std::int64_t latest_us =
    std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::system_clock::duration::max())
        .count();

std::int64_t since_of(const lock_holder& h) {
    return std::chrono::duration_cast<std::chrono::microseconds>(h.since.time_since_epoch())
        .count();
}

void check_held_for(const lock_holder& h, std::int64_t since, std::int64_t now) {
    const std::int64_t want = now > since ? (now - since) / 1000 : 0;
    FUZZ_REQUIRE(h.held_for.count() == want);
    FUZZ_REQUIRE(h.held_for.count() >= 0);
}

bool same(const lock_holder& a, const lock_holder& b) {
    return a.pid == b.pid && a.host == b.host && a.label == b.label && a.since == b.since &&
           a.held_for == b.held_for;
}

}  // namespace

int corolock_fuzz_holder_record(const std::uint8_t* data, std::size_t size) {
    corolock::fuzz::input in(data, size);
    const auto now = static_cast<std::int64_t>(in.take_u64());

    // The bytes as a record read from a server.
    const std::string_view text = in.rest();
    if (const auto h = parse_holder_record(text, now)) {
        const std::int64_t since = since_of(*h);
        FUZZ_REQUIRE(since >= 0 && since <= latest_us);
        FUZZ_REQUIRE(!h->host.empty() && h->host.find(' ') == std::string::npos);
        check_held_for(*h, since, now);
        const std::string again = holder_record(
            since, std::to_string(h->pid) + " " + h->host + " " + h->label);
        const auto h2 = parse_holder_record(again, now);
        FUZZ_REQUIRE(h2 && same(*h, *h2));
    }

    // The bytes as the fields of a record this process writes.
    const auto since = static_cast<std::int64_t>(in.take_u64());
    const auto pid = static_cast<std::int64_t>(in.take_u64());
    std::string host(in.take_until(' '));
    if (host.empty()) host = "?";
    const std::string label(in.rest());
    const std::string record = holder_record(since, std::to_string(pid) + " " + host + " " + label);
    const auto h = parse_holder_record(record, now);
    if (since < 0 || since > latest_us) {
        FUZZ_REQUIRE(!h);
        return 0;
    }
    FUZZ_REQUIRE(h);
    FUZZ_REQUIRE(since_of(*h) == since && h->pid == pid && h->host == host && h->label == label);
    check_held_for(*h, since, now);
    return 0;
}
