#include "core/backend.hpp"

namespace corolock::detail {

namespace {
std::atomic<std::uint64_t> next_watch_id{1};
}  // namespace

lock_state::lock_state(std::shared_ptr<lock_backend> b, std::string lock_name,
                       std::string owner_id)
    : backend(std::move(b)),
      name(std::move(lock_name)),
      owner(std::move(owner_id)),
      watch_id(next_watch_id.fetch_add(1, std::memory_order_relaxed)) {}

boost::asio::steady_timer& lock_state::lost_timer() {
    // On the backend's user-facing executor: a strand boxed in the timer's
    // any_io_executor would cost another allocation. Only the strand touches
    // the timer, and the one handler waiting on it reads atomics only.
    if (!lost_signal)
        lost_signal = std::make_unique<boost::asio::steady_timer>(backend->get_executor(),
                                                                   clock::time_point::max());
    return *lost_signal;
}

void lock_backend::abandon_tenure(const std::shared_ptr<lock_state>&, std::shared_ptr<const tenure>,
                                  const char*) {}

}  // namespace corolock::detail
