// The --help texts. docs/cli.md is the long form; keep the two in step.
#include "cli.hpp"

namespace corolock::cli {

namespace {

constexpr std::string_view overview = R"(corolock - a distributed lock on Redis, from the shell

Usage:
  corolock run [OPTIONS] NAME -- COMMAND [ARGS...]
  corolock status [OPTIONS] [--json] NAME
  corolock break [OPTIONS] NAME
  corolock help [COMMAND]
  corolock --help | --version

Commands:
  run     Hold the lock NAME while COMMAND runs (a distributed flock(1)).
  status  Show who holds the lock NAME, its remaining lease and last token.
  break   Force-release the lock NAME, whoever holds it, and wake its waiters.
  help    Show this text, or a command's own help.

Options every command takes:
  --url URL       Redis to use: redis://[user[:password]@]host[:port][/db], or
                  rediss://... for TLS. Default: $REDIS_URL, else
                  redis://127.0.0.1:6379.
  -v, --verbose   Log connection and lock events to stderr (-vv: debug).
  -h, --help      Show the command's help.

Exit statuses:
  0    success (run: COMMAND's own status is passed through instead)
  64   usage error: the message says what was wrong
  69   Redis cannot be reached (refused, timed out, bad credentials)
  70   run: the lease was lost while COMMAND ran (--on-lost kill)
  71   run: COMMAND could not be started, or an internal error
  75   run: the lock was not acquired within --wait (or at once, --no-wait)
  76   Redis answered with an error (e.g. the key is not a corolock lock)
  126  run: COMMAND was found but cannot be executed
  127  run: COMMAND was not found
  128+N  run: COMMAND was killed by signal N, or corolock itself got signal N
       while waiting for the lock

Environment:
  REDIS_URL           The default for --url.
  COROLOCK_LOG_LEVEL  Library log level when -v is not given (trace, debug,
                      info, warn, error).

Lock names are 1 to 512 bytes without '{' or '}'. The keys are
corolock:{NAME} (the lock), corolock:{NAME}:fence (the token counter) and the
channel corolock:{NAME}:unlock.

Examples:
  corolock run --no-wait deploy -- make deploy
  corolock run --wait 2m db-migrate -- ./migrate.sh
  corolock status --json deploy
  corolock break deploy

Run 'corolock help COMMAND' for a command's options and more examples.
)";

constexpr std::string_view run_help = R"(Usage: corolock run [OPTIONS] NAME -- COMMAND [ARGS...]

Acquires the lock NAME (waiting for it if another holder has it), runs
COMMAND with the lock held, renews the lease in the background while COMMAND
runs, releases the lock when COMMAND exits, and exits with COMMAND's status.
COMMAND is looked up on PATH. It sees two more environment variables:
  COROLOCK_TOKEN  the fencing token of this acquisition (decimal). It is larger
                  than every token handed out for NAME before; pass it to the
                  resource you protect and have it reject smaller ones.
  COROLOCK_NAME   the lock name.

Options:
  --url URL           Redis to use (default: $REDIS_URL, else
                      redis://127.0.0.1:6379).
  --lease DURATION    How long Redis keeps the lock if this process stops
                      renewing it (crash, network partition). Renewed every
                      third of it while COMMAND runs. At least 100ms.
                      Default 30s.
  --wait DURATION     Give up (exit 75) if the lock is not acquired within
                      DURATION. Default: wait until acquired or signalled.
  --no-wait           Give up at once if the lock is held (same as --wait 0s).
  --on-lost ACTION    What to do if the lease is lost while COMMAND runs (Redis
                      unreachable until the lease ran out, or the lock was
                      broken): 'kill' (default) sends COMMAND SIGTERM, then
                      SIGKILL after --grace, and exits 70; 'ignore' logs a
                      warning and lets COMMAND finish, then exits with its
                      status.
  --grace DURATION    Time between SIGTERM and SIGKILL for --on-lost kill.
                      Default 5s.
  -v, --verbose       Log lock and connection events to stderr (-vv: debug).
  -h, --help          Show this help.

DURATION is a whole number and a unit: 500ms, 10s, 2m, 1h.
Options go before '--'; everything after it is COMMAND and its arguments.

Signals: SIGINT, SIGTERM and SIGHUP sent to corolock are passed on to COMMAND;
the lock is still released once COMMAND exits. COMMAND stays in corolock's
process group, so Ctrl-C in a terminal reaches it directly too (it may see
SIGINT twice). A signal that arrives while still waiting for the lock stops
the wait: nothing is held, and corolock exits 128+N.

If Redis cannot be reached at start, corolock gives up within about 3 seconds
(exit 69) rather than waiting.

Environment:
  REDIS_URL       The default for --url.
  COROLOCK_TOKEN, COROLOCK_NAME  Set for COMMAND (replacing inherited values).

Exit statuses:
  COMMAND's own  when COMMAND exits (killed by signal N: 128+N)
  64   usage error          69   Redis cannot be reached
  70   lease lost while COMMAND ran (--on-lost kill)
  71   COMMAND could not be started (other than 126/127), internal error
  75   lock not acquired within --wait / --no-wait
  76   Redis answered with an error
  126  COMMAND not executable    127  COMMAND not found
  128+N  corolock got signal N while waiting for the lock

Examples:
  corolock run nightly-report -- ./report.sh --date today
  corolock run --no-wait deploy -- make deploy || echo "a deploy is running"
  corolock run --wait 2m --lease 10s db-migrate -- ./migrate.sh
  corolock run --url redis://:secret@redis.internal:6379/2 job -- ./job
)";

constexpr std::string_view status_help = R"(Usage: corolock status [OPTIONS] [--json] NAME

Shows the state of the lock NAME: whether it is held, the holder's owner id,
the remaining lease, the re-entry count (levels) and the last fencing token
handed out for NAME (kept even while nobody holds it). Read-only.

Options:
  --json          Print one JSON object on one line:
                  {"name":"NAME","held":true,"owner":"ID","ttl_ms":29140,
                   "levels":1,"last_token":7}
                  Not held: "owner":"", "ttl_ms":0, "levels":0. ttl_ms is -1
                  for a key without expiry (not one corolock wrote).
  --url URL       Redis to use (default: $REDIS_URL, else redis://127.0.0.1:6379).
  -v, --verbose   Log connection events to stderr (-vv: debug).
  -h, --help      Show this help.

Environment: REDIS_URL is the default for --url.

Exit statuses: 0 the status was printed (held or not), 64 usage error,
69 Redis cannot be reached, 76 Redis answered with an error.

Examples:
  corolock status deploy
  corolock status --json deploy | jq -r .owner
)";

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
  --url URL       Redis to use (default: $REDIS_URL, else redis://127.0.0.1:6379).
  -v, --verbose   Log connection events to stderr (-vv: debug).
  -h, --help      Show this help.

Environment: REDIS_URL is the default for --url.

Exit statuses: 0 done (also when it was not held), 64 usage error, 69 Redis
cannot be reached (if the connection dropped after sending, check with
'corolock status' whether it took effect), 76 Redis answered with an error.

Example:
  corolock break nightly-report
)";

}  // namespace

std::string help_text(std::string_view topic) {
    if (topic.empty()) return std::string(overview);
    if (topic == "run") return std::string(run_help);
    if (topic == "status") return std::string(status_help);
    if (topic == "break") return std::string(break_help);
    if (topic == "help") return std::string(overview);
    return {};
}

std::string_view version_text() { return "corolock " COROLOCK_VERSION "\n"; }

}  // namespace corolock::cli
