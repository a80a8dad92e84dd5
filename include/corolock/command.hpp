// One Redis command, serialized once at construction as a RESP array of bulk
// strings. Arguments are binary-safe: NUL, CR, LF and empty strings survive.
#pragma once

#include <corolock/export.hpp>

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace corolock {

// What a command argument may be: bytes, or an integer written in decimal.
// A char or a bool is refused rather than written as a number by surprise.
template <class T>
concept command_argument =
    std::convertible_to<T, std::string_view> ||
    (std::integral<std::remove_cvref_t<T>> && !std::same_as<std::remove_cvref_t<T>, char> &&
     !std::same_as<std::remove_cvref_t<T>, bool>);

class COROLOCK_API command {
public:
    command() = default;

    // command{"SET", key, value}: each argument is a string or an integer.
    // A variadic constructor rather than an initializer_list: g++ 12 fails to
    // compile an initializer_list of temporaries inside a co_await expression
    // ("array used as initializer"), which is exactly where commands are built.
    template <class... Args>
        requires(sizeof...(Args) > 0 && (command_argument<Args> && ...))
    explicit command(Args&&... args) {
        reserve(sizeof...(Args));
        (append(std::forward<Args>(args)), ...);
    }

    // Appends one more argument. Cheap: the header is rewritten on payload().
    command& arg(std::string_view a);
    command& arg(std::int64_t n);

    std::size_t size() const noexcept { return argc_; }
    bool empty() const noexcept { return argc_ == 0; }

    // The RESP encoding: "*<argc>\r\n" followed by each "$<len>\r\n<bytes>\r\n".
    std::string payload() const;
    // Appends the RESP encoding to out without a temporary.
    void append_to(std::string& out) const;

    // The first argument, upper-cased (for logs and for pub/sub detection).
    std::string name() const;
    // Every argument, as views into this command (valid while it lives
    // unchanged), the name first.
    std::vector<std::string_view> arguments() const;

    // A command that is safe to run twice (its effect does not change on a
    // repeat) may be re-sent once after the connection is lost with it
    // written. Commands are not idempotent unless marked.
    command& idempotent(bool v = true) noexcept { idempotent_ = v; return *this; }
    bool is_idempotent() const noexcept { return idempotent_; }

private:
    template <class T>
    void append(T&& a) {
        if constexpr (std::convertible_to<T, std::string_view>)
            arg(std::string_view(a));
        else
            arg(static_cast<std::int64_t>(a));
    }
    void reserve(std::size_t argc);

    std::string body_;       // the bulk strings, without the array header
    std::size_t argc_ = 0;
    bool idempotent_ = false;
};

}  // namespace corolock
