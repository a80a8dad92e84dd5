#!/usr/bin/env bash
# The corolock tool's man page and bash completion, as `cmake --install`
# puts them (share/man/man1/corolock.1, share/bash-completion/completions/
# corolock): the page renders with man, and shows every command's
# `corolock help` text line for line; the completion completes subcommands,
# their options and the URL schemes.
#   test/package/check_cli_docs.sh BUILD_DIR WORK_DIR
set -euo pipefail
build_dir=${1:?usage: $0 BUILD_DIR WORK_DIR}
work=${2:?usage: $0 BUILD_DIR WORK_DIR}
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build_dir" --prefix "$prefix" --component cli >/dev/null
tool=$prefix/bin/corolock
page=$prefix/share/man/man1/corolock.1
completion=$prefix/share/bash-completion/completions/corolock
for f in "$tool" "$page" "$completion"; do
  [[ -f $f ]] || { echo "not installed: $f" >&2; exit 1; }
done

fail() { echo "check_cli_docs: $*" >&2; exit 1; }

# The completion: words as bash would hand them to _corolock.
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    _corolock; printf "%s\n" "${COMPREPLY[@]}"' _ "$completion" "$@"
}
[[ $(complete_words corolock ru) == run ]] || fail "'corolock ru' does not complete to run"
commands=$(complete_words corolock '' | grep -v '^-' | sort)
[[ $commands == *status* && $commands == *break* ]] ||
  fail "the subcommands offered are: $commands"
[[ $(complete_words corolock run --no-wai) == --no-wait ]] ||
  fail "'corolock run --no-wai' does not complete to --no-wait"
[[ $(complete_words corolock status --url etcd) == $'etcd://\netcds://' ]] ||
  fail "'--url etcd' completes to: $(complete_words corolock status --url etcd)"
[[ -z $(complete_words corolock run job -- ls --no-wai) ]] ||
  fail "after -- the words are COMMAND's, not corolock's options"
echo "completion: subcommands $(echo $commands), options and URL schemes complete"

# The page: rendered by man as a user reads it (no terminal: plain text),
# each help text must appear in it as a block of the same lines.
rendered=$work/corolock.txt
LC_ALL=C MANWIDTH=200 man -l "$page" >"$rendered" 2>"$work/man.err" ||
  fail "man -l failed: $(cat "$work/man.err")"
[[ ! -s $work/man.err ]] || fail "man -l warned: $(cat "$work/man.err")"
for topic in '' $commands; do
  [[ $topic == help ]] && continue
  "$tool" help $topic >"$work/help-$topic.txt"
  python3 - "$work/help-$topic.txt" "$rendered" "${topic:-overview}" <<'PY'
import sys
help_lines = [l.strip() for l in open(sys.argv[1]) if l.strip()]
page = [l.strip() for l in open(sys.argv[2]) if l.strip()]
n = len(help_lines)
if not any(page[i:i + n] == help_lines for i in range(len(page) - n + 1)):
    missing = [l for l in help_lines if l not in page]
    sys.exit(f"the man page does not show `corolock help` ({sys.argv[3]}) as it is; "
             f"lines not in it: {missing[:5]}")
print(f"man page: {sys.argv[3]}: {n} lines, as `corolock help` prints them")
PY
done
