// What the four lock types (mutex, fair_mutex, shared_mutex, semaphore)
// share: a handle on one name's lock state, one owner per handle, and the
// initiation of an acquire (detail/completion.hpp). Each type derives from
// it and adds the acquires its kind has; nothing else uses it.
#pragma once

#include <corolock/export.hpp>

#include <corolock/detail/completion.hpp>
#include <corolock/error.hpp>
#include <corolock/guard.hpp>
#include <corolock/lock_options.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace corolock {

class backend;

namespace detail {

struct lock_state;
struct lock_spec;

// One acquire's request beyond its options.
struct acquire_mode {
    bool try_once = false;      // one attempt: error::lock_held instead of waiting
    bool shared = false;        // shared_mutex: a reader's level
    std::uint32_t permits = 1;  // semaphore: permits to take (1 to the capacity)
};

class COROLOCK_API lock_handle {
public:
    using acquire_signature = void(error_code, guard);

    lock_handle(lock_handle&&) noexcept = default;
    lock_handle& operator=(lock_handle&&) noexcept = default;
    lock_handle(const lock_handle&) = delete;
    lock_handle& operator=(const lock_handle&) = delete;

    const std::string& name() const noexcept;
    const std::string& owner_id() const noexcept;

protected:
    // Throws boost::system::system_error(error::invalid_argument) for a name
    // validate_lock_name refuses, or a backend without this kind of lock.
    lock_handle(const backend& b, std::string name, const lock_spec& spec);
    ~lock_handle();

    // Levels (grants, for a semaphore) this handle holds now, locally known.
    std::size_t levels() const noexcept;
    // The spec's capacity: a semaphore's permits in all (0 for the others).
    std::uint32_t permits_in_all() const noexcept { return capacity_; }

    template <class CompletionToken>
    auto initiate(acquire_mode m, lock_options opts, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, acquire_signature>(
            initiate_acquire{this}, token, m, opts);
    }

    // The coroutine conveniences: the guard, or boost::system::system_error
    // naming `what` (the operation) and the lock; the try form returns an
    // empty optional on error::lock_held instead.
    boost::asio::awaitable<guard> acquire_or_throw(acquire_mode m, lock_options opts,
                                                   const char* what = "acquire");
    boost::asio::awaitable<std::optional<guard>> try_or_throw(acquire_mode m, lock_options opts,
                                                              const char* what = "try_acquire");

    // Throws as acquire_or_throw does.
    [[noreturn]] void fail(error_code ec, const char* what) const;

private:
    struct initiate_acquire {
        using executor_type = boost::asio::any_io_executor;
        lock_handle* self;
        executor_type get_executor() const noexcept { return self->executor(); }
        template <class Handler>
        void operator()(Handler&& handler, acquire_mode m, lock_options opts) const {
            auto h = erase_handler<acquire_signature>(std::forward<Handler>(handler), get_executor());
            self->start(m, opts, std::move(h.handler), h.direct);
        }
    };

    // direct: the handler's executor is the client's (see completion.hpp).
    void start(acquire_mode m, lock_options opts,
               boost::asio::any_completion_handler<acquire_signature> handler, bool direct);
    boost::asio::any_io_executor executor() const noexcept;

    std::shared_ptr<lock_state> state_;
    std::uint32_t capacity_ = 0;  // a semaphore's permits in all; 0 for the other kinds
    bool delay_offered_ = false;  // the backend honours lock_options::lock_delay for this kind
};

}  // namespace detail
}  // namespace corolock
