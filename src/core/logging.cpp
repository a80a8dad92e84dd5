#include "core/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

namespace corolock::detail {

std::shared_ptr<spdlog::logger> default_logger() {
    // One logger for the process, built on first use: quiet (level off)
    // unless COROLOCK_LOG_LEVEL names a level. It is registered with spdlog
    // as "corolock", so that spdlog::set_level, spdlog::get("corolock") and
    // SPDLOG_LEVEL (spdlog::cfg::load_env_levels) reach it. An application
    // that registered its own "corolock" logger first gets that one used.
    static const std::shared_ptr<spdlog::logger> logger = [] {
        if (auto theirs = spdlog::get("corolock")) return theirs;
        auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
        auto l = std::make_shared<spdlog::logger>("corolock", std::move(sink));
        l->set_level(spdlog::level::off);
        if (const char* name = std::getenv("COROLOCK_LOG_LEVEL"); name != nullptr && *name != 0)
            l->set_level(spdlog::level::from_str(name));
        try {
            spdlog::register_logger(l);
        } catch (const spdlog::spdlog_ex&) {
            // Registered by another thread meanwhile: use that one.
            if (auto theirs = spdlog::get("corolock")) return theirs;
        }
        return l;
    }();
    return logger;
}

std::shared_ptr<spdlog::logger> logger_or_default(std::shared_ptr<spdlog::logger> given) {
    return given ? std::move(given) : default_logger();
}

}  // namespace corolock::detail
