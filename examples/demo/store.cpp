#include "store.hpp"

#include <corolock/command.hpp>
#include <corolock/error.hpp>
#include <corolock/fence.hpp>
#include <corolock/reply.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <system_error>

#include <stdexcept>

namespace demo {

namespace asio = boost::asio;

namespace {

std::int64_t as_int(const corolock::reply& r, const char* what) {
    if (r.type == corolock::resp3_type::integer) return r.integer;
    if (r.is_null()) return 0;
    if (r.is_string()) {
        if (auto v = parse_int(r.str)) return *v;
    }
    throw std::runtime_error(std::string("demo store: unexpected reply for ") + what + ": " +
                             corolock::to_string(r));
}

}  // namespace

stock_store::stock_store(corolock::client& redis, const scenario& sc)
    : redis_(redis),
      store_key_(sc.store_key()),
      counter_key_(sc.counter_key()),
      fence_key_(sc.fence_key()) {}

asio::awaitable<void> stock_store::reset(std::int64_t units) {
    co_await redis_.async_exec(corolock::command("DEL", store_key_, counter_key_, fence_key_), asio::use_awaitable);
    co_await redis_.async_exec(
        corolock::command("HSET", store_key_, "units").arg(units),
        asio::use_awaitable);
    co_await redis_.async_exec(corolock::command("SET", counter_key_, "0"), asio::use_awaitable);
}

asio::awaitable<std::int64_t> stock_store::units() {
    auto r = co_await redis_.async_exec(corolock::command("HGET", store_key_, "units"),
                                        asio::use_awaitable);
    co_return as_int(r, "HGET units");
}

asio::awaitable<stock_store::write_result> stock_store::write_units(std::uint64_t token,
                                                                    std::int64_t units) {
    // The Redis fence (docs/fencing.md): the server runs the HSET only if
    // `token` is at least the highest token written through fence_key_, and
    // records it, in one function call; a stale token gets error::stale_token.
    auto [ec, r] = co_await corolock::async_fenced_exec(
        redis_, fence_key_, token, corolock::command("HSET", store_key_, "units").arg(units),
        asio::as_tuple(asio::use_awaitable));
    if (ec && ec != corolock::error::stale_token)
        throw std::system_error(ec, "demo store: the fenced write: " + corolock::to_string(r));
    co_return write_result{!ec, co_await fence()};
}

asio::awaitable<std::uint64_t> stock_store::fence() {
    auto f = co_await redis_.async_exec(corolock::command("GET", fence_key_), asio::use_awaitable);
    co_return static_cast<std::uint64_t>(as_int(f, "GET fence"));
}

asio::awaitable<void> stock_store::write_units_unfenced(std::int64_t units) {
    co_await redis_.async_exec(corolock::command("HSET", store_key_, "units").arg(units),
                               asio::use_awaitable);
}

asio::awaitable<void> stock_store::count_sale() {
    auto r = co_await redis_.async_exec(corolock::command("GET", counter_key_), asio::use_awaitable);
    const auto sold = as_int(r, "GET sold");
    co_await redis_.async_exec(corolock::command("SET", counter_key_).arg(sold + 1),
                               asio::use_awaitable);
}

asio::awaitable<stock_store::totals> stock_store::read_totals() {
    totals t;
    t.units = co_await units();
    t.fence = co_await fence();
    auto c = co_await redis_.async_exec(corolock::command("GET", counter_key_), asio::use_awaitable);
    t.counter = as_int(c, "GET sold");
    co_return t;
}

}  // namespace demo
