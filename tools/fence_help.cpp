// corolock fence's help text (corolock help fence, corolock fence --help).
#include "cli.hpp"

namespace corolock::cli {

std::string fence_help_text() {
    return R"(Usage: corolock fence install [OPTIONS]

Installs the fence where the data lives (docs/fencing.md), so the store itself
refuses a write whose fencing token is older than the newest one written:

  redis://, rediss://, redis+sentinel://, redis+cluster://
      loads the Redis Functions library `corolock` (Redis 7.0 or later;
      FUNCTION LOAD REPLACE), on every primary of a Cluster. Its functions:
      FCALL corolock_fenced_set 2 FENCEKEY KEY TOKEN VALUE [PX ms],
      corolock_fenced_hset, corolock_fenced_del, corolock_fenced_exec and
      corolock_fence_check 1 FENCEKEY TOKEN. A stale token fails with an
      error that begins with STALE. The library loads it by itself too
      when a fenced call finds it missing.
  postgresql://user[:password]@host[:port]/db
      creates schema corolock, its table corolock.fences and the function
      corolock.fence(resource text, token bigint), which raises SQLSTATE
      CLF01 for a stale token, in one transaction (all or nothing). The
      role needs CREATE on the database.

Running it again changes nothing and exits 0; primaries that refuse are named.

Options (the ones every command takes, as for run; see 'corolock help'):
  --url URL       the server; default: $REDIS_URL, else the local Redis.
                  One server, a Sentinel set or a Cluster; not a RedLock.
  --password-file FILE, --tls-ca FILE, --tls-cert FILE, --tls-key FILE,
  --tls-server-name NAME, --sentinel-tls-server-name NAME, --tls-insecure
                  As for every command (Redis URLs; PostgreSQL takes its
                  credentials and TLS in the URL or ~/.pgpass).
  -v, --verbose   say what was installed, and log connection events
                  (-vv: debug).
  -h, --help      show this text.

Environment: REDIS_URL is the default for --url; COROLOCK_PASSWORD the
password.

Exit status: 0 installed; 64 bad usage; 69 the server cannot be reached;
76 the server refused (no Redis Functions before Redis 7.0, no permission).
)";
}

}  // namespace corolock::cli
