// The Redis side of the fences (docs/fencing.md): the Redis Functions
// library `corolock` and its loading, on the one server or on every primary
// of a Cluster. Strand-free: callers hand a client and a callback.
#pragma once

#include "redis/connection/client_impl.hpp"

#include <corolock/fence.hpp>
#include <corolock/reply.hpp>

#include <functional>
#include <memory>
#include <string_view>

namespace corolock::detail {

// The library's source, as FUNCTION LOAD takes it ("#!lua name=corolock").
std::string_view fence_library_source() noexcept;
// The generic function async_fenced_exec calls:
//   FCALL corolock_fenced_exec 2 FENCEKEY KEY TOKEN NAME ARG...
inline constexpr std::string_view fenced_exec_function = "corolock_fenced_exec";

// error::no_functions, the reply's text saying why, for a server that does
// not know FUNCTION or FCALL (Redis < 7.0, or the command renamed away);
// else `ec` unchanged.
error_code functions_error(error_code ec, reply& r);
// Whether an FCALL's error reply says the library is not loaded there.
bool is_function_missing(const reply& r) noexcept;

// FUNCTION LOAD REPLACE of the library: on the client's server, or on every
// primary of its Cluster (each through a connection of its own, stopped
// afterwards). Completes once, on the client's strand, with the first
// failure: error::no_functions (the reply's text says why) when the server
// does not know FUNCTION (Redis < 7, or the command renamed away). On a
// Cluster nothing is rolled back: the reply's text names every primary that
// lacks the library, with its reason (docs/fencing.md, "Installing").
using fence_load_handler = std::function<void(error_code, reply)>;
void load_fence_library(const std::shared_ptr<client_impl>& c, fence_load_handler done);

// async_fence_install on a Redis backend or client (fenced_exec.cpp):
// load_fence_library on its client; any other backend answers
// error::invalid_argument, the reply's text naming the Redis URLs.
void install_redis_fence(const std::shared_ptr<lock_backend>& b, fence_handler handler,
                         bool direct);

}  // namespace corolock::detail
