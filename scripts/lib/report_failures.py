#!/usr/bin/env python3
"""Prints what a failed ctest run needs to be understood without a rerun.

    report_failures.py JUNIT_XML [BUILD_DIR]

For each failed or timed-out test in ctest's JUnit file (ctest
--output-junit): its name, its whole output, the fault seeds it printed
(COROLOCK_FAULT_SEED=N, test/fault/fault_fleet.hpp) and the command that
replays it. Exits 0 when nothing failed, 1 otherwise, 2 on a missing or
unreadable file. Uses the standard library only (python3 is a setup.sh
package).
"""
import re
import shlex
import sys
import xml.etree.ElementTree as ET

SEED = re.compile(r"COROLOCK_FAULT_SEED=(\d+)")


def failed_cases(root):
    # "notrun" (a missing program, a NOT_BUILT placeholder, a failed
    # fixture) is a failure to ctest: no test here sets a skip code.
    for case in root.iter("testcase"):
        status = case.get("status", "")
        if status in ("fail", "failed", "notrun") or case.find("failure") is not None or \
                case.find("error") is not None:
            yield case


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    build_dir = argv[2] if len(argv) > 2 else "build"
    try:
        root = ET.parse(argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"report_failures: cannot read {argv[1]}: {e}", file=sys.stderr)
        return 2
    failed = list(failed_cases(root))
    if not failed:
        return 0
    print(f"\n===== {len(failed)} failed test(s); whole output of each =====")
    for case in failed:
        name = case.get("name", "?")
        out = case.findtext("system-out") or ""
        print(f"\n----- {name} ({case.get('time', '?')} s) -----")
        print(out.rstrip())
        seeds = sorted(set(SEED.findall(out)))
        regex = "^" + re.escape(name) + "$"
        def cmd(env=""):
            return (f"(cd {shlex.quote(build_dir)} && {env}ctest --output-on-failure "
                    f"-R {shlex.quote(regex)})")
        if seeds:
            for seed in seeds:
                print(f"replay: {cmd(f'COROLOCK_FAULT_SEED={seed} ')}")
        else:
            print(f"replay: {cmd()}")
    print("\n===== failed: " + "; ".join(c.get("name", "?") for c in failed))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
