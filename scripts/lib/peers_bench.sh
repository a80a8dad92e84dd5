# Sourced by scripts/bench.sh and bench/smoke_test.sh: the peers' own lock
# cycle (bench/peers/peer_cycles.py) on the throwaway server corolock's
# program just measured, and corolock's cycles/s over the best peer's.
#
#   peers_run NAME MODE OUT_JSON [COROLOCK_JSON]
#
# NAME is etcd, pg or zk, whose throwaway server (scripts/lib/throwaway_*.sh)
# is running; MODE is full, quick or smoke. Prints one line per peer, writes
# OUT_JSON: {"peers": {PEER: {"cycle_p50_us", "cycles_per_s"} or
# {"skipped": WHY}}, and with COROLOCK_JSON (the program's --out) also
# "corolock_cycles_per_s", "best_peer" and "corolock_over_best_peer"}. The
# peers run by Debian's python3 (/usr/bin/python3, where python3-kazoo,
# python3-etcd3 and python3-psycopg2 install), never a shim earlier on PATH.

_peers_src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

peers_run() {
  local name=$1 mode=$2 out=$3 corolock=${4:-} address sizes
  case $name in
    zk) address=${ZK_URL#zk://} ;;
    etcd) address=${ETCD_URL#etcd://} ;;
    pg) address=$PG_URL ;;
    *) echo "peers_run: no peers for $name" >&2; return 64 ;;
  esac
  case $mode in
    full) sizes=(--cycles 500 --rounds 5) ;;
    quick) sizes=(--cycles 200 --rounds 3) ;;
    *) sizes=(--cycles 5 --rounds 1) ;;
  esac
  timeout 300 /usr/bin/python3 "$_peers_src/bench/peers/peer_cycles.py" "$name" "$address" \
    "${sizes[@]}" >"$out.tsv" || { echo "peers_run: $name: peer_cycles.py failed" >&2; return 1; }
  /usr/bin/python3 - "$out.tsv" "$out" "$corolock" <<'PY'
import json, sys
tsv, out, corolock = sys.argv[1:4]
peers = {}
for line in open(tsv):
    f = line.rstrip("\n").split("\t")
    if len(f) == 4 and f[0] == "peer":
        peers[f[1]] = ({"skipped": f[3]} if f[2] == "skipped"
                       else {"cycle_p50_us": float(f[2]), "cycles_per_s": float(f[3])})
if not peers:
    sys.exit(f"peers: no figures in {tsv}")
result = {"peers": peers}
for peer, d in peers.items():
    print(f"peer {peer}: " + (f"skipped ({d['skipped']})" if "skipped" in d else
          f"cycle p50 {d['cycle_p50_us']:.0f} us, {d['cycles_per_s']:.0f} cycles/s"))
measured = {p: d for p, d in peers.items() if "cycles_per_s" in d}
if corolock and measured:
    mine = 1e6 / json.load(open(corolock))["cycle_p50_us"]
    best = max(measured, key=lambda p: measured[p]["cycles_per_s"])
    result.update(corolock_cycles_per_s=mine, best_peer=best,
                  corolock_over_best_peer=mine / measured[best]["cycles_per_s"])
    print(f"corolock {mine:.0f} cycles/s (1e6 / E2 cycle p50) = "
          f"{result['corolock_over_best_peer']:.2f} x the best peer ({best})")
json.dump(result, open(out, "w"), indent=1)
PY
}
