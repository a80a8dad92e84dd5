#!/usr/bin/env bash
# Checks that a corolock build was hardened (COROLOCK_HARDEN, on by default):
# installs it into a scratch prefix and reads the installed `corolock` binary
# (and libcorolock.so, in a BUILD_SHARED_LIBS build) with readelf and nm:
#   - full RELRO: a GNU_RELRO segment, and BIND_NOW (-z relro -z now);
#   - stack protector: it calls __stack_chk_fail;
#   - _FORTIFY_SOURCE: it calls fortified __*_chk functions (not checked in
#     a Debug build, where _FORTIFY_SOURCE is not defined: it needs -O).
# Reports the x86 CET note (-fcf-protection) without requiring it: the
# linker drops it when any linked object lacks it.
#
#   scripts/check_hardening.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: $0 BUILD_DIR}
[[ -f "$build_dir/CMakeCache.txt" ]] || { echo "check_hardening: $build_dir is not a CMake build folder" >&2; exit 2; }
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt")

prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build_dir" --prefix "$prefix" >/dev/null

binaries=()
[[ -x "$prefix/bin/corolock" ]] && binaries+=("$prefix/bin/corolock")
for lib in "$prefix"/lib*/libcorolock.so.*.*; do
  [[ -f "$lib" ]] && binaries+=("$lib")
done
if ((${#binaries[@]} == 0)); then
  echo "check_hardening: no corolock binary installed (built with COROLOCK_BUILD_TOOLS=OFF?)" >&2
  exit 1
fi

failed=0
fail() { echo "check_hardening: $1: $2" >&2; failed=1; this_failed=1; }

for bin in "${binaries[@]}"; do
  name=${bin#"$prefix"/}
  this_failed=0
  dynamic=$(readelf -d -W "$bin")
  segments=$(readelf -l -W "$bin")
  symbols=$(nm -D "$bin")

  grep -q 'GNU_RELRO' <<<"$segments" || fail "$name" "no GNU_RELRO segment (not linked with -z relro)"
  grep -Eq '\(BIND_NOW\)|\(FLAGS(_1)?\).*\bNOW\b' <<<"$dynamic" || fail "$name" "no BIND_NOW (not linked with -z now)"
  grep -Eq ' U __stack_chk_fail(@|$)' <<<"$symbols" || fail "$name" "does not call __stack_chk_fail (no stack protector)"
  chk=$(grep -Eo ' U __[a-z_]+_chk(@|$)' <<<"$symbols" | grep -v __stack_chk_fail | sed 's/^ U //; s/@$//' | sort -u | paste -sd ' ' || true)
  if [[ "$build_type" == Debug ]]; then
    fortify="not checked (Debug)"
  elif [[ -z "$chk" ]]; then
    fail "$name" "calls no fortified __*_chk function (no _FORTIFY_SOURCE)"
  else
    fortify="$chk"
  fi
  cet=$(readelf -n -W "$bin" | grep -o 'x86 feature: .*' || echo "none")

  ((this_failed)) && continue
  echo "check_hardening: $name: GNU_RELRO, BIND_NOW, __stack_chk_fail; fortified: $fortify; CET: $cet"
done

if ((failed)); then
  echo "check_hardening: FAILED" >&2
  exit 1
fi
echo "check_hardening: ${#binaries[@]} binary(ies) hardened"
