// A counting replacement of the global operator new and delete, for S6
// (allocations per lock cycle). Replacing them in the program replaces them
// for the library too, so every C++ allocation on a lock's path is seen.
// malloc() called directly (by OpenSSL, for instance) is not counted.
//
// The counters are per thread and plain: an atomic or malloc_usable_size()
// on every allocation would add measurable CPU to the scenarios that count
// CPU (S5). Each scenario runs its client on one thread, which is the one
// counted; Asio's resolver thread only runs at connect time. The live heap
// comes from mallinfo2() instead, which costs nothing per allocation.
#include "bench.hpp"

#include <malloc.h>

#include <cstdlib>
#include <new>

namespace {

thread_local std::uint64_t calls = 0;
thread_local std::uint64_t bytes = 0;

void* counted(std::size_t n) {
    void* p = std::malloc(n == 0 ? 1 : n);
    if (p == nullptr) throw std::bad_alloc();
    ++calls;
    bytes += n;
    return p;
}

void* counted_aligned(std::size_t n, std::align_val_t al) {
    const auto align = static_cast<std::size_t>(al);
    // aligned_alloc wants a size that is a multiple of the alignment.
    const std::size_t rounded = (n + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded);
    if (p == nullptr) throw std::bad_alloc();
    ++calls;
    bytes += n;
    return p;
}

// The nothrow forms: the throwing allocation, or null.
template <class F>
void* or_null(F allocate) noexcept {
    try {
        return allocate();
    } catch (...) {
        return nullptr;
    }
}

}  // namespace

namespace bench {
alloc_snapshot alloc_now() noexcept {
    const struct mallinfo2 mi = ::mallinfo2();
    // In use: small and large chunks from the heap plus mmap()ed blocks.
    return {calls, bytes, static_cast<std::int64_t>(mi.uordblks + mi.hblkhd)};
}
}  // namespace bench

// Every form is replaced, the nothrow ones included: libstdc++'s own nothrow
// forms would call the throwing ones, but a sanitizer's run-time supplies
// its own, and memory from those must not reach free() below (ASan reports
// the mismatch; Asio's any_executor allocates with nothrow new).
void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
void* operator new(std::size_t n, std::align_val_t al) { return counted_aligned(n, al); }
void* operator new[](std::size_t n, std::align_val_t al) { return counted_aligned(n, al); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return or_null([n] { return counted(n); }); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return or_null([n] { return counted(n); }); }
void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
    return or_null([n, al] { return counted_aligned(n, al); });
}
void* operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
    return or_null([n, al] { return counted_aligned(n, al); });
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
