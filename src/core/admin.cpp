// The public admin operations (corolock/admin.hpp) over the backend seam
// (core/backend.hpp, admin_*): the checks every backend shares, the
// defaults of a backend that offers none (error::not_supported), and the
// sequencer check built on a status.
#include <corolock/admin.hpp>
#include <corolock/mutex.hpp>

#include "core/backend.hpp"
#include "core/logging.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>

#include <spdlog/spdlog.h>

namespace corolock {

namespace asio = boost::asio;

std::string_view lock_type_name(lock_type t) noexcept {
    switch (t) {
    case lock_type::mutex: return "mutex";
    case lock_type::fair_mutex: return "fair";
    case lock_type::shared_mutex: return "shared";
    case lock_type::semaphore: return "semaphore";
    }
    return "mutex";
}

namespace detail {

namespace {

asio::any_io_executor executor_of(const std::shared_ptr<lock_backend>& b) {
    return b ? b->get_executor() : asio::any_io_executor{};
}

// What stops a call before the backend sees it: no backend (moved from) or
// a stopped one, a bad lock name (`name` null: none to check), or a bad
// argument found by the caller (`why` not empty).
error_code refusal(const std::shared_ptr<lock_backend>& b, const std::string* name,
                   std::string why = {}) {
    if (!b || b->stopped()) return error::client_stopped;
    error_code ec = why.empty() ? error_code{} : error_code(error::invalid_argument);
    if (!ec && name != nullptr) ec = validate_lock_name(*name, why);
    if (ec) b->log().debug("admin: {}", escaped{why});
    return ec;
}

template <class... Results>
void refuse(const std::shared_ptr<lock_backend>& b, error_code ec,
            asio::any_completion_handler<void(error_code, Results...)> handler) {
    complete_posted(std::move(handler), executor_of(b), ec, Results{}...);
}

}  // namespace

void lock_status_impl(const std::shared_ptr<lock_backend>& b, std::string name,
                      lock_status_handler handler) {
    if (auto ec = refusal(b, &name)) return refuse(b, ec, std::move(handler));
    b->admin_status(std::move(name), std::move(handler));
}

void break_lock_impl(const std::shared_ptr<lock_backend>& b, std::string name,
                     lock_status_handler handler) {
    if (auto ec = refusal(b, &name)) return refuse(b, ec, std::move(handler));
    b->admin_break(std::move(name), std::move(handler));
}

void release_owner_impl(const std::shared_ptr<lock_backend>& b, std::string name,
                        std::string owner, asio::any_completion_handler<void(error_code)> handler) {
    // Owners are compared; an empty one would match nothing, but it is
    // certainly a caller's mistake.
    if (auto ec = refusal(b, &name, owner.empty() ? "owner id is empty" : ""))
        return refuse(b, ec, std::move(handler));
    b->admin_release_owner(std::move(name), std::move(owner), std::move(handler));
}

void list_locks_impl(const std::shared_ptr<lock_backend>& b, lock_list_options options,
                     lock_list_handler handler) {
    // No lock name has braces, so no pattern with one matches a lock.
    const bool brace = options.pattern.find_first_of("{}") != std::string::npos;
    if (auto ec = refusal(b, nullptr, brace ? "the pattern has a brace" : ""))
        return refuse(b, ec, std::move(handler));
    b->admin_list(std::move(options), std::move(handler));
}

void check_token_impl(const std::shared_ptr<lock_backend>& b, std::string name,
                      std::uint64_t token, check_token_handler handler) {
    if (auto ec = refusal(b, &name)) return refuse(b, ec, std::move(handler));
    auto slot = asio::get_associated_cancellation_slot(handler);
    // The rule, here only: current while held and its last grant is `token`.
    b->admin_token_state(std::move(name),
                    asio::bind_cancellation_slot(
                        slot, [h = std::move(handler), ex = b->get_executor(), token](
                                  error_code ec, lock_status st) mutable {
                            const bool current = !ec && st.held && st.last_token == token;
                            complete_now(std::move(h), false, ex, ec, current);
                        }));
}

// The defaults: a backend without an admin (RedLock).
void lock_backend::admin_status(std::string, status_handler handler) {
    complete_posted(std::move(handler), get_executor(), error_code(error::not_supported),
                    lock_status{});
}
void lock_backend::admin_token_state(std::string name, status_handler handler) {
    admin_status(std::move(name), std::move(handler));
}
void lock_backend::admin_list(lock_list_options, list_handler handler) {
    complete_posted(std::move(handler), get_executor(), error_code(error::not_supported),
                    lock_list{});
}
void lock_backend::admin_break(std::string, status_handler handler) {
    complete_posted(std::move(handler), get_executor(), error_code(error::not_supported),
                    lock_status{});
}
void lock_backend::admin_release_owner(std::string, std::string, release_handler handler) {
    complete_posted(std::move(handler), get_executor(), error_code(error::not_supported));
}

}  // namespace detail

}  // namespace corolock
