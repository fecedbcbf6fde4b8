#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The same perftest runs over mainline mlx4_ib and over mlx4_bf's RDMA
provider, set side by side: what reached each adapter per post, which must
be equal (libmlx4 posts alike over both: the drivers only set the queues
up), and the commands each driver sent for one run.

Usage: side_by_side.py RESULTS_DIR TRACE [--run TOOL SIZE]

RESULTS_DIR/perftest-side-by-side.txt is the guest's table (versus.sh
side-by-side): per run its driver, its adapter, and the analyzer counters'
deltas; run N lies between the marks 2N and 2N+1 in its adapter's trace.
TRACE is the boot's first adapter's analyzer trace (mlx4_bf's); the
second's, mainline's, is TRACE-2.jsonl (vm.py --second-adapter). Each
window of the trace is split into the posts' BAR2 writes (BlueFlame
chunks, send doorbells) and the rest (EQ and CQ doorbells: interrupts of
the set-up's commands, arming), its totals checked against the counters.

Writes RESULTS_DIR/side-by-side.txt (per post, both drivers, and the
verdict) and RESULTS_DIR/side-by-side-commands.txt (the commands of one
run, TOOL at SIZE, aligned, with the mailbox fields that differ). Exits
1, saying which, if the per-post counts differ or the trace and the
counters disagree.
"""

import argparse
import difflib
import json
import os
import sys
from collections import Counter
from fractions import Fraction

import trace_view

SEND_DOORBELL = 0x14
CQ_DOORBELLS = (0x20, 0x24)
EQ_DOORBELLS = range(0x800, 0x820)
# The guest table's columns (versus.sh side_by_side).
COLUMNS = ("run tool size driver ibdev bdf t_typical wqes_bf wqes_dma BAR2_wr BAR2_bytes "
           "WQE_DMA_rd doorbells IRQs commands protocol_errors").split()
# What the trace must agree on with the counters: (trace count, column).
CROSS_CHECK = (("bar2_writes", "BAR2_wr"), ("bar2_bytes", "BAR2_bytes"),
               ("wqe_reads", "WQE_DMA_rd"), ("doorbells", "doorbells"),
               ("wqes_bf", "wqes_bf"), ("wqes_dma", "wqes_dma"), ("commands", "commands"))
# Per post, equal between the drivers: (name, numerator counts).
PER_POST = (("BAR2_wr", ("bf_writes", "doorbells")),
            ("BAR2_bytes", ("bf_bytes", "doorbell_bytes")),
            ("WQE_DMA_rd", ("wqe_reads",)),
            ("doorbells", ("doorbells",)),
            ("BF_fraction", ("wqes_bf",)))


def guest_rows(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            row = dict(zip(COLUMNS, line.split()))
            for k in COLUMNS:
                if k not in ("tool", "driver", "ibdev", "bdf", "t_typical"):
                    row[k] = int(row[k])
            rows.append(row)
    return rows


def segments(path):
    """{mark value: the records after that mark up to the next}: one pass,
    parsing only what follows the first mark."""
    out, current = {}, None
    with open(path) as f:
        for line in f:
            if '"mark"' in line:
                rec = json.loads(line)
                if rec.get("kind") == "mark":
                    current = out.setdefault(rec["value"], [])
                    continue
            if current is not None and line.strip():
                current.append(json.loads(line))
    return out


def other_write(rec):
    """What a BAR2 write that is not a post's is."""
    in_page = rec["off"] % 4096
    if rec.get("region") == "uar" and in_page in CQ_DOORBELLS:
        return "CQ doorbell"
    if rec.get("region") == "uar" and in_page in EQ_DOORBELLS:
        return "EQ doorbell"
    return f"BAR2 +{rec['off']:#x}"


def count(records):
    """What one run's window of the trace holds, by kind."""
    c = Counter()
    for r in records:
        kind = r.get("kind")
        if kind == "mmio_write" and r.get("bar") == 2:
            c["bar2_writes"] += 1
            c["bar2_bytes"] += r["len"]
            if r.get("region") == "bf":
                c["bf_writes"] += 1
                c["bf_bytes"] += r["len"]
            elif r.get("region") == "uar" and r["off"] % 4096 == SEND_DOORBELL:
                c["doorbells"] += 1
                c["doorbell_bytes"] += r["len"]
            else:
                c["other:" + other_write(r)] += 1
        elif kind == "dma_read" and r.get("what") == "wqe":
            c["wqe_reads"] += 1
        elif kind == "wqe":
            c["wqes"] += 1
            c["wqes_bf" if r.get("source") == "bf" else "wqes_dma"] += 1
        elif kind == "command":
            c["commands"] += 1
    return c


def per_post(c):
    posts = c["wqes"]
    return {name: Fraction(sum(c[k] for k in keys), posts) if posts else None
            for name, keys in PER_POST}


def fmt(v):
    return "-" if v is None else f"{float(v):.2f}"


def other_summary(c):
    parts = [f"{n} {k.removeprefix('other:')}" for k, n in sorted(c.items())
             if k.startswith("other:")]
    return ", ".join(parts) if parts else "none"


def window_of(row, segs):
    """The run's records, from whichever adapter's trace has its marks."""
    begin = 2 * row["run"]
    for seg in segs:
        if begin in seg and begin + 1 in seg:
            return seg[begin]
    raise ValueError(f"run {row['run']} ({row['tool']} {row['size']} over {row['driver']}): "
                     f"marks {begin} and {begin + 1} in neither trace")


def cross_check(row, c):
    """The trace's counts against the guest's counter deltas."""
    return [f"run {row['run']} ({row['tool']} {row['size']} over {row['driver']}): "
            f"the trace has {c[k]} {k}, the counters moved {row[col]}"
            for k, col in CROSS_CHECK if c[k] != row[col]]


TABLE_HEAD = ("#tool          size  driver    t_typical  posts  BAR2_wr  BAR2_bytes  "
              "WQE_DMA_rd  doorbells  BF_fraction  other BAR2 writes (not posts)")


def table(rows, counts):
    """The per-post table and the differences between the drivers."""
    lines = [TABLE_HEAD]
    differ = []
    pairs = {}
    for row in rows:
        pairs.setdefault((row["tool"], row["size"]), {})[row["driver"]] = row
    for (tool, size), by in pairs.items():
        pp = {}
        for driver in ("mainline", "mlx4_bf"):
            row = by.get(driver)
            if row is None:
                differ.append(f"{tool} {size}: no run over {driver}")
                continue
            c = counts[row["run"]]
            pp[driver] = per_post(c)
            lines.append(f"{tool:<14} {size:<5} {driver:<9} {row['t_typical']:>9}  "
                         f"{c['wqes']:>5}  "
                         + "  ".join(f"{fmt(pp[driver][n]):>{len(n)}}" for n, _ in PER_POST)
                         + f"  {other_summary(c)}")
        if len(pp) == 2:
            for name, _ in PER_POST:
                a, b = pp["mainline"][name], pp["mlx4_bf"][name]
                if a != b:
                    differ.append(f"{tool} {size}: {name} per post {fmt(a)} over mainline, "
                                  f"{fmt(b)} over mlx4_bf")
    return lines, differ


def run_pair(rows, tool, size):
    by = {r["driver"]: r for r in rows if r["tool"] == tool and r["size"] == size}
    if "mainline" not in by or "mlx4_bf" not in by:
        raise ValueError(f"no run of {tool} at {size} over both drivers")
    return by["mainline"], by["mlx4_bf"]


def key(cmd):
    """What aligns two commands: the command, and a MAD's attribute."""
    attr = next((v for n, v, _ in cmd["fields"] if n == "attr"), None)
    return cmd["name"] + (f" {attr}" if attr else "")


def label(cmd):
    return f"{key(cmd)} in_mod {cmd['in_mod']:#x} opmod {cmd['op_mod']}"


def field_diffs(a, b):
    """The value fields (not the identities) that differ between the
    mailboxes of two aligned commands."""
    fa = {n: v for n, v, k in a["fields"] if k == "val"}
    fb = {n: v for n, v, k in b["fields"] if k == "val"}
    return [(n, fa.get(n, 0), fb.get(n, 0)) for n in sorted(set(fa) | set(fb))
            if fa.get(n, 0) != fb.get(n, 0)]


def aligned(main, ours):
    """(mainline command or None, ours or None) in sequence order."""
    sm = difflib.SequenceMatcher(a=[key(c) for c in main], b=[key(c) for c in ours],
                                 autojunk=False)
    out = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            out += list(zip(main[i1:i2], ours[j1:j2]))
        else:
            out += [(c, None) for c in main[i1:i2]] + [(None, c) for c in ours[j1:j2]]
    return out


def command_report(tool, size, main, ours):
    """The two command sequences side by side, then what differs."""
    show = trace_view.command_with_fields
    lines = [f"# {tool} {size}: the commands of one perftest run (server and client)",
             "# left mainline mlx4_ib (mlx4_0), right mlx4_bf's provider (mlx4_bf0);",
             "# '=' same command and value fields, '~' value fields differ, '<' mainline only,",
             "# '>' mlx4_bf only; identities (QPN, CQN, MPT, PD, UAR, addresses, PSNs) aside",
             ""]
    diffs = Counter()
    only = Counter()
    for a, b in aligned(main, ours):
        if a and b:
            d = field_diffs(a, b)
            mark = "~" if d else "="
            for n, va, vb in d:
                diffs[(key(a), n, trace_view.mailbox.show(n, va),
                       trace_view.mailbox.show(n, vb))] += 1
        else:
            mark = "<" if a else ">"
            only[(mark, key(a or b))] += 1
        lines.append(f"{label(a) if a else '':<44} {mark} {label(b) if b else ''}".rstrip())
    lines += ["", f"# commands: {len(main)} mainline, {len(ours)} mlx4_bf", "",
              "# in one sequence only (count):"]
    lines += [f"  {m} {k}  x{n}" for (m, k), n in sorted(only.items())] or ["  none"]
    lines += ["", "# value fields that differ between aligned commands (count):"]
    lines += [f"  {c}: {n}: mainline {va}, mlx4_bf {vb}  x{k}"
              for (c, n, va, vb), k in sorted(diffs.items())] or ["  none"]
    for title, cmds in (("mainline mlx4_ib", main), ("mlx4_bf's provider", ours)):
        lines += ["", f"# {title}, every command with its decoded mailbox:"]
        lines += ["  " + show(c) for c in cmds]
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results")
    p.add_argument("trace")
    p.add_argument("--run", nargs=2, metavar=("TOOL", "SIZE"), default=("ib_write_lat", "64"))
    args = p.parse_args()
    rows = guest_rows(os.path.join(args.results, "perftest-side-by-side.txt"))
    second = args.trace.removesuffix(".jsonl") + "-2.jsonl"
    segs = [segments(args.trace), segments(second)]
    errors, counts, windows = [], {}, {}
    for row in rows:
        windows[row["run"]] = window_of(row, segs)
        counts[row["run"]] = count(windows[row["run"]])
        errors += cross_check(row, counts[row["run"]])
    lines, differ = table(rows, counts)
    head = ["# perftest over mainline mlx4_ib and over mlx4_bf's provider: per post (both",
            "# processes' posts), what reached the adapter, from its analyzer trace between the",
            "# run's marks (totals equal to its counters): BAR2 writes and bytes of the posts",
            "# (BlueFlame chunks and send doorbells), WQE DMA reads, send doorbells, fraction of",
            "# WQEs run from BlueFlame; the run's other BAR2 writes apart. t_typical in usec,",
            "# wall clock under TCG."]
    verdict = (["# equal per post over both drivers at every size"] if not differ and not errors
               else [f"# DIFFER: {d}" for d in differ] + [f"# TRACE/COUNTERS: {e}" for e in errors])
    with open(os.path.join(args.results, "side-by-side.txt"), "w") as f:
        f.write("\n".join(head + lines + verdict) + "\n")
    print("\n".join(lines + verdict))
    tool, size = args.run[0], int(args.run[1])
    a, b = run_pair(rows, tool, size)
    report = command_report(tool, size, trace_view.commands(windows[a["run"]]),
                            trace_view.commands(windows[b["run"]]))
    with open(os.path.join(args.results, "side-by-side-commands.txt"), "w") as f:
        f.write("\n".join(report) + "\n")
    print(f"wrote side-by-side.txt and side-by-side-commands.txt ({tool} {size}) to {args.results}")
    if differ or errors:
        print("side-by-side: FAILED: libmlx4's posts did not reach the adapter alike over both "
              "drivers (or the trace and the counters disagree):", file=sys.stderr)
        for d in differ + errors:
            print(f"side-by-side:   {d}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
