// corolock: the command-line tool. See `corolock --help` and docs/cli.md.
#include "cli.hpp"

#include <sys/auxv.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
    namespace cli = corolock::cli;
    // Set-user-ID, set-group-ID or with file capabilities, corolock would
    // run COMMAND, read --password-file and the TLS key files, and trust
    // PATH, REDIS_URL and COROLOCK_LOG_LEVEL with privileges its caller does
    // not have. Nothing of that is made safe here, so it refuses before
    // looking at anything. AT_SECURE is the kernel's own answer ("this exec
    // gained privileges"), file capabilities included; the uid and gid
    // comparison also covers a process that changed them after its exec.
    if (::getauxval(AT_SECURE) != 0 || ::getuid() != ::geteuid() || ::getgid() != ::getegid()) {
        std::fputs("corolock: refusing to run set-user-ID or set-group-ID (real and effective "
                   "user or group differ) or with file capabilities; install corolock without "
                   "the setuid/setgid bit or capabilities\n",
                   stderr);
        return cli::exit_status::no_permission;
    }
    // corolock may hold a password (the URL's, --password-file's,
    // COROLOCK_PASSWORD) for as long as it runs: no core file may hold it,
    // and no other process of the same user may read it through ptrace or
    // /proc/PID/mem. COMMAND is not affected (an exec makes a process
    // dumpable again).
    (void)::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    std::vector<std::string_view> args;
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);

    // corolock fence parses its own arguments (fence_command.cpp).
    if (!args.empty() && args[0] == "fence")
        return cli::fence_command(std::vector<std::string_view>(args.begin() + 1, args.end()));
    cli::parsed_command cmd;
    if (auto err = cli::parse_command_line(args, cmd)) {
        const std::string prefix = err->command.empty() ? "" : err->command + ": ";
        cli::report_error(prefix + err->message);
        std::fprintf(stderr, "Try 'corolock %s--help' for more information.\n",
                     err->command.empty() ? "" : (err->command + " ").c_str());
        return cli::exit_status::usage;
    }
    // What the parser had to say about the command's URL (a ZooKeeper URL
    // without credentials), once.
    const cli::common_options* common = cmd.what == cli::parsed_command::kind::run ? &cmd.run.common
                                        : cmd.what == cli::parsed_command::kind::status ? &cmd.status.common
                                        : cmd.what == cli::parsed_command::kind::break_lock ? &cmd.brk.common
                                        : cmd.what == cli::parsed_command::kind::list ? &cmd.list.common
                                        : cmd.what == cli::parsed_command::kind::check ? &cmd.check.common
                                        : cmd.what == cli::parsed_command::kind::elect ? &cmd.run.common
                                        : cmd.what == cli::parsed_command::kind::leader ? &cmd.leader.common
                                                                                       : nullptr;
    if (common != nullptr)
        for (const auto& w : common->warnings) cli::report_warning(w);
    try {
        switch (cmd.what) {
        case cli::parsed_command::kind::help:
            std::fputs(cli::help_text(cmd.help_topic).c_str(), stdout);
            return cli::exit_status::ok;
        case cli::parsed_command::kind::version:
            std::fwrite(cli::version_text().data(), 1, cli::version_text().size(), stdout);
            return cli::exit_status::ok;
        case cli::parsed_command::kind::run: return cli::run_command(cmd.run);
        case cli::parsed_command::kind::status: return cli::status_command(cmd.status);
        case cli::parsed_command::kind::break_lock: return cli::break_command(cmd.brk);
        case cli::parsed_command::kind::list: return cli::list_command(cmd.list);
        case cli::parsed_command::kind::check: return cli::check_command(cmd.check);
        case cli::parsed_command::kind::elect: return cli::elect_command(cmd.run);
        case cli::parsed_command::kind::leader: return cli::leader_command(cmd.leader);
        }
    } catch (const std::exception& e) {
        // Setting up the event loop or the signal handling failed.
        cli::report_error(std::string("internal error: ") + e.what());
    }
    return cli::exit_status::os_error;
}
