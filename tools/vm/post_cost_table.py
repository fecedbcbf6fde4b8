#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The post-cost table of issue 38: one post, four ways, side by side.

make bench runs tools/vm/provider/post_cost.sh at the end of both of its
boots: the -icount boot (post-cost-icount.txt: guest instructions) and the
wall-clock boot (post-cost-wall.txt: TCG's wall time). Every column of a
file comes from one boot; this joins the two files by size and column and
adds the ratios the issue asks about:

- qp_post / libmlx4 instructions (our method against libmlx4's own post:
  on s390x without MIO the s390_pci_mmio_write() system call);
- whether BlueFlame beats the doorbell in the model's one-way latency at
  every inline size, as in the seed's Table 4.1.

Usage: post_cost_table.py RESULTS_DIR  (writes RESULTS_DIR/post-cost-table.txt)
"""

import os
import sys

COLUMNS = ["mainline", "libmlx4", "qp_post", "doorbell"]
FIELDS = ["bar2_wr", "bar2_B", "wqe_dma", "p2w_ns", "1way_ns"]
# Inline up to here (post_cost.sh's -i 208); larger sizes are gathered.
INLINE_MAX = 208


def read(path):
    """{(size, column): {field: value}} of one post_cost.sh table, and its
    '#' caption lines."""
    rows, captions, head = {}, [], None
    if not os.path.exists(path):
        return rows, captions
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "#bytes":
                head = w
            elif w[0].startswith("#"):
                captions.append(line.rstrip())
            elif head:
                rows[(int(w[0]), w[1])] = dict(zip(head[2:], w[2:]))
    return rows, captions


def number(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def ratio(a, b):
    a, b = number(a), number(b)
    return f"{a / b:.2f}" if a is not None and b else "-"


def table(icount, wall):
    """The joined table's lines and its verdict lines."""
    sizes = sorted({s for s, _ in icount} | {s for s, _ in wall})
    cols = [c for c in COLUMNS if any((s, c) in icount or (s, c) in wall for s in sizes)]
    out = ["%-6s %-9s %8s %8s %8s %8s %8s %8s %8s" % (
        ("#bytes", "column", "insns", "wall_ns") + tuple(FIELDS))]
    for s in sizes:
        for c in cols:
            i, w = icount.get((s, c), {}), wall.get((s, c), {})
            # The analyzer's counts and the model's clock do not depend on
            # the guest's: the -icount boot's, else the wall boot's.
            a = i or w
            out.append("%-6s %-9s %8s %8s %8s %8s %8s %8s %8s" % (
                (s, c, i.get("icount", "-"), w.get("wall", "-"))
                + tuple(a.get(f, "-") for f in FIELDS)))
    verdict = []
    if all((s, c) in icount for s in sizes for c in ("libmlx4", "qp_post")):
        verdict.append("# qp_post / libmlx4 instructions: " + " ".join(
            f"{s}:{ratio(icount[(s, 'qp_post')]['icount'], icount[(s, 'libmlx4')]['icount'])}"
            for s in sizes))
    if all((s, c) in wall for s in sizes for c in ("libmlx4", "qp_post")):
        verdict.append("# qp_post / libmlx4 TCG wall time: " + " ".join(
            f"{s}:{ratio(wall[(s, 'qp_post')]['wall'], wall[(s, 'libmlx4')]['wall'])}"
            for s in sizes))
    rows = icount or wall
    inline = [s for s in sizes if s <= INLINE_MAX]
    for c in ("libmlx4", "qp_post"):
        pairs = [(number(rows.get((s, c), {}).get("1way_ns")),
                  number(rows.get((s, "doorbell"), {}).get("1way_ns"))) for s in inline]
        if pairs and all(bf is not None and db is not None for bf, db in pairs):
            wins = all(bf < db for bf, db in pairs)
            each = " ".join(f"{s}:{bf:.0f}/{db:.0f}" for s, (bf, db) in zip(inline, pairs))
            verdict.append(f"# modelled one-way, {c} (BlueFlame) below doorbell at every inline "
                           f"size: {'yes' if wins else 'no'} ({each})")
    return out, verdict


def read_perftest(path):
    """{(tool, size, column): {field: value}} of post-cost-perftest.txt."""
    rows, head = {}, None
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "#tool":
                head = w
            elif w and not w[0].startswith("#") and head:
                rows[(w[0], int(w[1]), w[2])] = dict(zip(head[3:], w[3:]))
    return rows


def perftest_table(rows):
    """perftest per tool, size and column, and whether BlueFlame beats the
    doorbell in the model's one-way latency at every inline size."""
    if not rows:
        return []
    out = ["", "# perftest (wall-clock boot): t_typical is TCG's wall time; 1way_ns the model's",
           "%-12s %-6s %-9s %8s %8s %8s %8s" % ("#tool", "bytes", "column", "t_typ_us", "1way_ns",
                                               "bar2_wr", "wqe_dma")]
    tools = sorted({t for t, _, _ in rows})
    sizes = sorted({s for _, s, _ in rows})
    for t in tools:
        for s in sizes:
            for c in COLUMNS:
                r = rows.get((t, s, c))
                if r:
                    out.append("%-12s %-6s %-9s %8s %8s %8s %8s" % (
                        t, s, c, r.get("t_typ_us", "-"), r.get("1way_ns", "-"),
                        r.get("bar2_wr", "-"), r.get("wqe_dma", "-")))
    inline = [s for s in sizes if s <= INLINE_MAX]
    for t in tools:
        for c in ("libmlx4", "qp_post"):
            pairs = [(number(rows.get((t, s, c), {}).get("1way_ns")),
                      number(rows.get((t, s, "doorbell"), {}).get("1way_ns"))) for s in inline]
            if pairs and all(bf is not None and db is not None for bf, db in pairs):
                wins = all(bf < db for bf, db in pairs)
                out.append(f"# {t}: modelled one-way, {c} (BlueFlame) below doorbell at every "
                           f"inline size: {'yes' if wins else 'no'}")
    return out


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: post_cost_table.py RESULTS_DIR")
    d = argv[1]
    icount, captions = read(os.path.join(d, "post-cost-icount.txt"))
    wall, wall_captions = read(os.path.join(d, "post-cost-wall.txt"))
    if not icount and not wall:
        sys.exit(f"post_cost_table: no post-cost-icount.txt or post-cost-wall.txt in {d}")
    lines, verdict = table(icount, wall)
    # Its own caption instead of the boots' lines on their clocks.
    head = [c for c in captions or wall_captions
            if not any(k in c for k in ("guest clock", "(icount:", "emulator's"))]
    text = "\n".join(
        ["# One post four ways: insns from make bench's -icount boot, wall_ns (TCG's wall time:",
         "# the emulator's, not an adapter's) from its wall-clock boot; the rest per post."]
        + head + lines + verdict
        + perftest_table(read_perftest(os.path.join(d, "post-cost-perftest.txt")))) + "\n"
    with open(os.path.join(d, "post-cost-table.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv)
