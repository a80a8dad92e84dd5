// The --help texts (run's and elect's: run_help.cpp). docs/cli.md is the
// long form; keep the two in step.
#include "cli.hpp"

#include <corolock/admin.hpp>

#include <string>
#include <utility>

namespace corolock::cli {

namespace {

constexpr std::string_view overview = R"(corolock - a distributed lock on Redis, from the shell

Usage:
  corolock run [OPTIONS] NAME COMMAND [ARGS...]
  corolock run [OPTIONS] NAME -c 'SHELL COMMAND'
  corolock run [OPTIONS] NAME [NAME...] -- COMMAND [ARGS...]
  corolock elect [OPTIONS] [--value TEXT] NAME [--] COMMAND [ARGS...]
  corolock leader [OPTIONS] [--json] [--watch] NAME
  corolock status [OPTIONS] [--json] NAME
  corolock list [OPTIONS] [--json] [PATTERN]
  corolock break [OPTIONS] NAME
  corolock check [OPTIONS] NAME TOKEN
  corolock help [COMMAND]
  corolock --help | --version | -V

Commands:
  run     Hold the lock NAME while COMMAND runs (a distributed flock(1)).
  elect   Campaign to lead NAME; run COMMAND while leader, with the term's
          epoch (a fencing token) in COROLOCK_EPOCH.
  leader  Show who leads NAME (exit 0), or that nobody does (exit 1);
          --watch: one line per change.
  status  Show who holds the lock NAME, since when, its remaining lease and
          last token.
  list    Show every held lock (or those whose name matches PATTERN) and
          who holds it.
  break   Force-release the lock NAME, whoever holds it, and wake its waiters.
  check   Tell whether TOKEN is still the current holder's fencing token of
          NAME (exit 0) or stale (exit 1).
  fence   fence install: the fencing-token check where the data lives
          (Redis Functions, PostgreSQL); see corolock help fence.
  help    Show this text, or a command's own help.

Options every command takes:
  --url URL       Redis to use: redis://[user[:password]@]host[:port][/db], or
                  rediss://... for TLS. Default: $REDIS_URL, else
                  @URL@. Behind Sentinel:
                  redis+sentinel://[user:pass@]host:26379[,...]/SERVICE[/db]
                  (rediss+sentinel:// for TLS). A Cluster, by seed nodes:
                  redis+cluster://[user:pass@]host:port[,...] (rediss+cluster://
                  for TLS). Or etcd: etcd://host:port[,...][/prefix]
                  (etcds://...[?ca_file=PATH] for TLS) for run, status, list,
                  break. Or ZooKeeper: zk://[user:pass@]host:port[,...]
                  [/root] (digest credentials), or PostgreSQL:
                  postgresql://[user[:pass]@]host[:port]/db (postgres://
                  too), for run, status, list, break.
  --password-file FILE  The password: the first line of FILE. Overrides the
                  URL's password and $COROLOCK_PASSWORD; keeps it out of ps.
                  Redis, and ZooKeeper with zk://user@...
  --tls-ca FILE, --tls-cert FILE, --tls-key FILE, --tls-server-name NAME,
  --tls-insecure  TLS: CA bundle, client certificate and key, the name the
                  Redis servers' certificates must carry (and SNI; default:
                  the host, for a Sentinel's primary the address it names),
                  or no verification at all. Any of them turns TLS on, also
                  for a redis:// URL.
  --sentinel-tls-server-name NAME  The name the Sentinels' certificates must
                  carry (Sentinel URLs; default: --tls-server-name, else each
                  Sentinel's host in the URL).
  -v, --verbose   Log connection and lock events to stderr (-vv: debug).
  -h, --help      Show the command's help.

Names, owner ids and server text are printed with control bytes escaped
(\n, \xNN, ...); --json output is JSON-escaped.

Exit statuses:
  0    success (run, elect: COMMAND's own status is passed through instead;
       check: the token is current; status: the lock is held; leader: NAME
       has a leader)
  1    check: the token is stale; status: the lock is free; leader: no
       leader
  64   usage error: the message says what was wrong
  69   the service (Redis, etcd, ZooKeeper, PostgreSQL) cannot be reached
  70   run: the lease was lost while COMMAND ran (--on-lost kill); elect:
       the leadership was lost
  71   run: COMMAND could not be started, or an internal error
  75   run: the lock was not acquired within --wait (or at once, --no-wait);
       elect: not elected within --wait
  76   Redis answered with an error (e.g. the key is not a corolock lock), or
       denied the command (NOPERM: the user's ACL lacks a permission); elect,
       leader: the service has no leader election (e.g. RedLock)
  77   corolock was installed set-user-ID or set-group-ID, or with file
       capabilities: it refuses to run
  126  run: COMMAND was found but cannot be executed
  127  run: COMMAND was not found
  128+N  run: COMMAND was killed by signal N, or corolock itself got signal N
       while waiting for the lock

Environment:
  REDIS_URL           The default for --url.
  COROLOCK_PASSWORD   The password, unless --password-file is given
                      (overrides the URL's; like redis-cli's REDISCLI_AUTH).
  COROLOCK_LOG_LEVEL  Library log level when -v is not given (trace, debug,
                      info, warn, error).

Lock names are 1 to 512 bytes without '{' or '}'. The keys are
corolock:{NAME} (the lock), corolock:{NAME}:fence (the token counter) and the
channel corolock:{NAME}:unlock.

Examples:
  corolock run -n deploy make deploy             # as flock -n FILE COMMAND
  corolock run -n -q backup -c './backup.sh >/dev/null'  # cron: skip silently if busy
  corolock run --wait 2m db-migrate -- ./migrate.sh
  corolock status --json deploy
  corolock list 'db-*'
  corolock break deploy

Run 'corolock help COMMAND' for a command's options and more examples.
)";

constexpr std::string_view leader_help = R"(Usage: corolock leader [OPTIONS] [--json] [--watch] NAME

Shows who leads NAME: its value, epoch, holder (host:pid) and since when,
on one line:
  leader of 'NAME': epoch 7, value 'host-a:8080', host-a:4242 since TIME
  no leader of 'NAME'
A leader is reported only while its term is live on the server. It never
campaigns: any process may ask.

Options:
  --url URL       The election's service (default: $REDIS_URL, else @URL@).
  --json          One JSON object a line: name, leader (true or false), and
                  with a leader value, epoch, host, pid, label, since.
  --watch         Print the current state, then one line per change (a new
                  term, a new value, no leader), in order and never an
                  older epoch, until SIGINT or SIGTERM (exit 0).
  --password-file FILE, --tls-ca FILE, --tls-cert FILE, --tls-key FILE,
  --tls-server-name NAME, --sentinel-tls-server-name NAME, --tls-insecure
                  As for every command.
  -v, --verbose   Log connection events to stderr (-vv: debug).
  -h, --help      Show this help.

Exit statuses: 0 a leader (--watch: stopped by a signal), 1 no leader, 64
usage error, 69 the service cannot be reached, 76 it answered with an error
or has no leader election.

Examples:
  corolock leader scheduler
  corolock leader --watch --json scheduler
)";

constexpr std::string_view status_help = R"(Usage: corolock status [OPTIONS] [--json] NAME

Shows the state of the lock NAME: whether it is held, the holder's owner id,
who the holder is (host:pid, and its label: for 'corolock run' its COMMAND),
when it took the lock and how long it has held it (both by the Redis
server's clock), the remaining lease, the re-entry count (levels) and the
last fencing token handed out for NAME (kept even while nobody holds it).
Read-only.

Options:
  --json          Print one JSON object on one line:
                  {"name":"NAME","held":true,"owner":"ID","ttl_ms":29140,
                   "levels":1,"last_token":7,"host":"web-1","pid":4242,
                   "label":"make deploy","since":"2026-11-25T19:03:18.123Z",
                   "held_for_ms":860}
                  Not held: "owner":"", "ttl_ms":0, "levels":0. host, pid,
                  label, since and held_for_ms are null when not held, or
                  when the lock records no holder (taken by an older
                  corolock). ttl_ms is -1 for a key without expiry (not one
                  corolock wrote). Redis adds lock_delay_ms (the holder's
                  --lock-delay), in_lock_delay, delayed_for_ms and
                  delayed_until (RFC 3339 by this host's clock, or null).
  --url URL       Redis to use (default: $REDIS_URL, else @URL@).
                  Or etcd://host:port[,...], zk://host:port[,...][/root] or
                  postgresql://... (see 'corolock help' and docs/cli.md).
  --password-file FILE, --tls-ca FILE, --tls-cert FILE, --tls-key FILE,
  --tls-server-name NAME, --sentinel-tls-server-name NAME, --tls-insecure
                  As for every command.
  -v, --verbose   Log connection events to stderr (-vv: debug).
  -h, --help      Show this help.

Environment: REDIS_URL is the default for --url; COROLOCK_PASSWORD the
password. In text output the name, owner, host and label are shown with
control bytes escaped.

A name in lock-delay (its holder's tenure ended without a release, and
the server keeps it for the holder's --lock-delay) shows 'held: in
lock-delay' and a 'lock-delay:' line saying until when.

Exit statuses, as test(1): 0 the lock is held, or in lock-delay (not free
to take either), 1 it is free (so 'corolock status NAME && ...' runs when
it is held); 64 usage error, 69 Redis cannot be reached, 76 Redis answered
with an error or NOPERM.

Examples:
  corolock status deploy
  corolock status --json deploy | jq -r .owner
)";

constexpr std::string_view list_help = R"(Usage: corolock list [OPTIONS] [--json] [PATTERN]

Shows every lock held now whose name matches PATTERN (a Redis glob: *, ?,
[abc], \ to escape; default every name), with its holder. It walks the keys
with SCAN (never KEYS), @LIST_STEP@ per step, and stops after @LIST_TIME@,
@LIST_STEPS@ steps or @LIST_LOCKS@ locks with a warning that there may be
more. A lock taken or released meanwhile may or may not be shown. Read-only.

Text output: a header, then one line per lock, in aligned columns (two
spaces or more between them; only LABEL, the last, may hold a space), with
control bytes escaped; '-' where a column does not apply:
@LIST_COLUMNS@

Options:
  --json          Print one JSON object on one line:
                  {"locks":[...],"truncated":false}
                  with one object per lock, as 'corolock status --json'.
  --url URL       Redis to use (default: $REDIS_URL, else @URL@).
                  Or etcd://host:port[,...]: the keys under the URL's prefix
                  are read in pages of 100 at one revision and matched
                  against PATTERN here; text output adds a WAITERS column,
                  TTL is in whole seconds (see docs/cli.md). Or
                  zk://host:port[,...][/root]: the lock directories under
                  the root, each read as status reads it (TTL is '-': the
                  holder's session is its lease); or postgresql://...:
                  the names of corolock_locks, each read as status reads
                  it.
  --password-file FILE, --tls-ca FILE, --tls-cert FILE, --tls-key FILE,
  --tls-server-name NAME, --sentinel-tls-server-name NAME, --tls-insecure
                  As for every command.
  -v, --verbose   Log connection events to stderr (-vv: debug).
  -h, --help      Show this help.

Environment: REDIS_URL is the default for --url; COROLOCK_PASSWORD the
password.

Exit statuses: 0 the list was printed (empty too), 64 usage error, 69 Redis
cannot be reached, 76 Redis answered with an error or NOPERM.

Examples:
  corolock list
  corolock list 'nightly-*'
  corolock list --json | jq -r '.locks[] | select(.held_for_ms > 86400000) | .name'
)";

// list's columns: the header it prints and the lines 'help list' shows
// (@LIST_COLUMNS@), one table.
struct list_column {
    std::string_view name;
    std::string_view doc;  // lines after the first indented by the caller
};
constexpr list_column list_columns[] = {
    {"NAME", "the lock's name"},
    {"KIND", "mutex, fair, semaphore or shared"},
    {"STATE", "held; free (a fair mutex's queue is left); or lock-delay:\n"
              "its holder's tenure ended without a release, and nobody\n"
              "can take it until DELAY(s) has passed"},
    {"HOLDER", "host:pid of the holder the lock records ('(N)' for N\n"
               "owners of a semaphore or shared mutex)"},
    {"SINCE", "when the holder took it, RFC 3339 UTC"},
    {"HELD(s)", "seconds it has been held"},
    {"TTL(s)", "seconds of lease left (etcd: whole seconds; 'none': a key\n"
               "without expiry; '-' on ZooKeeper and PostgreSQL, whose\n"
               "holder lasts as long as its session)"},
    {"DELAY(s)", "seconds of lock-delay left (STATE lock-delay)"},
    {"WAITERS", "waiters in line (a fair mutex on Redis; every lock on\n"
                "etcd, ZooKeeper and PostgreSQL)"},
    {"PERMITS", "a semaphore's permits in use/capacity"},
    {"LABEL", "the holder's label ('corolock run': --label, else its\n"
              "COMMAND's program name)"},
};

// @LIST_COLUMNS@: one line per column, its name then its doc.
std::string list_columns_text() {
    std::string out;
    for (const auto& c : list_columns) {
        std::string name(c.name);
        name.resize(10, ' ');
        out += "  " + name;
        for (char ch : c.doc) out += ch == '\n' ? std::string("\n            ") : std::string(1, ch);
        out += '\n';
    }
    out.pop_back();
    return out;
}

constexpr std::string_view break_help = R"(Usage: corolock break [OPTIONS] NAME

Force-releases the lock NAME whoever holds it: deletes the lock and publishes
on its unlock channel, so waiters take it at once instead of after the lease.
Prints what it removed:
  removed lock NAME held by OWNER (N levels)
  lock NAME was not held
The token counter is kept, so tokens keep rising.

Use it only for a holder you know is gone. A holder that is still alive keeps
running until its next renewal notices (a third of its lease at most); with
corolock run and --on-lost kill its COMMAND is then stopped and run exits 70.

Options:
  --url URL       Redis to use (default: $REDIS_URL, else @URL@).
                  Or etcd://host:port[,...] (see 'corolock help'), or
                  zk://host:port[,...][/root]: deletes the holder's node; or
                  postgresql://...: ends the holder's session
                  (pg_terminate_backend). Either way the holder is told at
                  once.
  --password-file FILE, --tls-ca FILE, --tls-cert FILE, --tls-key FILE,
  --tls-server-name NAME, --sentinel-tls-server-name NAME, --tls-insecure
                  As for every command.
  -v, --verbose   Log connection events to stderr (-vv: debug).
  -h, --help      Show this help.

Environment: REDIS_URL is the default for --url; COROLOCK_PASSWORD the
password.

Exit statuses: 0 done (also when it was not held), 64 usage error, 69 Redis
cannot be reached (if the connection dropped after sending, check with
'corolock status' whether it took effect), 76 Redis answered with an error or
NOPERM.

Example:
  corolock break nightly-report
)";

constexpr std::string_view check_help = R"(Usage: corolock check [OPTIONS] NAME TOKEN

The sequencer check: whether TOKEN (a fencing token, as a guard's token() or
corolock run's COROLOCK_TOKEN gives it) is still the current holder's grant
of the lock NAME. Current means: NAME is held and TOKEN is its latest token.
A store that cannot check fences itself asks this before it accepts a write
stamped with TOKEN. Prints one line:
  token TOKEN is current for lock NAME
  token TOKEN is stale for lock NAME
The answer is true when read; a lease can end right after.

Options:
  --url URL       The lock service (default: $REDIS_URL, else @URL@):
                  Redis, etcd://, zk:// or postgresql:// (see 'corolock
                  help'). RedLock has no sequencer: refused.
  --password-file FILE, --tls-ca FILE, --tls-cert FILE, --tls-key FILE,
  --tls-server-name NAME, --sentinel-tls-server-name NAME, --tls-insecure
                  As for every command.
  -v, --verbose   Log connection events to stderr (-vv: debug).
  -h, --help      Show this help.

Environment: REDIS_URL is the default for --url; COROLOCK_PASSWORD the
password.

Exit statuses: 0 current, 1 stale (NAME free or held under another token),
64 usage error (TOKEN not a non-negative integer), 69 the service cannot be
reached, 76 it answered with an error.

Example:
  corolock check orders:42 "$TOKEN" && write_order
)";

// The texts name each default by a token (@NAME@), replaced here by its
// value where it is defined, so that the help cannot drift from the code.
std::string with_defaults(std::string_view text) {
    const std::pair<std::string_view, std::string> values[] = {
        {"@URL@", defaults::url()},
        {"@LEASE@", format_duration(defaults::lease)},
        {"@MIN_LEASE@", format_duration(defaults::min_lease)},
        {"@GRACE@", format_duration(defaults::grace)},
        {"@MAX_LOCK_DELAY@",
         format_duration(std::chrono::duration_cast<duration>(max_lock_delay))},
        {"@COMMAND_TIMEOUT@", format_duration(defaults::command_timeout)},
        {"@LIST_STEP@", std::to_string(lock_list_defaults::count_per_step)},
        {"@LIST_TIME@", format_duration(lock_list_defaults::max_time)},
        {"@LIST_STEPS@", std::to_string(lock_list_defaults::max_steps)},
        {"@LIST_LOCKS@", std::to_string(lock_list_defaults::max_locks)},
        {"@LIST_COLUMNS@", list_columns_text()},
    };
    std::string out(text);
    for (const auto& [token, value] : values) {
        for (auto at = out.find(token); at != std::string::npos;
             at = out.find(token, at + value.size()))
            out.replace(at, token.size(), value);
    }
    return out;
}

}  // namespace

std::string help_text(std::string_view topic) {
    if (topic.empty() || topic == "help") return with_defaults(overview);
    if (topic == "run") return with_defaults(run_help);
    if (topic == "status") return with_defaults(status_help);
    if (topic == "list") return with_defaults(list_help);
    if (topic == "break") return with_defaults(break_help);
    if (topic == "check") return with_defaults(check_help);
    if (topic == "elect") return with_defaults(elect_help);
    if (topic == "leader") return with_defaults(leader_help);
    if (topic == "fence") return fence_help_text();
    return {};
}

std::vector<std::string_view> list_column_names() {
    std::vector<std::string_view> out;
    for (const auto& c : list_columns) out.push_back(c.name);
    return out;
}

std::string_view version_text() { return "corolock " COROLOCK_VERSION "\n"; }

}  // namespace corolock::cli
