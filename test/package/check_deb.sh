#!/usr/bin/env bash
# Builds the Debian packages of a build folder with cpack (packaging/deb.cmake),
# checks their names and Depends, installs them into this machine's system
# with dpkg -i, builds test/package/consumer against the installed package
# (find_package from /usr), runs `corolock --version` and `man corolock`, and
# removes the packages again (dpkg -r, also when a check fails).
# Needs root (dpkg); exits 77 (skipped) without it.
#   test/package/check_deb.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build_dir=$(cd "${1:?usage: $0 BUILD_DIR SOURCE_DIR WORK_DIR}" && pwd)
source_dir=${2:?usage: $0 BUILD_DIR SOURCE_DIR WORK_DIR}
work=${3:?usage: $0 BUILD_DIR SOURCE_DIR WORK_DIR}
fail() { echo "check_deb: $*" >&2; exit 1; }
if [[ $(id -u) != 0 ]] || ! command -v dpkg >/dev/null; then
  echo "check_deb: skipped: installing packages needs root and dpkg"
  exit 77
fi
for p in corolock libcorolock-dev; do
  if dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q installed; then
    fail "$p is installed already; this test installs and removes it (dpkg -r $p)"
  fi
done
rm -rf "$work"
mkdir -p "$work"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build_dir/CMakeCache.txt")

(cd "$work" && cpack -G DEB --config "$build_dir/CPackConfig.cmake" -B "$work/debs" >cpack.log 2>&1) ||
  fail "cpack failed: $(tail -20 "$work/cpack.log")"
shopt -s nullglob
debs=("$work"/debs/*.deb)
((${#debs[@]} >= 2)) || fail "cpack made ${#debs[@]} packages: ${debs[*]}"
declare -A depends
for deb in "${debs[@]}"; do
  name=$(dpkg-deb -f "$deb" Package)
  depends[$name]=$(dpkg-deb -f "$deb" Depends)
  echo "$name $(dpkg-deb -f "$deb" Version): Depends: ${depends[$name]}"
  [[ $(dpkg-deb -f "$deb" Version) == "$version" ]] || fail "$name has version $(dpkg-deb -f "$deb" Version), not $version"
done
[[ -v 'depends[corolock]' && -v 'depends[libcorolock-dev]' ]] ||
  fail "expected the packages corolock and libcorolock-dev, got: ${!depends[*]}"
# The tool's shared libraries come from dpkg-shlibdeps: OpenSSL and spdlog at
# least, whatever the backends built.
for lib in libssl3 libspdlog; do
  [[ ${depends[corolock]} == *"$lib"* ]] || fail "corolock does not depend on $lib: ${depends[corolock]}"
done
for dev in libboost-system libssl-dev libspdlog-dev; do
  [[ ${depends[libcorolock-dev]} == *"$dev"* ]] ||
    fail "libcorolock-dev does not depend on $dev: ${depends[libcorolock-dev]}"
done

packages=("${!depends[@]}")
trap 'dpkg -r "${packages[@]}" >"$work/dpkg-r.log" 2>&1 || cat "$work/dpkg-r.log" >&2' EXIT
dpkg -i "${debs[@]}" >"$work/dpkg-i.log" 2>&1 || fail "dpkg -i failed: $(cat "$work/dpkg-i.log")"

# The consumer finds the package where dpkg put it (/usr), no prefix given.
cmake -S "$source_dir/test/package/consumer" -B "$work/consumer" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$work/consumer.log" 2>&1 ||
  fail "consumer configure failed: $(cat "$work/consumer.log")"
config_dir=$(sed -n 's/^corolock_DIR:PATH=//p' "$work/consumer/CMakeCache.txt")
[[ $config_dir == /usr/* ]] || fail "the consumer found corolock in $config_dir, not under /usr"
cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1 ||
  fail "consumer build failed: $(tail -30 "$work/consumer.log")"
"$work/consumer/consumer"

[[ $(command -v corolock) == /usr/bin/corolock ]] || fail "corolock is not /usr/bin/corolock"
[[ $(corolock --version) == "corolock $version" ]] || fail "corolock --version: $(corolock --version)"
man_text=$(LC_ALL=C MANWIDTH=100 man corolock 2>&1) || fail "man corolock failed: $man_text"
[[ $man_text == *"Usage: corolock run "* ]] || fail "man corolock does not show corolock run's help: $man_text"
[[ -f /usr/share/bash-completion/completions/corolock ]] || fail "no bash completion installed"
echo "installed ${packages[*]}: consumer built against /usr, corolock --version and man corolock work"
