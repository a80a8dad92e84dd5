// Running the lock layer's Lua scripts: a call's keys and arguments
// (script_args), their RESP encoding (EVALSHA, or EVAL after NOSCRIPT), and
// the call that waits for the reply (script_call). Strand only.
#pragma once

#include "redis/connection/client_impl.hpp"
#include "redis/lock/scripts.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace corolock::detail {

class script_call;

// Runs a script by EVALSHA, falling back to EVAL on NOSCRIPT: the call
// receives the reply, and has one run in flight at a time. A priority run
// goes ahead of every command waiting, and is not re-sent after a drop. The
// NOSCRIPT fallback goes to the back of the queue; a run that must keep its
// place among the commands after it goes `by_source` (EVAL) from the start.
void run_script(client_impl& c, const script& s, std::shared_ptr<script_call> call,
                bool idempotent, bool priority = false, bool by_source = false);

// The keys and arguments of one script run, as views into the caller's
// state; numbers are written into the object's own buffer.
class script_args {
public:
    static constexpr std::size_t max_keys = 4;
    static constexpr std::size_t max_args = 6;

    script_args() = default;
    // Its number views point into the object itself.
    script_args(const script_args&) = delete;
    script_args& operator=(const script_args&) = delete;

    void key(std::string_view k) noexcept;
    void arg(std::string_view a) noexcept;
    void arg(std::int64_t n) noexcept;
    std::span<const std::string_view> keys() const noexcept { return {keys_.data(), nkeys_}; }
    std::span<const std::string_view> args() const noexcept { return {args_.data(), nargs_}; }

private:
    std::array<std::string_view, max_keys> keys_{};
    std::array<std::string_view, max_args> args_{};
    std::array<std::array<char, 24>, max_args> numbers_{};
    std::size_t nkeys_ = 0;
    std::size_t nargs_ = 0;
};

// The RESP command of one script run, appended to out: EVALSHA and the
// script's SHA1 (or EVAL and its source when by_sha is false), the number
// of keys, the keys and the arguments, each a bulk string.
void append_script_command(std::string& out, const script& s, bool by_sha, const script_args& a);
// An upper bound of the bytes append_script_command() appends.
std::size_t script_command_size(const script& s, bool by_sha, const script_args& a) noexcept;

// One script run of the lock layer, sent by run_script() above. The
// object that waits for the reply is the reply target itself, and its
// arguments are produced on demand from its own state, when the command is
// written: as EVALSHA, and as EVAL when the server answered NOSCRIPT (a
// restart or SCRIPT FLUSH). Nothing is boxed, copied or kept per run.
class script_call : public reply_target {
public:
    // The keys and arguments, as views into the call's own state (valid
    // while the call and `out` live).
    virtual void arguments(script_args& out) const = 0;
    // The reply, on the strand.
    virtual void on_script_reply(error_code ec, reply r) = 0;

protected:
    ~script_call() = default;

private:
    friend void run_script(client_impl& c, const script& s, std::shared_ptr<script_call> call,
                           bool idempotent, bool priority, bool by_source);
    void on_reply(std::shared_ptr<reply_target> self, error_code ec, reply r) final;
    // The command is written straight into the client's write buffer when
    // it goes out (and again if a lost connection makes it go out again).
    void write_command(std::string& out) const final;
    std::size_t command_size() const noexcept final;

    const script* script_ = nullptr;
    // Used only for the EVAL after NOSCRIPT, which only a server reply
    // brings: the client delivering it is alive then.
    client_impl* client_ = nullptr;
    bool idempotent_ = false;
    bool by_source_ = false;  // this run is the EVAL fallback
};

// A call whose keys and arguments are copied and kept, answered through a
// callback: for the rare paths (admin calls, clean-up after a lost lease).
using script_handler = std::function<void(error_code, reply)>;
std::shared_ptr<script_call> make_stored_call(std::span<const std::string_view> keys,
                                              std::span<const std::string_view> args,
                                              script_handler handler);

}  // namespace corolock::detail
