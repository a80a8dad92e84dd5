// The corolock command-line tool: shared declarations.
//
//   arguments.cpp   command-line parsing on CLI11: the top level, status/list/break/check/
//                   leader, durations, usage errors; arguments.hpp: what the parser's files share
//   connection_options.cpp  the options every command takes and the URL they lead to
//   run_arguments.cpp       run's and elect's options
//   help.cpp        --help texts; run_help.cpp: run's and elect's
//   session.cpp     connecting: config, logger, the reachability check, exit codes
//   run_command.cpp corolock run: its phases, from the backend to the release
//   run_child.*     run's child: spawned, signalled, reaped; its descriptors and environment
//   run_lock.hpp    what run takes (run_lock) and holds (held_lock)
//   run_state.hpp   one run's state; run_watch.cpp: the coroutines beside its flow
//   status_command.cpp, break_command.cpp, list_command.cpp  corolock status / break / list;
//                   inspect_common.*: what the three share (a service per command, a lock's JSON)
//   metrics_file.cpp      run --metrics-file
//   elect_command.cpp     corolock elect (run's flow, a campaign for the lock)
//   leader_command.cpp    corolock leader
//   main.cpp        dispatch
#pragma once

#include <corolock/admin.hpp>
#include <corolock/config.hpp>
#include <corolock/error.hpp>
#include <corolock/lock_holder.hpp>
#include <corolock/lock_options.hpp>
#include <corolock/url.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <exception>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace corolock {
class client;
struct metrics_snapshot;
namespace detail::etcd { class admin; }
}
namespace spdlog { class logger; }

namespace corolock::cli {

using duration = std::chrono::milliseconds;

// The completion token of the tool's coroutines: co_await gives a tuple
// (error_code first), never an exception.
inline constexpr auto use_nothrow = boost::asio::as_tuple(boost::asio::use_awaitable);

// Exit statuses of the tool itself, sysexits(3) style where one fits, so a
// caller can tell "the lock was busy" from "Redis is down" from "you typed it
// wrong". `run` otherwise passes the command's own status through, which is
// why these stay clear of the small numbers commands use.
namespace exit_status {
inline constexpr int ok = 0;
inline constexpr int stale_token = 1;     // check: the token is not the current holder's grant
inline constexpr int not_held = 1;        // status: the lock is free (0: held), as test(1)
inline constexpr int usage = 64;          // EX_USAGE: bad command line
inline constexpr int unavailable = 69;    // EX_UNAVAILABLE: Redis cannot be reached
inline constexpr int lease_lost = 70;     // run: the lease was lost while COMMAND ran
inline constexpr int os_error = 71;       // EX_OSERR: spawning failed, or an internal error
inline constexpr int not_acquired = 75;   // EX_TEMPFAIL: the lock was not acquired in time
inline constexpr int remote_error = 76;   // EX_PROTOCOL: Redis answered with an error (NOPERM too)
inline constexpr int no_permission = 77;  // EX_NOPERM: corolock itself runs set-user/group-ID
inline constexpr int cannot_execute = 126;// COMMAND found but not executable (as shells do)
inline constexpr int not_found = 127;     // COMMAND not found (as shells do)
inline constexpr int signal_base = 128;   // + signal number
}  // namespace exit_status

// The tool's defaults, each stated once: the parser starts from them and the
// help texts are generated from them (help.cpp).
namespace defaults {
// The library's own default lease (lock_options).
inline constexpr duration lease = std::chrono::duration_cast<duration>(lock_options{}.lease);
// A lease so short that renewals (every lease/3) race the command timeout
// makes no sense for a process lock (the library's own floor is min_lease).
inline constexpr duration min_lease = std::chrono::milliseconds(100);
// run --on-lost kill: from SIGTERM to SIGKILL.
inline constexpr duration grace = std::chrono::seconds(5);
// A command-line tool must say "Redis is down" promptly instead of retrying
// in silence: the reachability check is one PING bounded by the command
// timeout, and a connect attempt that hangs (a black-holed address) is cut
// short enough that at least one attempt fits in it.
inline constexpr duration connect_timeout = std::chrono::seconds(2);
inline constexpr duration command_timeout = std::chrono::seconds(3);
// The library's default server (config's host and port), as a redis:// URL.
std::string url();
}  // namespace defaults

// "500ms", "10s", "2m", "1h": a whole number and a unit. Empty why on success.
std::optional<duration> parse_duration(std::string_view text, std::string& why);
std::string format_duration(duration d);

// "host:port" for messages (connection_options.cpp), never the password; for a
// Sentinel URL its service and Sentinels, for a Cluster URL "cluster seeds
// host:port,...".
std::string describe_server(const config& cfg);

// The lock service a URL names, by its scheme: redis (redis://, rediss://,
// the +sentinel and +cluster forms, and anything else, which the Redis
// parser then explains), etcd (etcd://, etcds://), zk (zk://) or
// postgresql (postgresql://, postgres://); redlock (redlock://,
// redlock+redis://, redlock+rediss://) until resolve_url expands it into
// nodes (common_options::nodes), after which the kind is redis.
enum class url_kind { redis, etcd, zk, postgresql, redlock };
url_kind kind_of_url(std::string_view url);

// A usage error: what was wrong, in words a user can act on.
struct usage_error {
    std::string command;  // "run", "status", ... or empty for the top level
    std::string message;
};

// Options every command that talks to Redis takes.
struct common_options {
    std::string url;       // resolved: --url, else $REDIS_URL, else defaults::url()
    std::string url_from;  // "--url", "REDIS_URL" or "default", for messages
    config cfg;            // parsed from url, with the password and TLS options applied
                           // (Redis URLs only; empty for the others)
    int verbosity = 0;     // -v: info, -vv: debug
    // Which service the lock is on; for all but Redis cfg is unused, and
    // endpoints is "host:port[,...]" for messages.
    url_kind kind = url_kind::redis;
    std::string endpoints;
    bool redis() const noexcept { return kind == url_kind::redis; }
    // Several --url (run only): the RedLock's nodes, each parsed as cfg is,
    // in the order given; cfg is the first. Empty otherwise.
    std::vector<config> nodes;
    bool redlock() const noexcept { return !nodes.empty(); }
    // A redlock:// URL's node_timeout_ms (the library's default otherwise).
    std::optional<duration> redlock_node_timeout;
    // Said once, on standard error, before the command runs (main.cpp).
    std::vector<std::string> warnings;
};

enum class on_lost_action { kill, ignore };

// What `run` takes: a plain lock (a mutex, fair mutex or semaphore by the
// other options), or a shared mutex's shared (-s) or exclusive (-x) level.
enum class lock_level { mutex, shared, exclusive };

// run takes at most this many NAMEs (a multi_lock), a bound far above any
// sane use that keeps a typo from taking a thousand locks.
inline constexpr std::size_t max_run_names = 64;

struct run_options {
    common_options common;
    std::vector<std::string> names;  // distinct, in canonical (bytewise) order: the acquire order
    std::string name;                // for messages and metrics: the names joined by ','
    bool several() const noexcept { return names.size() > 1; }
    duration lease = defaults::lease;
    std::string lease_text = format_duration(defaults::lease);
    std::optional<duration> wait;  // absent: wait until signalled
    std::string wait_text;
    int conflict_exit_code = exit_status::not_acquired;  // -E: when not acquired in time
    int replicas = 0;              // --replicas: lock_options::replicas
    duration lock_delay{};         // --lock-delay: lock_options::lock_delay
    std::uint32_t capacity = 0;    // --capacity: a semaphore of N permits (0: a mutex)
    std::uint32_t permits = 1;     // --permits: how many of them
    bool fair = false;             // --fair: a corolock::fair_mutex (Redis only)
    lock_level level = lock_level::mutex;  // -s / -x: a corolock::shared_mutex (Redis only)
    bool quiet = false;            // -q: no message when the lock is not acquired
    on_lost_action on_lost = on_lost_action::kill;
    duration grace = defaults::grace;
    bool own_process_group = true; // --no-process-group turns it off
    bool pass_credentials = false; // --pass-credentials: REDIS_URL/COROLOCK_PASSWORD kept for COMMAND
    std::string metrics_file;      // --metrics-file: empty for none
    // The holder label the lock records (status, list): --label TEXT, empty
    // with --no-label; absent: COMMAND's program name (command_label()).
    std::optional<std::string> label;
    std::vector<std::string> command;
    // elect (elect_command.cpp): campaigns for names.front() with this
    // value (--value) instead of taking a lock; absent for run.
    std::optional<std::string> leader_value;
    bool elect() const noexcept { return leader_value.has_value(); }
};

// The holder label run records by default: COMMAND's program name (the last
// path segment of its first word), never its arguments, which may hold a
// secret and are shown to anyone who may run status or list.
std::string command_label(const std::vector<std::string>& command);

struct status_options {
    common_options common;
    std::string name;
    bool json = false;
};

struct break_options {
    common_options common;
    std::string name;
};

// check: [options] NAME TOKEN (the sequencer check, async_check_token).
struct check_options {
    common_options common;
    std::string name;
    std::uint64_t token = 0;
};

struct list_options {
    common_options common;
    std::string pattern;  // a glob over lock names; empty: every name
    bool json = false;
};

// leader: [options] [--json] [--watch] NAME (leader_command.cpp).
struct leader_options {
    common_options common;
    std::string name;
    bool json = false;
    bool watch = false;  // one line per change until SIGTERM/SIGINT
};

// What the command line asked for.
struct parsed_command {
    enum class kind { help, version, run, status, break_lock, list, check, elect, leader } what =
        kind::help;
    std::string help_topic;  // kind::help: "" for the overview, or a command name
    run_options run;
    status_options status;
    break_options brk;
    list_options list;
    check_options check;
    leader_options leader;  // kind::elect fills run (run_options::leader_value)
};

// Parses argv (without argv[0]). Returns the usage error on failure.
std::optional<usage_error> parse_command_line(const std::vector<std::string_view>& args,
                                              parsed_command& out);

// A command that takes the options every command takes (the same
// definitions: --url, --password-file, the TLS options, -v, -h) and no
// positional (fence install): into o, the URL resolved as for the others
// (one --url only). `help` set when -h/--help was given (o is then unset).
std::optional<usage_error> parse_options_only(const std::string& cmd,
                                              const std::vector<std::string_view>& args,
                                              common_options& o, bool& help);

// Every option name ("-w", "--wait", ...) the parser knows for a command
// (run, status, list, break, check, fence): what the help must document.
std::vector<std::string> parser_option_names(std::string_view command);

// How a lock's holder reads in text (defined in inspect_common.cpp):
// RFC 3339 UTC with milliseconds; "2d 3h 4m 5s" (or "12.345s"); host:pid,
// escaped.
std::string format_time(std::chrono::system_clock::time_point t);
std::string format_held_for(std::chrono::milliseconds d);
std::string holder_text(const lock_holder& h);

// Help texts (help.cpp). Empty topic: the overview. Unknown topic: empty string.
std::string help_text(std::string_view topic);
// run's and elect's, with the @NAME@ tokens help_text fills in (run_help.cpp).
extern const std::string_view run_help;
extern const std::string_view elect_help;
// corolock list's columns in order, each in one unit (help.cpp, where
// 'help list' documents each): the header list prints.
std::vector<std::string_view> list_column_names();
std::string_view version_text();

// ---- session.cpp ----

// A logger for -v/-vv on stderr; null when verbosity is 0 (the library's own
// quiet default then applies, which COROLOCK_LOG_LEVEL can still turn up).
std::shared_ptr<spdlog::logger> make_logger(int verbosity);

// The client configuration the tool uses: the parsed URL plus timeouts short
// enough that an unreachable server is reported within a few seconds.
config tool_config(const common_options& o);
// The same for one server's config (a RedLock node's).
config tool_config(config cfg, int verbosity);

// How long one request may take: the Redis command timeout tool_config
// sets, or the etcd request timeout.
duration request_timeout(const common_options& o);

// The etcd admin (status, break, and run's first look) for an etcd URL,
// with the same short bounds as tool_config. Throws system_error for a bad URL.
std::unique_ptr<detail::etcd::admin> make_etcd_admin(boost::asio::any_io_executor ex,
                                                     const common_options& o);

// A lock's state on ZooKeeper or PostgreSQL, as store_admin reads it.
struct store_lock_status {
    bool held = false;
    std::string owner;                  // the holder's owner id
    std::optional<lock_holder> holder;  // its holder record, when it has one
    std::uint64_t last_token = 0;       // the holder's latest token (zk), the name's last fence (pg)
    std::size_t waiters = 0;            // contenders in line behind the holder
    std::string node;                   // zk: the holder's node
    std::int64_t session_pid = 0;       // pg: the holding session's server process
};

// The locks store_admin::list found held, and whether a bound ended the
// listing early (there may be more).
struct store_lock_list {
    struct entry {
        std::string name;
        store_lock_status status;
    };
    std::vector<entry> locks;
    bool truncated = false;
};

// ZooKeeper's or PostgreSQL's admin (zk/zk_admin.hpp, pg/pg_admin.hpp)
// behind run's first look, status, list and break, with the tool's short
// bounds.
class store_admin {
public:
    virtual ~store_admin() = default;
    // Success once the service answered (a session, or a connection).
    virtual boost::asio::awaitable<error_code> connect() = 0;
    virtual boost::asio::awaitable<std::tuple<error_code, store_lock_status>> status(
        std::string name) = 0;
    // The locks held whose name matches the glob (empty: every name).
    virtual boost::asio::awaitable<std::tuple<error_code, store_lock_list>> list(
        std::string pattern) = 0;
    // Removes the holder of `name`; answers what it removed (held false:
    // nothing was held).
    virtual boost::asio::awaitable<std::tuple<error_code, store_lock_status>> break_lock(
        std::string name) = 0;
    // The cause of the last failure, in words (never the password).
    virtual std::string last_error() const = 0;
    virtual void stop() noexcept = 0;
};
// For a zk:// or postgresql:// URL the parser accepted.
std::unique_ptr<store_admin> make_store_admin(boost::asio::any_io_executor ex,
                                              const common_options& o);

// "Redis", "etcd", "ZooKeeper" or "PostgreSQL": the service the URL names,
// for messages.
std::string_view service_name(const common_options& o);
// "Redis at host:port" or "etcd at host:port[,...]", for messages.
std::string service_at(const common_options& o);

// Sends one PING: success once Redis answers. Bounded by the command timeout.
// Cancellation through `slot` (terminal) ends it early with operation_aborted.
boost::asio::awaitable<error_code> check_reachable(client& c,
                                                   boost::asio::cancellation_slot slot = {});

// Maps a library error to the tool's exit status.
int exit_status_for(const error_code& ec);

// Prints "corolock: <message>" to stderr.
void report_error(std::string_view message);
// Prints "corolock: warning: <message>" to stderr.
void report_warning(std::string_view message);
// Reports an exception that escaped a command's coroutine ("internal
// error: ...") and returns exit_status::os_error; 0 for no exception.
int report_internal_error(std::exception_ptr e) noexcept;

// Explains a failure to reach or use Redis and returns the exit status.
// `cause`: the client's last_error().message (what the last connection
// attempt or the server said), shown in place of the code's generic text.
// `reached`: a PING on this connection was answered before, so the
// credentials are good and an auth_failed means the user lacks a
// permission: exit 76, not 69 (no_permission is 76 in any case).
int report_redis_failure(const common_options& o, std::string_view doing, const error_code& ec,
                         std::string_view cause, bool reached = false);

// ---- metrics_file.cpp ----

// Why `path` cannot be a --metrics-file (its directory is not writable);
// empty when it can.
std::optional<std::string> check_metrics_file(const std::string& path);
// The run's metrics in the Prometheus text format, labelled with the lock,
// plus the run's exit status and end time.
std::string run_metrics_text(const std::string& lock, const metrics_snapshot& m, int exit_status);
// Writes a temporary file beside `path`, fsyncs it and renames it over
// `path`, so a reader sees the old file or the new one, never a part. Returns
// why it failed (nothing is left behind then).
std::optional<std::string> write_file_atomically(const std::string& path, std::string_view data);

// ---- the commands ----
int run_command(const run_options& o);
int status_command(const status_options& o);
int break_command(const break_options& o);
int list_command(const list_options& o);
int check_command(const check_options& o);
int elect_command(const run_options& o);    // elect_command.cpp: run_command with a campaign
int leader_command(const leader_options& o);  // leader_command.cpp
// corolock fence (fence_command.cpp): its own arguments, after "fence".
int fence_command(const std::vector<std::string_view>& args);
std::string fence_help_text();  // fence_help.cpp

}  // namespace corolock::cli
