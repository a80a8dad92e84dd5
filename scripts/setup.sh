#!/usr/bin/env bash
# Installs what corolock needs to build and test, from Debian 12's own
# packages. Idempotent: when everything is present it only checks, which
# takes well under a second.
set -euo pipefail

packages=(
  g++ cmake make pkg-config            # toolchain
  libboost1.81-dev libboost-system1.81-dev  # Asio and System
  libboost-json1.81-dev                 # the etcd gateway's JSON
  libspdlog-dev                         # logging
  libcli11-dev                          # the corolock tool's option parser (header-only)
  catch2                                # tests: Catch2 v2.13
  libssl-dev openssl                    # TLS, and test certificates
  redis-server redis-tools              # the test server, redis-cli, redis-benchmark
  etcd-server etcd-client               # the etcd test servers, etcdctl
  libpq-dev postgresql                  # the PostgreSQL backend (libpq), its test servers
  libzookeeper-st-dev                   # the ZooKeeper backend: the single-threaded C client
  zookeeper default-jre-headless        # the ZooKeeper test servers (java, zookeeper.jar)
  python3 procps                        # the CLI and bench tests: JSON checks, ps
  curl                                  # the fenced HTTP store example's test (test/demo)
  man-db dpkg-dev binutils              # the package tests: man -l, cpack's dpkg-shlibdeps, readelf/nm
  python3-kazoo python3-etcd3 python3-psycopg2  # the benchmarks' peers (bench/peers/)
)
# Extra packages a caller needs on top (for example clang for the fuzzer).
if [[ -n "${COROLOCK_EXTRA_PACKAGES:-}" ]]; then
  read -r -a extra <<<"$COROLOCK_EXTRA_PACKAGES"
  packages+=("${extra[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  # dpkg-query prints "install ok installed" only for a fully installed package.
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"

# The packaged redis-server (and postgresql, on 5432) starts a system
# service where an init system runs; the tests never use it (they start
# their own servers on free ports), so it is left alone.
echo "setup: done"
