// corolock's default logger: quiet unless COROLOCK_LOG_LEVEL names a level
// (trace, debug, info, warn, error, critical). Users inject their own through
// config::logger. Log calls check the level before formatting anything.
#pragma once

#include <memory>

namespace spdlog { class logger; }

namespace corolock::detail {

std::shared_ptr<spdlog::logger> default_logger();

}  // namespace corolock::detail
