// async_execute_locked's way from a guard to its lock's backend
// (corolock/locked_sql.hpp); the SQL itself is the PostgreSQL backend's.
#include <corolock/locked_sql.hpp>

#include "core/backend.hpp"
#include "core/guard_access.hpp"

namespace corolock {

namespace detail {

boost::asio::any_io_executor guard_executor(const guard& g) noexcept {
    const auto& st = guard_access::state(g);
    return st ? st->backend->get_executor() : boost::asio::any_io_executor{};
}

void execute_locked_impl(const guard& g, std::vector<sql_statement> statements,
                         sql_handler handler, bool direct) {
    const auto& st = guard_access::state(g);
    if (!g.owns_lock()) {
        complete_posted(std::move(handler), guard_executor(g), error_code(error::released),
                        sql_outcome{});
        return;
    }
    st->backend->execute_locked(st, guard_access::held(g), std::move(statements),
                                std::move(handler), direct);
}

void lock_backend::execute_locked(const std::shared_ptr<lock_state>&, std::shared_ptr<tenure>,
                                  std::vector<sql_statement>, sql_handler handler, bool) {
    sql_outcome out;
    out.message = "the " + std::string(scheme()) +
                  " backend runs no SQL: async_execute_locked needs a postgresql:// lock";
    complete_posted(std::move(handler), get_executor(), error_code(error::invalid_argument),
                    std::move(out));
}

}  // namespace detail

}  // namespace corolock
