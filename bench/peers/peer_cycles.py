#!/usr/bin/python3
"""The peers' uncontended lock cycle, for scripts/bench.sh to set beside
corolock's (E2) on the same throwaway server in the same run.

    peer_cycles.py zk   HOST:PORT    [--cycles N] [--rounds R]
    peer_cycles.py etcd HOST:PORT    [--cycles N] [--rounds R]
    peer_cycles.py pg   CONNINFO     [--cycles N] [--rounds R]

Each peer acquires and releases one name over and over, one client, as E2
does; a cycle's time is taken around the two calls. Prints one line per
peer, "peer<TAB>NAME<TAB>cycle_p50_us<TAB>cycles_per_s" (cycles_per_s is
1e6 / p50), or "peer<TAB>NAME<TAB>skipped<TAB>why" when its Python module is
missing. Each round's p50 is the median of its cycles; the figure is the
median of the rounds'. Benchmarks are not tests: nothing here judges a
figure.

  kazoo Lock (ZooKeeper): python3-kazoo, Curator's recipe in Python.
  etcd gateway /v3/lock: etcd's own lock service (server/etcdserver/api/
    v3lock) over the HTTP gateway, one lease for the run (as its session).
  python-etcd3 Lock (etcd, gRPC): python3-etcd3; a lease per acquire.
  pg_advisory_lock: pg_advisory_lock + pg_advisory_unlock by psycopg2, in
    autocommit, no fence (the floor of any PostgreSQL lock).
"""
import argparse
import base64
import http.client
import json
import statistics
import sys
import time


def timed_rounds(cycle, cycles, rounds):
    """Median over rounds of each round's median cycle time, in µs."""
    for _ in range(max(1, cycles // 10)):  # warm-up: connections, caches
        cycle()
    p50s = []
    for _ in range(rounds):
        times = []
        for _ in range(cycles):
            start = time.perf_counter_ns()
            cycle()
            times.append((time.perf_counter_ns() - start) / 1000.0)
        p50s.append(statistics.median(times))
    return statistics.median(p50s)


def report(name, p50_us):
    print(f"peer\t{name}\t{p50_us:.1f}\t{1e6 / p50_us:.0f}", flush=True)


def skipped(name, why):
    print(f"peer\t{name}\tskipped\t{why}", flush=True)


def zk_peers(hosts, cycles, rounds):
    try:
        from kazoo.client import KazooClient
    except ImportError as e:
        return skipped("kazoo Lock", f"no kazoo ({e}): apt-get install python3-kazoo")
    zk = KazooClient(hosts=hosts, timeout=10)
    zk.start(timeout=30)
    try:
        lock = zk.Lock("/corolock-bench-peers/kazoo", "bench")

        def cycle():
            if not lock.acquire(timeout=10):
                raise RuntimeError("kazoo Lock: not acquired")
            lock.release()

        report("kazoo Lock", timed_rounds(cycle, cycles, rounds))
    finally:
        zk.stop()
        zk.close()


class Gateway:
    """etcd's JSON gateway over one kept-alive HTTP/1.1 connection."""

    def __init__(self, hostport):
        host, port = hostport.rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=10)

    def post(self, path, body):
        self.conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{path}: HTTP {resp.status}: {data[:200]!r}")
        return json.loads(data)


def b64(text):
    return base64.b64encode(text.encode()).decode()


def etcd_peers(hostport, cycles, rounds):
    gw = Gateway(hostport)
    lease = gw.post("/v3/lease/grant", {"TTL": 60})["ID"]
    name = b64("corolock-bench-peers/gateway")

    def gateway_cycle():
        key = gw.post("/v3/lock/lock", {"name": name, "lease": lease})["key"]
        gw.post("/v3/lock/unlock", {"key": key})

    try:
        report("etcd gateway /v3/lock", timed_rounds(gateway_cycle, cycles, rounds))
    finally:
        gw.post("/v3/lease/revoke", {"ID": lease})
    try:
        import etcd3
    except ImportError as e:
        return skipped("python-etcd3 Lock", f"no etcd3 ({e}): apt-get install python3-etcd3")
    host, port = hostport.rsplit(":", 1)
    client = etcd3.client(host=host, port=int(port), timeout=10)
    lock = client.lock("corolock-bench-peers/etcd3", ttl=60)

    def etcd3_cycle():
        if not lock.acquire(timeout=10):
            raise RuntimeError("python-etcd3 Lock: not acquired")
        lock.release()

    try:
        report("python-etcd3 Lock", timed_rounds(etcd3_cycle, cycles, rounds))
    finally:
        client.close()


def pg_peers(conninfo, cycles, rounds):
    try:
        import psycopg2
    except ImportError as e:
        return skipped("pg_advisory_lock", f"no psycopg2 ({e}): apt-get install python3-psycopg2")
    conn = psycopg2.connect(conninfo)
    conn.autocommit = True
    cur = conn.cursor()

    def cycle():
        cur.execute("SELECT pg_advisory_lock(4242)")
        cur.fetchall()
        cur.execute("SELECT pg_advisory_unlock(4242)")
        if cur.fetchone()[0] is not True:
            raise RuntimeError("pg_advisory_unlock: not held")

    try:
        report("pg_advisory_lock", timed_rounds(cycle, cycles, rounds))
    finally:
        conn.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("backend", choices=["zk", "etcd", "pg"])
    p.add_argument("address")
    p.add_argument("--cycles", type=int, default=500)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    {"zk": zk_peers, "etcd": etcd_peers, "pg": pg_peers}[a.backend](a.address, a.cycles, a.rounds)


if __name__ == "__main__":
    sys.exit(main())
