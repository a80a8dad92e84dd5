// Owner ids: 128 random bits from the OS, as 32 hex digits.
#include "core/backend.hpp"

#include <pthread.h>
#include <sys/random.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace corolock::detail {

namespace {
// Owner ids come from the OS random source, read a block at a time: one
// getrandom() call serves 16 ids instead of one (a fresh handle per lock is
// the common pattern, so this was a system call per acquire). The block is
// per thread, and a fork makes every block stale: the child handler bumps
// the generation, so a parent and its child never hand out the same bytes.
constexpr std::size_t owner_id_bytes = 16;
constexpr std::size_t owner_ids_per_block = 16;
std::atomic<std::uint64_t> fork_generation{0};
// The child handler must not take a lock that a vanished thread may hold.
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
void on_fork_child() noexcept { fork_generation.fetch_add(1, std::memory_order_relaxed); }

struct random_block {
    std::array<unsigned char, owner_id_bytes * owner_ids_per_block> bytes{};
    std::size_t used = owner_id_bytes * owner_ids_per_block;  // empty: fill first
    std::uint64_t generation = 0;
};

void fill_random(unsigned char* data, std::size_t size) {
    std::size_t got = 0;
    // getrandom() of at most 256 bytes only returns short or fails with
    // EINTR before the pool is ready; bound the retries anyway.
    for (int attempt = 0; attempt < 100 && got < size; ++attempt) {
        const ssize_t n = ::getrandom(data + got, size - got, 0);
        if (n > 0) got += static_cast<std::size_t>(n);
        else if (n < 0 && errno != EINTR) break;
    }
    if (got < size) throw std::runtime_error("corolock: the OS random source failed");
}
}  // namespace

std::string random_owner_id() {
    // Registered before the first block exists, so no fork can copy a block
    // unnoticed. glibc drops the handler if the library is unloaded.
    static const bool fork_safe = ::pthread_atfork(nullptr, nullptr, &on_fork_child) == 0;
    thread_local random_block block;
    const auto generation = fork_generation.load(std::memory_order_relaxed);
    // Without the fork handler (it could not be registered), every id is
    // read on its own, as before blocks.
    if (!fork_safe || block.used == block.bytes.size() || block.generation != generation) {
        fill_random(block.bytes.data(), fork_safe ? block.bytes.size() : owner_id_bytes);
        block.used = 0;
        block.generation = generation;
    }
    unsigned char* bytes = block.bytes.data() + block.used;
    block.used += owner_id_bytes;
    std::string hex(2 * owner_id_bytes, '0');
    constexpr char digits[] = "0123456789abcdef";
    for (std::size_t i = 0; i < owner_id_bytes; ++i) {
        hex[2 * i] = digits[bytes[i] >> 4];
        hex[2 * i + 1] = digits[bytes[i] & 0xf];
    }
    std::memset(bytes, 0, owner_id_bytes);  // handed out: keep no copy
    return hex;
}

}  // namespace corolock::detail
