// The --help texts. docs/cli.md is the long form; keep the two in step.
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

constexpr std::string_view run_help = R"(Usage: corolock run [OPTIONS] NAME COMMAND [ARGS...]
       corolock run [OPTIONS] NAME -c 'SHELL COMMAND'
       corolock run [OPTIONS] NAME [NAME...] -- COMMAND [ARGS...]

Acquires the lock NAME (waiting for it if another holder has it), runs
COMMAND with the lock held, renews the lease in the background while COMMAND
runs, releases the lock when COMMAND exits, and exits with COMMAND's status.
COMMAND is looked up on PATH. It sees two more environment variables:
  COROLOCK_TOKEN  the fencing token of this acquisition (decimal). It is larger
                  than every token handed out for NAME before; pass it to the
                  resource you protect and have it reject smaller ones.
  COROLOCK_NAME   the lock name.

Several NAMEs: COMMAND runs once it holds every one of them (taken in
bytewise order, all or none: a plain lock each, no --fair, --capacity, -s or
-x). COMMAND then gets COROLOCK_LOCKS (their number), and COROLOCK_NAME_1,
COROLOCK_TOKEN_1, COROLOCK_NAME_2, ... in that order, in place of
COROLOCK_NAME and COROLOCK_TOKEN.

Options:
  --url URL           Redis to use (default: $REDIS_URL, else
                      @URL@), or etcd://host:port[,...],
                      zk://host:port[,...][/root] or postgresql://... (a
                      plain lock; COROLOCK_TOKEN is a zxid on ZooKeeper, the
                      name's committed fence on PostgreSQL).
                      Given 3, 5 or more times (an odd number), or as one
                      redlock://host,host,host[/db][?query] URL: RedLock, the
                      lock held on a majority of these independent Redis
                      servers (plain lock only; no fencing token:
                      COROLOCK_TOKEN is not set).
  --lease SECONDS|DURATION
                      How long Redis keeps the lock if this process stops
                      renewing it (crash, network partition). Renewed every
                      third of it while COMMAND runs. At least @MIN_LEASE@.
                      Default @LEASE@.
  -w, --wait SECONDS|DURATION
                      Give up (exit 75, or -E's) if the lock is not acquired
                      within that time: plain or fractional seconds as
                      flock(1) takes them (5, 0.5) or a DURATION (500ms).
                      Default: wait until acquired or signalled.
  --timeout SECONDS|DURATION
                      The same as -w (flock's name for it).
  -n, --no-wait       Give up at once if the lock is held (same as -w 0).
  --nonblock, --nb    The same as -n (flock's names for it).
  -c, --command 'SHELL COMMAND'
                      Run SHELL COMMAND with $SHELL -c (else /bin/sh -c), as
                      flock -c; nothing may follow NAME then.
  -o, --close         Accepted for flock's command lines: COMMAND never holds
                      the lock (corolock does), so there is nothing to close.
  -u, --unlock, -F, --no-fork
                      flock's; refused with the reason: the lock is released
                      when COMMAND exits ('corolock break NAME' forces it),
                      and corolock stays beside COMMAND to renew the lease.
  -E, --conflict-exit-code N
                      Exit N (0-255) instead of 75 when the lock is not
                      acquired in time.
  -q, --quiet         Print nothing when the lock is not acquired in time
                      (a busy lock in cron stays silent).
  --fair              Redis: take a fair mutex: waiters get the lock in the
                      order they asked for it, across processes and hosts
                      (every corolock run on NAME must use --fair).
  -s, --shared        Redis: NAME is a shared (readers-writer) mutex; take a
                      shared level, as flock -s: any number of -s runs hold
                      it together, while no -x run does.
  -x, --exclusive     Redis: take the shared mutex's exclusive level, as
                      flock -x: alone, and ahead of -s runs that arrive
                      while it waits. Every user of NAME must give -s or -x.
  -e                  The same as -x (as flock's -e).
  --replicas N        Redis: start COMMAND only once N replicas acknowledged
                      the lock (WAIT, up to 1 s or a quarter of the lease);
                      otherwise give it back and exit 76. Ignored by etcd;
                      a usage error on a Redis Cluster, ZooKeeper and
                      PostgreSQL. Default 0.
  --capacity N        Redis: NAME is a semaphore of N permits (1-1000000)
                      instead of a lock; COMMAND starts once --permits of
                      them are free, and holds them, each with the lease,
                      until it exits. Every user of NAME must give the same
                      N. A lock and a semaphore cannot share a NAME.
  --permits K         How many of the semaphore's permits to take (1-N).
                      Needs --capacity. Default 1.
  --on-lost ACTION    What to do if the lease is lost while COMMAND runs (Redis
                      unreachable until the lease ran out, or the lock was
                      broken): 'kill' (default) sends COMMAND SIGTERM, then
                      SIGKILL after --grace, and exits 70; 'ignore' logs a
                      warning and lets COMMAND finish, then exits with its
                      status.
  --grace SECONDS|DURATION
                      Time between SIGTERM and SIGKILL for --on-lost kill.
                      Default @GRACE@.
  --lock-delay SECONDS|DURATION
                      Redis: if this run's tenure ends without a clean release
                      (crash, partition, a pause past the lease), NAME stays
                      unavailable this much longer, so that writes still in
                      flight land first (lock_options::lock_delay; at most
                      @MAX_LOCK_DELAY@). Other services answer that it is not
                      supported (exit 76). Default 0.
  --no-process-group  Run COMMAND in corolock's own process group instead of
                      one of its own; signals then reach COMMAND's process
                      only, not its children.
  --pass-credentials  Pass REDIS_URL (password included) and
                      COROLOCK_PASSWORD on to COMMAND; by default COMMAND
                      gets neither password.
  --label TEXT        The holder label status and list show (at most 256
                      bytes); default: COMMAND's program name, never its
                      arguments, which anyone who may read the lock sees.
  --no-label          Record no label.
  --metrics-file FILE At the end, write the run's metrics (acquire wait,
                      renewals, lost leases, exit status...) to FILE in the
                      Prometheus text format, atomically, for node_exporter's
                      textfile collector; also when the lock is busy or
                      COMMAND fails.
  --url URL, --password-file FILE, --tls-*, --sentinel-tls-server-name NAME
                      As for every command.
  -v, --verbose       Who holds the lock and how long the wait took, lock and
                      connection events, on stderr (-vv: also each renewal).
  -h, --help          Show this help.

Every time takes plain or fractional seconds (5, 0.5, as flock(1)) or a
DURATION, a whole number and a unit: 500ms, 10s, 2m, 1h.
As flock(1): options go before NAME or between NAME and COMMAND; the first
word after NAME starts COMMAND, and everything from it is COMMAND's. With
'--' (several NAMEs need it), the words before it are NAMEs and everything
after it is COMMAND: a COMMAND that itself holds a '--' after its first word
(git log -- FILE) needs a '--' after NAME. Flags may be grouped: -nq, -w5, -E0.

Process group and signals: COMMAND runs in a process group of its own (in a
terminal's foreground it gets the terminal). SIGINT, SIGTERM and SIGHUP sent
to corolock are passed on to that group; the lock is released once COMMAND
exits. A lost lease (--on-lost kill) stops the whole group. If corolock
itself dies, even by SIGKILL, COMMAND gets SIGKILL (its own children do not).
A signal that arrives while still waiting for the lock stops the wait:
nothing is held, and corolock exits 128+N.

If Redis cannot be reached at start, corolock gives up within about
@COMMAND_TIMEOUT@ (exit 69) rather than waiting.

Environment:
  REDIS_URL       The default for --url. COMMAND gets it without user and
                  password.
  COROLOCK_PASSWORD  The password (see --password-file); not passed on.
  COROLOCK_TOKEN, COROLOCK_NAME  Set for COMMAND (replacing inherited values);
                  several NAMEs: COROLOCK_LOCKS, COROLOCK_NAME_<i>,
                  COROLOCK_TOKEN_<i>.

Exit statuses:
  COMMAND's own  when COMMAND exits (killed by signal N: 128+N)
  64   usage error          69   Redis cannot be reached
  70   lease lost while COMMAND ran (--on-lost kill)
  71   COMMAND could not be started (other than 126/127), internal error
  75   lock not acquired within --wait / --no-wait (or -E's N)
  76   Redis answered with an error, or NOPERM
  77   corolock is set-user-ID, set-group-ID or has file capabilities
  126  COMMAND not executable    127  COMMAND not found
  128+N  corolock got signal N while waiting for the lock

Examples:
  corolock run nightly-report ./report.sh --date today
  corolock run -n deploy make deploy || echo "a deploy is running"
  corolock run -w 10 nightly -c 'pg_dump app | gzip > /backup/app.gz'
  corolock run a b -- ./uses-both.sh
  corolock run --wait 2m --lease 10s db-migrate -- ./migrate.sh
  corolock run -n -q -E 0 backup -- ./backup.sh   # cron: a busy lock is fine
  corolock run --url redis://app@redis.internal:6379/2 \
      --password-file /etc/corolock/pw job -- ./job
)";

constexpr std::string_view elect_help = R"(Usage: corolock elect [OPTIONS] NAME COMMAND [ARGS...]
       corolock elect [OPTIONS] NAME -c 'SHELL COMMAND'
       corolock elect [OPTIONS] NAME -- COMMAND [ARGS...]

Campaigns for the leadership of NAME (candidates are served first come,
first served), and once elected runs COMMAND as 'corolock run' does: the
term's lease is renewed while COMMAND runs, signals are passed on, a lost
term stops COMMAND (exit 70). When COMMAND exits, corolock resigns at once
(the next candidate leads without waiting for the lease) and exits with
COMMAND's status. SIGINT, SIGTERM or SIGHUP while campaigning gives the
place in line up (nothing is left on the server; exit 128+N). COMMAND sees:
  COROLOCK_EPOCH         the term's epoch: a fencing token, larger than every
                         epoch of NAME before; pass it to what the leader
                         writes.
  COROLOCK_LEADER_VALUE  the value given with --value.
  COROLOCK_NAME          NAME.

Options:
  --url URL           Redis to use (default: $REDIS_URL, else @URL@): one
                      server, Sentinel or Cluster. A service without leader
                      election (RedLock: several --url or redlock://) is
                      refused with exit 76, nothing left on it.
  --value TEXT        The leader's value, as 'corolock leader' shows it
                      (e.g. the address the leader serves on). Default:
                      empty. At most 64 KiB.
  --lease SECONDS|DURATION
                      The term's lease, renewed every third of it while
                      COMMAND runs. At least @MIN_LEASE@. Default @LEASE@.
  -w, --wait SECONDS|DURATION
                      Give up (exit 75, or -E's) if not elected within
                      that time. Default: campaign until elected or
                      signalled.
  --timeout SECONDS|DURATION
                      The same as -w.
  -n, --no-wait       Give up at once if another candidate leads.
  --nonblock, --nb    The same as -n.
  -c, --command 'SHELL COMMAND'
                      Run SHELL COMMAND with $SHELL -c (else /bin/sh -c).
  -E, --conflict-exit-code N
                      Exit N (0-255) instead of 75 when not elected in time.
  -q, --quiet         Print nothing when not elected in time.
  --on-lost ACTION, --grace DURATION, --no-process-group, --pass-credentials,
  --label TEXT, --no-label, --metrics-file FILE
                      As for run (corolock help run).
  --password-file FILE, --tls-ca FILE, --tls-cert FILE, --tls-key FILE,
  --tls-server-name NAME, --sentinel-tls-server-name NAME, --tls-insecure
                      As for every command.
  -v, --verbose       Log the campaign and the term to stderr (-vv: debug).
  -h, --help          Show this help.

Exit statuses: COMMAND's own when it exits (killed by signal N: 128+N); 64
usage error (no COMMAND, a bad NAME); 69 the service cannot be reached; 70
the leadership was lost while COMMAND ran; 75 not elected within --wait; 76
the service answered with an error or has no leader election; 128+N
corolock got signal N while campaigning.

Examples:
  corolock elect --value "$(hostname):8080" scheduler -- ./scheduler
  corolock elect -w 30s --lease 5s primary -c './writer --epoch "$COROLOCK_EPOCH"'
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
