#include "core/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

namespace corolock::detail {

std::shared_ptr<spdlog::logger> default_logger() {
    // One logger for the process, built on first use. Not registered in
    // spdlog's global registry, so it cannot clash with the application's.
    static const std::shared_ptr<spdlog::logger> logger = [] {
        auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
        auto l = std::make_shared<spdlog::logger>("corolock", std::move(sink));
        l->set_level(spdlog::level::off);
        if (const char* name = std::getenv("COROLOCK_LOG_LEVEL"); name != nullptr && *name != 0)
            l->set_level(spdlog::level::from_str(name));
        return l;
    }();
    return logger;
}

}  // namespace corolock::detail
