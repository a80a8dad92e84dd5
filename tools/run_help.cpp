// The --help texts of run and elect, the commands that hold something while
// COMMAND runs; help.cpp has the others and fills in the @NAME@ tokens.
// docs/cli.md is the long form; keep the two in step.
#include "cli.hpp"

#include <string_view>

namespace corolock::cli {

extern const std::string_view run_help = R"(Usage: corolock run [OPTIONS] NAME COMMAND [ARGS...]
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

extern const std::string_view elect_help = R"(Usage: corolock elect [OPTIONS] NAME COMMAND [ARGS...]
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

}  // namespace corolock::cli
