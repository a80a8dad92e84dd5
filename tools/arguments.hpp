// The command-line parser's parts shared by its files: the CLI11 plumbing and
// the checks every command uses (arguments.cpp), the options every command
// takes and its URL (connection_options.cpp), run's and elect's options
// (run_arguments.cpp). Only the parser's files include it.
#pragma once

#include "cli.hpp"

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corolock::cli {

// Anything longer is surely a typo, and it keeps the arithmetic far from overflow.
inline constexpr duration max_duration = std::chrono::hours(24 * 365);

// Quoted for a message; the bytes are made printable when the whole message
// is (report_error), so a name with a newline cannot forge another line.
std::string single_quoted(std::string_view s);

// --password-file, the --tls-* options: applied to the parsed URL.
struct credential_options {
    std::optional<std::string> password_file;
    std::optional<std::string> tls_ca, tls_cert, tls_key, tls_server_name;
    std::optional<std::string> sentinel_tls_server_name;
    bool tls_insecure = false;
    bool any_tls() const {
        return tls_ca || tls_cert || tls_key || tls_server_name || sentinel_tls_server_name ||
               tls_insecure;
    }
};

// The option parser is CLI11 (Debian 12's libcli11-dev): a Debian package,
// header-only (nothing to link or to ship), and made for a tool with
// subcommands: short-option bundling ("-nq", "-w5", "-E0"), "--opt=value",
// repeated options (several --url), "-vv", "--". Its own help is turned off:
// `corolock help` (help.cpp) is the one help source, from which the man page
// and the bash completion are generated (packaging/cli_docs.cpp), and a unit
// test checks that every option given to CLI11 is documented there
// (cli_defaults_test.cpp, parser_option_names). What CLI11 does not know is
// the meaning of a value: each value is checked below, with a message that
// names the option as the user typed it.

// An option's value as typed: "-w" or "--wait", and its text.
struct typed_value {
    std::string option;
    std::string value;
};
using value_slot = std::optional<typed_value>;

// Each of `names` ("-w,--wait") is registered as an option of its own that
// takes one value, so that a message names the spelling the user typed. The
// last one given wins.
void value_option(CLI::App& app, std::string_view names, value_slot& slot);

// A flag: counts how often it is given; "--flag=value" is refused.
void flag_option(CLI::App& app, std::string_view names, int& count);

// The options every command takes.
struct common_slots {
    std::vector<std::string> urls;  // each --url given (several: RedLock's nodes, run only)
    int verbose = 0;
    int help = 0;
    value_slot password_file, tls_ca, tls_cert, tls_key, tls_server_name,
        sentinel_tls_server_name;
    int tls_insecure = 0;
};

// Registers them on a command's parser.
void add_common_options(CLI::App& app, common_slots& s);

// Their values, checked, into o (and cred: applied once the URL is parsed).
std::optional<usage_error> read_common_options(const std::string& command, const common_slots& s,
                                               common_options& o, credential_options& cred);

// Runs CLI11 over one command's arguments. A CLI11 error is put in the
// tool's words where it has some: a missing value, a value given to a flag.
std::optional<usage_error> run_parser(CLI::App& app, const std::string& command,
                                      const std::vector<std::string_view>& args);

// An option rather than a word: "-x", "--xyz" ("-" alone is a word).
bool is_option(std::string_view tok);

// The first option CLI11 did not know (it leaves them in remaining()).
std::optional<usage_error> unknown_option(const std::string& command,
                                          const std::vector<std::string>& remaining);

// Resolves --url / $REDIS_URL / the default and parses it, then applies the
// password and TLS options. Several --url: RedLock's nodes (run only).
std::optional<usage_error> resolve_url(const std::string& command,
                                       const std::vector<std::string_view>& urls,
                                       common_options& o, const credential_options& cred);

// A lock NAME, checked by the library's rule (validate_lock_name).
std::optional<usage_error> check_name(const std::string& command, std::string_view name);

// run's own options.
struct run_slots {
    value_slot lease, wait, conflict_exit_code, replicas, capacity, permits, grace, on_lost,
        label, metrics_file, lock_delay, shell_command;
    value_slot leader_value;  // elect's --value
    int quiet = 0, fair = 0, shared = 0, exclusive = 0, no_process_group = 0,
        pass_credentials = 0, no_label = 0, no_wait = 0;
    // flock(1)'s -o, -u and -F: accepted (-o) or refused with the reason.
    int close = 0, unlock = 0, no_fork = 0;
};

// elect's: the held ones and the leader's value.
void add_elect_options(CLI::App& app, run_slots& s);

// run's: the held ones and run's own.
void add_run_options(CLI::App& app, run_slots& s);

// run [OPTIONS] NAME COMMAND [ARGS...], as flock(1): the first word after
// NAME starts COMMAND (options after it are COMMAND's). run [OPTIONS] NAME...
// -- COMMAND [ARGS...]: with "--" (which several NAMEs need), the words
// before the first "--" are NAMEs and options, everything after it COMMAND.
// run [OPTIONS] NAME -c 'SHELL COMMAND': $SHELL (else /bin/sh) -c, as flock.
// elect (cmd "elect"): the same forms with one NAME, elect's options.
std::optional<usage_error> parse_run(const std::vector<std::string_view>& args,
                                     parsed_command& out, const std::string& cmd = "run");

}  // namespace corolock::cli
