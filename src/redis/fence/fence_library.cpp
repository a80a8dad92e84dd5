#include "redis/fence/fence_library.hpp"

#include "redis/topology/cluster_router.hpp"

#include <corolock/command.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include <string>
#include <utility>
#include <vector>

namespace corolock::detail {

namespace asio = boost::asio;

namespace {

// Each function compares tokens as decimal strings (length, then bytes),
// so tokens up to 2^64 - 1 compare exactly, beyond Lua's 2^53 doubles. The
// write runs before the token is recorded: a write that fails records
// nothing, and all of it is one atomic function call.
//
// The hot path is kept lean (docs/benchmarks.md, "Fences"): the functions
// and the writes are built once, when the library loads, not per call; a
// token without a leading zero is not rewritten; and a write whose token
// equals the recorded one (the same holder writing again, the common case)
// does not SET the fence key again: one GET, the write, and nothing more.
constexpr std::string_view library = R"lua(#!lua name=corolock
-- corolock's fences (docs/fencing.md). A fence key holds the highest token
-- written through it, in decimal; a call with an older token fails with an
-- error reply beginning STALE and changes nothing.

-- The token without leading zeros, or nil unless a non-negative integer
-- below 2^64.
local function canonical(t)
  if type(t) ~= 'string' or not string.find(t, '^%d+$') then return nil end
  if string.byte(t) == 48 then  -- '0': strip the leading zeros
    t = string.gsub(t, '^0+', '')
    if t == '' then t = '0' end
  end
  if #t > 20 or (#t == 20 and t > '18446744073709551615') then return nil end
  return t
end

local function older(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

local function usage(text)
  return redis.error_reply('ERR corolock fence: ' .. text)
end

-- The token and whether the fence key already holds exactly it; or nil and
-- an error reply: bad input, or older than the fence's.
local function admit(fence_key, arg)
  local token = canonical(arg)
  if not token then
    return nil, usage('the token must be a non-negative integer below 2^64, got "' ..
                      string.sub(tostring(arg), 1, 40) .. '"')
  end
  local highest = redis.call('GET', fence_key)
  if not highest then return token, false end
  if highest == token then return token, true end
  if not canonical(highest) then return nil, usage(fence_key .. ' holds no token') end
  if older(token, highest) then
    return nil, redis.error_reply('STALE token ' .. token .. ' is older than ' .. highest ..
                                  ', the highest recorded in ' .. fence_key)
  end
  return token, false
end

-- KEYS fence key, data key; ARGV token, then the write's own arguments.
-- Runs write(key, args) after the check and records the token when the
-- write succeeded and the fence key does not hold it yet; returns the
-- write's reply.
local function fenced(keys, args, write)
  if #keys ~= 2 then return usage('2 keys: the fence key and the data key') end
  local token, same = admit(keys[1], args[1])
  if not token then return same end
  local r = write(keys[2], args)
  if same or (type(r) == 'table' and r.err) then return r end
  redis.call('SET', keys[1], token)
  return r
end

-- The writes, each write(key, args) with args[1] the token.
local function set(key, a)
  if a[3] then return redis.pcall('SET', key, a[2], 'PX', a[4]) end
  return redis.pcall('SET', key, a[2])
end
local function hset(key, a) return redis.pcall('HSET', key, unpack(a, 2)) end
local function del(key) return redis.pcall('DEL', key) end
local function exec(key, a) return redis.pcall(a[2], key, unpack(a, 3)) end

-- FCALL corolock_fence_check 1 FENCEKEY TOKEN -> OK: check and record only.
redis.register_function('corolock_fence_check', function(keys, args)
  if #keys ~= 1 then return usage('1 key: the fence key') end
  local token, same = admit(keys[1], args[1])
  if not token then return same end
  if not same then redis.call('SET', keys[1], token) end
  return redis.status_reply('OK')
end)

-- FCALL corolock_fenced_set 2 FENCEKEY KEY TOKEN VALUE [PX ms] -> SET's reply.
redis.register_function('corolock_fenced_set', function(keys, args)
  if not (#args == 2 or (#args == 4 and string.upper(args[3]) == 'PX' and
                         string.find(args[4], '^[1-9]%d*$'))) then
    return usage('corolock_fenced_set takes TOKEN VALUE [PX milliseconds]')
  end
  return fenced(keys, args, set)
end)

-- FCALL corolock_fenced_hset 2 FENCEKEY KEY TOKEN FIELD VALUE [FIELD VALUE ...] -> HSET's reply.
redis.register_function('corolock_fenced_hset', function(keys, args)
  if #args < 3 or #args % 2 == 0 then
    return usage('corolock_fenced_hset takes TOKEN FIELD VALUE [FIELD VALUE ...]')
  end
  return fenced(keys, args, hset)
end)

-- FCALL corolock_fenced_del 2 FENCEKEY KEY TOKEN -> DEL's reply.
redis.register_function('corolock_fenced_del', function(keys, args)
  if #args ~= 1 then return usage('corolock_fenced_del takes TOKEN') end
  return fenced(keys, args, del)
end)

-- FCALL corolock_fenced_exec 2 FENCEKEY KEY TOKEN COMMAND [ARG ...]: runs
-- COMMAND KEY ARG... (a command of one key, the key first) -> its reply.
redis.register_function('corolock_fenced_exec', function(keys, args)
  if #args < 2 then return usage('corolock_fenced_exec takes TOKEN COMMAND [ARG ...]') end
  return fenced(keys, args, exec)
end)
)lua";

bool starts_with(std::string_view s, std::string_view prefix) noexcept {
    return s.substr(0, prefix.size()) == prefix;
}

// One FUNCTION LOAD per server. On a Cluster a load that fails on some
// primaries is reported, not rolled back (docs/fencing.md, "Installing"):
// the error names every primary that lacks the library and why.
struct load_run : std::enable_shared_from_this<load_run> {
    std::shared_ptr<client_impl> front;
    std::vector<std::shared_ptr<client_impl>> nodes;  // a Cluster's primaries
    fence_load_handler done;
    std::size_t pending = 0;
    error_code first;
    reply first_reply;
    std::vector<std::string> missing;  // "ADDRESS (the server's reason)", one a failed primary

    void load_on(client_impl& on, std::string name) {
        ++pending;
        client_impl::exec_options opts;
        opts.idempotent = true;  // REPLACE: loading twice is loading once
        on.exec(command{"FUNCTION", "LOAD", "REPLACE", library}.payload(), opts,
                asio::bind_executor(front->strand(), [self = shared_from_this(),
                                                      name = std::move(name)](error_code ec,
                                                                             reply r) {
                    self->on_loaded(name, ec, std::move(r));
                }));
    }

    void on_loaded(const std::string& name, error_code ec, reply r) {
        if (ec) {
            ec = functions_error(ec, r);
            if (!name.empty()) {
                const std::string why = r.is_error() && !r.str.empty() ? r.str : ec.message();
                missing.push_back(name + " (" + why + ")");
            }
            if (!first) {
                first = ec;
                first_reply = std::move(r);
            }
        } else if (!first) {
            first_reply = std::move(r);  // the library's name
        }
        if (--pending > 0) return;
        for (auto& n : nodes) n->stop();
        if (first && !missing.empty()) {
            // A Cluster: which primaries lack the library, each with its reason.
            std::string text = "the Redis Functions library corolock is loaded on " +
                               std::to_string(nodes.size() - missing.size()) + " of " +
                               std::to_string(nodes.size()) + " primaries; missing on ";
            for (std::size_t i = 0; i < missing.size(); ++i) {
                if (i > 0) text += ", ";
                text += missing[i];
            }
            text += "; install again once the cause is fixed (it is idempotent)";
            first_reply.type = resp3_type::simple_error;
            first_reply.str = std::move(text);
        }
        auto d = std::move(done);
        d(first, std::move(first_reply));
    }

    // A Cluster: the map first (any keyless command reads it), then each primary.
    void on_map(error_code ec, reply r) {
        if (ec) return done(ec, std::move(r));
        const auto primaries = front->router()->primaries();
        for (const auto& a : primaries) {
            nodes.push_back(front->router()->make_node_client(a));
            nodes.back()->start();
        }
        if (nodes.empty()) return done(error::cluster_down, std::move(r));
        for (std::size_t i = 0; i < nodes.size(); ++i) load_on(*nodes[i], to_string(primaries[i]));
    }
};

}  // namespace

std::string_view fence_library_source() noexcept { return library; }

error_code functions_error(error_code ec, reply& r) {
    if (ec && r.is_error() && starts_with(r.str, "ERR unknown command")) {
        r.str = "the server has no Redis Functions (Redis 7.0 or later): " + r.str;
        return error::no_functions;
    }
    return ec;
}

bool is_function_missing(const reply& r) noexcept {
    return r.is_error() && (starts_with(r.str, "ERR Function not found") ||
                            starts_with(r.str, "NOSCRIPT"));
}

void load_fence_library(const std::shared_ptr<client_impl>& c, fence_load_handler done) {
    auto run = std::make_shared<load_run>();
    run->front = c;
    run->done = std::move(done);
    asio::post(c->strand(), [run] {
        if (run->front->router() == nullptr) return run->load_on(*run->front, {});
        client_impl::exec_options opts;
        opts.idempotent = true;
        run->front->exec(command{"PING"}.payload(), opts,
                         asio::bind_executor(run->front->strand(), [run](error_code ec, reply r) {
                             run->on_map(ec, std::move(r));
                         }));
    });
}

}  // namespace corolock::detail
