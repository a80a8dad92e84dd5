// --metrics-file: the run's metrics as a Prometheus textfile, written the way
// node_exporter's textfile collector wants it: whole or not at all.
#include "cli.hpp"

#include <corolock/metrics.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace corolock::cli {

namespace {

std::string directory_of(const std::string& path) {
    const auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

bool write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

}  // namespace

std::optional<std::string> check_metrics_file(const std::string& path) {
    if (path.empty() || path.back() == '/') return std::string("names no file");
    const auto dir = directory_of(path);
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
        return "cannot write to its directory '" + dir + "': " + std::strerror(errno);
    return std::nullopt;
}

std::string run_metrics_text(const std::string& lock, const metrics_snapshot& m, int exit_status) {
    const metric_labels labels{{"lock", lock}};
    const std::string label = "{lock=\"" + prometheus_label_value(lock) + "\"}";
    std::string text = to_prometheus(m, labels);
    text += "# HELP corolock_run_exit_status The exit status of corolock run.\n"
            "# TYPE corolock_run_exit_status gauge\n"
            "corolock_run_exit_status" + label + " " + std::to_string(exit_status) + "\n";
    text += "# HELP corolock_run_end_time_seconds When corolock run ended, in Unix time.\n"
            "# TYPE corolock_run_end_time_seconds gauge\n"
            "corolock_run_end_time_seconds" + label + " " +
            std::to_string(static_cast<long long>(std::time(nullptr))) + "\n";
    return text;
}

std::optional<std::string> write_file_atomically(const std::string& path, std::string_view data) {
    // A temporary name in the same directory (rename is atomic only within
    // one file system) that the collector ignores: it reads *.prom only.
    std::string tmp = path + ".tmp.XXXXXX";
    const int fd = ::mkstemp(tmp.data());
    if (fd < 0) return std::string("cannot create a temporary file beside it: ") + std::strerror(errno);
    auto fail = [&](const char* doing) {
        const int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        return std::string(doing) + ": " + std::strerror(err);
    };
    // mkstemp makes it 0600; the collector often runs as another user.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    if (::fchmod(fd, 0666 & ~mask) != 0) return fail("fchmod");
    if (!write_all(fd, data)) return fail("write");
    if (::fsync(fd) != 0) return fail("fsync");
    if (::close(fd) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return std::string("close: ") + std::strerror(err);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return std::string("rename: ") + std::strerror(err);
    }
    // The rename itself is durable once the directory is synced.
    const int dir = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        ::fsync(dir);
        ::close(dir);
    }
    return std::nullopt;
}

}  // namespace corolock::cli
