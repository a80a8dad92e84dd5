#include "store.hpp"

#include <corolock/command.hpp>
#include <corolock/reply.hpp>

#include <boost/asio/use_awaitable.hpp>

#include <stdexcept>

namespace demo {

namespace asio = boost::asio;

namespace {

// KEYS[1]: the stock hash {units, fence}
// ARGV[1]: the writer's fencing token, ARGV[2]: the new number of units
// Returns {1, token} when written, {0, fence} when refused as stale.
// Check and write happen in one script, so no other write can slip between.
constexpr std::string_view fenced_write_lua = R"lua(
local fence = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
local token = tonumber(ARGV[1])
if token <= fence then return {0, fence} end
redis.call('HSET', KEYS[1], 'units', ARGV[2], 'fence', ARGV[1])
return {1, token}
)lua";

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
    : redis_(redis), store_key_(sc.store_key()), counter_key_(sc.counter_key()) {}

asio::awaitable<void> stock_store::reset(std::int64_t units) {
    co_await redis_.async_exec(corolock::command("DEL", store_key_, counter_key_), asio::use_awaitable);
    co_await redis_.async_exec(
        corolock::command("HSET", store_key_, "units").arg(units).arg("fence").arg(std::int64_t{0}),
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
    auto r = co_await redis_.async_exec(
        corolock::command("EVAL", fenced_write_lua, "1", store_key_)
            .arg(static_cast<std::int64_t>(token))
            .arg(units),
        asio::use_awaitable);
    if (r.type != corolock::resp3_type::array || r.elements.size() != 2)
        throw std::runtime_error("demo store: unexpected reply to the fenced write: " +
                                 corolock::to_string(r));
    co_return write_result{as_int(r.elements[0], "fenced write") == 1,
                           static_cast<std::uint64_t>(as_int(r.elements[1], "fence"))};
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
    auto u = co_await redis_.async_exec(corolock::command("HMGET", store_key_, "units", "fence"),
                                        asio::use_awaitable);
    if (u.type != corolock::resp3_type::array || u.elements.size() != 2)
        throw std::runtime_error("demo store: unexpected reply to HMGET: " + corolock::to_string(u));
    t.units = as_int(u.elements[0], "units");
    t.fence = static_cast<std::uint64_t>(as_int(u.elements[1], "fence"));
    auto c = co_await redis_.async_exec(corolock::command("GET", counter_key_), asio::use_awaitable);
    t.counter = as_int(c, "GET sold");
    co_return t;
}

}  // namespace demo
