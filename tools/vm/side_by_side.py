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
verdict), RESULTS_DIR/side-by-side-commands.txt (the commands of one run,
TOOL at SIZE, paired, with the mailbox fields that differ) and, from the
guest's devinfo-*.txt, RESULTS_DIR/side-by-side-devinfo.txt (the lines
of `ibv_devinfo -v` that differ between the two devices). Exits
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

import mlx4_mailbox
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
    """The guest table's rows, and its facts lines (the uverbs ABIs)."""
    rows, facts = [], []
    with open(path) as f:
        for line in f:
            if line.startswith("# uverbs ABI"):
                facts.append(line.rstrip())
            if line.startswith("#") or not line.strip():
                continue
            row = dict(zip(COLUMNS, line.split()))
            for k in COLUMNS:
                if k not in ("tool", "driver", "ibdev", "bdf", "t_typical"):
                    row[k] = int(row[k])
            rows.append(row)
    return rows, facts


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


QP_OPS = mlx4_mailbox.QP_MODIFY | {mlx4_mailbox.TO_RST}
CQ_OPS = (mlx4_mailbox.SW2HW_CQ, mlx4_mailbox.HW2SW_CQ)
MPT_OPS = (mlx4_mailbox.SW2HW_MPT, mlx4_mailbox.HW2SW_MPT)


def kind_of(cmd):
    """The kind of object a command acts on, its number (None for a
    command on no object), and what names the command in its kind."""
    op, in_mod = cmd["opcode"], cmd["in_mod"]
    if op in QP_OPS:
        return "QP", in_mod & 0xffffff
    if op in CQ_OPS:
        return "CQ", in_mod
    if op in MPT_OPS:
        return "MPT", in_mod
    if op == mlx4_mailbox.MAD_IFC:
        attr = next((v for n, v, _ in cmd["fields"] if n == "attr"), "?")
        return f"MAD_IFC {attr}", None
    return cmd["name"], None


def field(cmd, name):
    return next((v for n, v, _ in cmd["fields"] if n == name), None)


def object_names(cmds):
    """{(kind, number): name}: QPs by order of appearance (QP #1 is the
    run's first QP on that adapter, whatever its number), their CQs by role
    (QP #1 send CQ, recv CQ, or CQ for both), memory regions by the QP
    whose PD they share. The two processes' commands interleave as they
    run, and each creates its objects in its own order: names by role
    pair the drivers' objects where positions would not."""
    names = {}
    for c in cmds:
        kind, obj = kind_of(c)
        if kind == "QP" and (kind, obj) not in names:
            names[(kind, obj)] = f"QP #{sum(1 for k in names if k[0] == 'QP') + 1}"
    roles = {}
    for c in cmds:
        if c["opcode"] == 0x19:  # RST2INIT_QP: its CQs and PD
            qp = names[("QP", c["in_mod"] & 0xffffff)]
            send, recv = field(c, "cqn_send"), field(c, "cqn_recv")
            roles.setdefault(("CQ", send), f"{qp} CQ" if send == recv else f"{qp} send CQ")
            roles.setdefault(("CQ", recv), f"{qp} recv CQ")
            roles.setdefault(("PD", field(c, "pd")), qp)
    per_pd = Counter()
    for c in cmds:
        kind, obj = kind_of(c)
        if (kind, obj) in names or obj is None:
            continue
        if kind == "CQ" and ("CQ", obj) in roles:
            names[(kind, obj)] = roles[("CQ", obj)]
        elif kind == "MPT" and ("PD", field(c, "pd")) in roles:
            owner = roles[("PD", field(c, "pd"))]
            per_pd[owner] += 1
            names[(kind, obj)] = f"{owner} MR #{per_pd[owner]}"
        elif c["name"].startswith("SW2HW"):
            names[(kind, obj)] = f"{kind} #{sum(1 for k in names if k[0] == kind) + 1}"
    return names


def pair_keys(cmds):
    """Per command, what pairs it with the other driver's: its object's
    name (object_names()), or the command (a MAD by its attribute), and its
    occurrence there."""
    names = object_names(cmds)
    seen, keys = Counter(), []
    for c in cmds:
        kind, obj = kind_of(c)
        if obj is not None:
            name = f"{names.get((kind, obj), f'{kind} {obj:#x}')}: {c['name']}"
        else:
            name = kind
        seen[name] += 1
        keys.append((name, seen[name]))
    return keys


def comparable(cmd):
    """{field: what two drivers must agree on}: a value field's value, an
    identity's presence (an address or number given, or left 0)."""
    return {n: v if k == mlx4_mailbox.VAL else ("set" if v else 0)
            for n, v, k in cmd["fields"]}


def field_diffs(a, b):
    """The fields that differ between the mailboxes of two paired
    commands: value fields by value, identities by presence."""
    fa, fb = comparable(a), comparable(b)
    return [(n, fa.get(n, 0), fb.get(n, 0)) for n in sorted(set(fa) | set(fb))
            if fa.get(n, 0) != fb.get(n, 0)]


def paired(main, ours):
    """(key, mainline index or None, ours index or None) in mainline's
    order, then ours' unpaired ones."""
    mk, ok = pair_keys(main), pair_keys(ours)
    where = {k: i for i, k in enumerate(ok)}
    out = [(k, i, where.pop(k, None)) for i, k in enumerate(mk)]
    return out + [(k, None, j) for k, j in sorted(where.items(), key=lambda kv: kv[1])]


def compare_commands(main, ours):
    """What differs between two runs' commands: those of one driver only,
    and the value fields of paired ones, each counted."""
    only, diffs = Counter(), Counter()
    for (name, _), i, j in paired(main, ours):
        if i is None or j is None:
            only[("mainline" if j is None else "mlx4_bf", name)] += 1
            continue
        for n, va, vb in field_diffs(main[i], ours[j]):
            diffs[(name, n, mlx4_mailbox.show(n, va), mlx4_mailbox.show(n, vb))] += 1
    return only, diffs


def command_report(tool, size, main, ours):
    """The two command sequences side by side, paired by object, then what
    differs."""
    lines = [f"# {tool} {size}: the commands of one perftest run (server and client) as each",
             "# adapter received them: left mainline mlx4_ib (mlx4_0), right mlx4_bf's provider",
             "# (mlx4_bf0), paired by object (QP #1: the run's first QP on that adapter; its CQs",
             "# and MRs by role), in mainline's order; #N is the command's place in its own",
             "# sequence, then its input modifier (the object's number on that adapter).",
             "# '=' the same value fields, '~' fields differ, '<' / '>' one driver only;",
             "# identities (QPN, CQN, MPT index and key, PD, UAR, EQN, addresses, PSNs) compared",
             "# by presence only (given or 0): each driver numbers and places its objects.",
             ""]
    for (name, _), i, j in paired(main, ours):
        a = main[i] if i is not None else None
        b = ours[j] if j is not None else None
        if a and b:
            mark = "~" if field_diffs(a, b) else "="
        else:
            mark = "<" if a else ">"
        left = f"#{i + 1:<3} {a['in_mod']:#07x}" if a else ""
        right = f"#{j + 1:<3} {b['in_mod']:#07x}" if b else ""
        lines.append(f"{name:<34} {left:<13} {mark} {right}".rstrip())
    only, diffs = compare_commands(main, ours)
    lines += ["", f"# commands: {len(main)} mainline, {len(ours)} mlx4_bf", "",
              "# sent by one driver only (count):"]
    lines += [f"  {who}: {name}  x{n}" for (who, name), n in sorted(only.items())] or ["  none"]
    lines += ["", "# fields that differ between paired commands (count):"]
    lines += [f"  {c}: {n}: mainline {va}, mlx4_bf {vb}  x{k}"
              for (c, n, va, vb), k in sorted(diffs.items())] or ["  none"]
    for title, cmds in (("mainline mlx4_ib", main), ("mlx4_bf's provider", ours)):
        lines += ["", f"# {title}, every command with its decoded mailbox (zero fields left out):"]
        lines += [f"  #{i + 1:<3} " + trace_view.command_with_fields(c) for i, c in enumerate(cmds)]
    return lines


def command_summary(rows, windows):
    """Per run pair, how the two drivers' commands compare."""
    lines = ["#", "# commands per run pair (paired by object, as side-by-side-commands.txt):"]
    for tool, size in dict.fromkeys((r["tool"], r["size"]) for r in rows):
        try:
            a, b = run_pair(rows, tool, size)
        except ValueError:
            continue
        main, ours = (trace_view.commands(windows[r["run"]]) for r in (a, b))
        only, diffs = compare_commands(main, ours)
        lines.append(f"# {tool:<13} {size:<5} {len(main)} mainline, {len(ours)} mlx4_bf; "
                     f"{sum(only.values())} sent by one driver only, "
                     f"{sum(diffs.values())} fields differ"
                     + "".join(f"; {c}: {n} {va} vs {vb}" for c, n, va, vb in diffs))
    return lines


def devinfo_diff(results):
    """The lines of `ibv_devinfo -v` that differ between the two devices
    (the guest's devinfo-mlx4_0.txt and devinfo-mlx4_bf0.txt), or None
    without them."""
    texts = []
    for name in ("devinfo-mlx4_0.txt", "devinfo-mlx4_bf0.txt"):
        try:
            with open(os.path.join(results, name)) as f:
                texts.append(f.read().splitlines())
        except FileNotFoundError:
            return None
    diff = difflib.unified_diff(*texts, "mlx4_0 (mainline mlx4_ib)", "mlx4_bf0 (mlx4_bf)",
                                n=0, lineterm="")
    return ["# ibv_devinfo -v: what libibverbs is told of each device, the lines that differ"] + [
        line for line in diff if not line.startswith("@@")]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results")
    p.add_argument("trace")
    p.add_argument("--run", nargs=2, metavar=("TOOL", "SIZE"), default=("ib_write_lat", "64"))
    args = p.parse_args()
    rows, facts = guest_rows(os.path.join(args.results, "perftest-side-by-side.txt"))
    second = args.trace.removesuffix(".jsonl") + "-2.jsonl"
    segs = [segments(args.trace), segments(second)]
    errors, counts, windows = [], {}, {}
    for row in rows:
        windows[row["run"]] = window_of(row, segs)
        counts[row["run"]] = count(windows[row["run"]])
        errors += cross_check(row, counts[row["run"]])
    lines, differ = table(rows, counts)
    lines += command_summary(rows, windows)
    head = ["# perftest over mainline mlx4_ib and over mlx4_bf's provider: per post (both",
            "# processes' posts), what reached the adapter, from its analyzer trace between the",
            "# run's marks (totals equal to its counters): BAR2 writes and bytes of the posts",
            "# (BlueFlame chunks and send doorbells), WQE DMA reads, send doorbells, fraction of",
            "# WQEs run from BlueFlame; the run's other BAR2 writes apart. t_typical in usec,",
            "# wall clock under TCG (inf: perftest's own clock estimate failed)."] + facts
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
    devinfo = devinfo_diff(args.results)
    if devinfo is not None:
        with open(os.path.join(args.results, "side-by-side-devinfo.txt"), "w") as f:
            f.write("\n".join(devinfo) + "\n")
    print(f"wrote side-by-side.txt and side-by-side-commands.txt ({tool} {size})"
          + (", side-by-side-devinfo.txt" if devinfo is not None else "") + f" to {args.results}")
    if differ or errors:
        print("side-by-side: FAILED: libmlx4's posts did not reach the adapter alike over both "
              "drivers (or the trace and the counters disagree):", file=sys.stderr)
        for d in differ + errors:
            print(f"side-by-side:   {d}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
