#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""rdma-core's own tests over mainline mlx4_ib and over mlx4_bf's provider,
judged side by side.

Usage: side_by_side.py RESULTS_DIR DIFFERENCES NOT_RUN

RESULTS_DIR/pyverbs-mlx4_0.txt and pyverbs-mlx4_bf0.txt are unittest's
verbose reports of tests/run_tests.py over each device, from one boot on
two identical adapters (tools/vm/pyverbs/pyverbs.sh). Every test gets one
verdict, our provider's result against mainline's:

- ok: it passes over ours;
- skip: it is skipped over both (the reason is ours), or it fails over
  mainline too (a feature the model lacks for both), or it runs worse over
  ours and DIFFERENCES explains why;
- not ok: it passes over mainline and not over ours, or ours fails what
  mainline skips, unexplained; or a test one report lacks; or an entry of
  DIFFERENCES that no longer explains a difference (the list stays true);
- skip, too: a test of NOT_RUN, which pyverbs.sh leaves out over both (a
  test that crashes the suite itself); not ok if a report has it.

DIFFERENCES and NOT_RUN have one line per test, `TEST-ID  WHY`; `#` starts
a comment. A test reported twice (an error in its clean-up after its
result) counts with its worse result. Writes RESULTS_DIR/pyverbs-side-by-side.txt (each report's totals,
then per test: mainline, ours, verdict and why) and prints KTAP, one result
per test, then `N passed, M failed, K skipped` (make test's suite line).
Exits 1 if a verdict is not ok.
"""

import argparse
import os
import re
import sys

MAINLINE = "mlx4_0"
OURS = "mlx4_bf0"

# "test_name (tests.test_mod.Class.test_name)" starts a test's line; the
# docstring's first line may follow on the next line before " ... RESULT".
START = re.compile(r"^(test\w*) \((tests\.[\w.]+)\)(.*)$")
RESULT = re.compile(
    r"(?:^|\.\.\. )(ok|FAIL|ERROR|skipped (?P<why>.*)|expected failure|unexpected success)$")
# The report's tail: "ERROR: test_name (tests....)" then the traceback,
# whose last line names the exception.
BLOCK = re.compile(r"^(ERROR|FAIL): \w+ \((tests\.[\w.]+)\)")
RAN = re.compile(r"^Ran \d+ tests? in ")
# Worse last.
RANK = {"ok": 0, "skip": 1, "fail": 2, "error": 3}
OUTCOME = {"ok": "ok", "FAIL": "fail", "ERROR": "error",
           "expected failure": "ok", "unexpected success": "fail"}


def parse(text):
    """The report as {test id: (outcome, detail)}: outcome is ok, skip,
    fail or error; detail the skip's reason or the exception's line."""
    results = {}
    pending = None
    lines = text.splitlines()
    for line in lines:
        m = START.match(line)
        if m:
            pending = m.group(2)
            line = m.group(3)
        if pending is None:
            continue
        r = RESULT.search(line)
        if r:
            word = r.group(1)
            if word.startswith("skipped"):
                result = ("skip", r.group("why").strip("'\""))
            else:
                result = (OUTCOME[word], "")
            if pending not in results or RANK[result[0]] > RANK[results[pending][0]]:
                results[pending] = result
            pending = None
    # The failures' exceptions, from the tracebacks at the end.
    current = None
    for line in lines:
        b = BLOCK.match(line)
        if b:
            current = b.group(2)
            continue
        if RAN.match(line):
            break
        if current and line.startswith(("-" * 20, "=" * 20)):
            continue
        if current and line and not line.startswith(" ") and not line.startswith("Traceback"):
            outcome, _ = results.get(current, ("error", ""))
            results[current] = (outcome, line.strip())
    return results


def load_differences(path):
    """{test id: why} of DIFFERENCES or NOT_RUN."""
    differences = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 1)
            if len(parts) != 2:
                raise ValueError(f"{path}:{n}: a test id and an explanation")
            differences[parts[0]] = parts[1]
    return differences


def verdict(mainline, ours, explanation, not_run=None):
    """(ok | skip | not ok, why) of one test."""
    if not_run:
        if mainline is None and ours is None:
            return "skip", f"not run: {not_run}"
        return "not ok", "in not_run.txt, yet it ran"
    if mainline is None or ours is None:
        return "not ok", f"not in the report over {MAINLINE if mainline is None else OURS}"
    (m, m_detail), (o, o_detail) = mainline, ours
    if o == "ok":
        if explanation:
            return "not ok", "passes over ours: remove it from the differences"
        return "ok", ""
    if o == "skip" and m != "ok":
        if explanation:
            return "not ok", "not a difference: remove it from the differences"
        return "skip", f"skipped over ours: {o_detail}"
    if m in ("fail", "error"):
        if explanation:
            return "not ok", "fails over mainline too: remove it from the differences"
        return "skip", f"fails over mainline too: {m_detail}"
    # Worse over ours: mainline passes it, or skips what ours fails.
    what = f"{m} over mainline, {o} over ours" + (f": {o_detail}" if o_detail else "")
    if explanation:
        return "skip", f"explained ({what}): {explanation}"
    return "not ok", what


def totals(results):
    counts = {}
    for outcome, _ in results.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return ", ".join(f"{counts.get(k, 0)} {k}" for k in ("ok", "skip", "fail", "error"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results_dir")
    p.add_argument("differences")
    p.add_argument("not_run")
    args = p.parse_args()

    reports = {}
    for dev in (MAINLINE, OURS):
        path = os.path.join(args.results_dir, f"pyverbs-{dev}.txt")
        with open(path, encoding="utf-8", errors="replace") as f:
            reports[dev] = parse(f.read())
    differences = load_differences(args.differences)
    not_run = load_differences(args.not_run)
    ids = sorted(set(reports[MAINLINE]) | set(reports[OURS]) | set(differences) | set(not_run))

    rows, passed, failed, skipped = [], 0, 0, 0
    print("TAP version 13")
    print(f"1..{len(ids)}")
    for n, test in enumerate(ids, 1):
        m, o = reports[MAINLINE].get(test), reports[OURS].get(test)
        v, why = verdict(m, o, differences.get(test), not_run.get(test))
        if v == "ok":
            passed += 1
            print(f"ok {n} {test}")
        elif v == "skip":
            skipped += 1
            print(f"ok {n} {test} # SKIP {why}")
        else:
            failed += 1
            print(f"not ok {n} {test} # {why}")
        rows.append((test, m[0] if m else "-", o[0] if o else "-", v, why))

    out = os.path.join(args.results_dir, "pyverbs-side-by-side.txt")
    with open(out, "w", encoding="utf-8") as f:
        f.write("# rdma-core's tests (tests/run_tests.py, pyverbs 56.1) over mainline "
                f"mlx4_ib ({MAINLINE}) and mlx4_bf's provider ({OURS}), one boot, two "
                "identical adapters (make pyverbs)\n")
        for dev, label in ((MAINLINE, "mainline"), (OURS, "ours")):
            f.write(f"# {label} {dev}: {len(reports[dev])} tests: {totals(reports[dev])}\n")
        f.write(f"# verdicts: {passed} ok over ours, {skipped} skipped (over both, explained, "
                f"failing over mainline too, or not run), {failed} not ok\n")
        f.write("#test mainline ours verdict why\n")
        for test, m, o, v, why in rows:
            f.write(f"{test} {m} {o} {v.replace(' ', '_')}{' ' + why if why else ''}\n")
    print(f"# side by side: {out}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
