// corolock's default logger: quiet unless COROLOCK_LOG_LEVEL names a level
// (trace, debug, info, warn, error, critical). Users inject their own through
// config::logger. Log calls check the level before formatting anything.
//
// Every untrusted argument of a log line (lock names, channels, owners,
// hosts, server text, exception text) goes in as escaped{...}: printable()
// runs when the line is formatted, so a disabled level costs nothing, and a
// newline or an escape sequence can neither forge a line nor reach a terminal.
#pragma once

#include <corolock/printable.hpp>

#include <fmt/format.h>

#include <memory>
#include <string_view>

namespace spdlog { class logger; }

namespace corolock::detail {

std::shared_ptr<spdlog::logger> default_logger();
// `given` (a user's config::logger or backend_config::logger), or the
// default logger when it is null: the one rule every backend follows.
std::shared_ptr<spdlog::logger> logger_or_default(std::shared_ptr<spdlog::logger> given);

// A log argument shown through printable() (see printable.hpp). Holds a view:
// use it only inside the log call's own expression.
struct escaped {
    std::string_view bytes;
};

}  // namespace corolock::detail

template <>
struct fmt::formatter<corolock::detail::escaped> : fmt::formatter<std::string_view> {
    template <class FormatContext>
    auto format(const corolock::detail::escaped& e, FormatContext& ctx) const {
        return fmt::formatter<std::string_view>::format(corolock::printable(e.bytes), ctx);
    }
};
