#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""rdma-core's post and latency beside ours: results/upstream-vs-ours.txt
and its plot, from what make bench's two boots sent back (each with two
adapters: mlx4_bf on one, mainline mlx4_core + mlx4_ib on the other).

Usage: versus.py [--s390] RESULTS_DIR   (--s390: the tables of an s390x guest)
Reads userpost.txt and ibv-post-cost.txt (the -icount boot), pingpong.txt,
pingpong-bf-busy.dat, userpost-pingpong.txt and perftest-versus.txt (the
wall-clock boot); writes upstream-vs-ours.txt and upstream-vs-ours.svg.
"""

import os
import sys


def rows(path, first_numeric=True):
    """The non-comment lines of `path`, split on whitespace and commas."""
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            cols = line.replace(",", " ").split()
            if first_numeric and not cols[0].isdigit():
                continue
            out.append(cols)
    return out


def header_columns(path):
    """The column names of the last '#bytes' header line of `path`."""
    names = []
    with open(path) as f:
        for line in f:
            if line.lstrip("# ").startswith("bytes"):
                names = line.lstrip("# ").split()
    return names


def post_costs(d):
    """size -> {column: instructions}: ours (userpost) and libmlx4's."""
    names = header_columns(os.path.join(d, "userpost.txt"))
    cost = {}
    for r in rows(os.path.join(d, "userpost.txt")):
        cost[int(r[0])] = {n: float(v) for n, v in zip(names[1:6], r[1:6])}
    for r in rows(os.path.join(d, "ibv-post-cost.txt")):
        cost.setdefault(int(r[0]), {})["libmlx4_" + r[1]] = float(r[2])
    return cost


def analyzer_rows(d):
    """size -> (BAR2 writes, BAR2 bytes, WQE DMA reads) per post of our
    SEND ping-pong, BlueFlame path, busy wait (pingpong.txt)."""
    out, inside = {}, False
    with open(os.path.join(d, "pingpong.txt")) as f:
        for line in f:
            if line.startswith("----"):
                inside = line.startswith(("---- analyzer: path bf, wait busy",
                                          "---- analyzer: path auto, wait busy"))
                continue
            cols = line.split()
            if inside and len(cols) >= 6 and cols[0].isdigit() and cols[1] in ("bf", "auto"):
                out[int(cols[0])] = (cols[3], cols[4], cols[5])
    return out


def latencies(d):
    """size -> {column: t_typical usec}."""
    lat = {}
    # pingpong --all names it by path; a run for one path only, "auto".
    dat = os.path.join(d, "pingpong-bf-busy.dat")
    if not os.path.exists(dat):
        dat = os.path.join(d, "pingpong-auto-busy.dat")
    for r in rows(dat):
        lat.setdefault(int(r[0]), {})["ours_send"] = float(r[1])
    for r in rows(os.path.join(d, "userpost-pingpong.txt")):
        lat.setdefault(int(r[0]), {}).update(
            ours_write_ioctl=float(r[1]), ours_write_user=float(r[2]))
    perf = {}
    for r in rows(os.path.join(d, "perftest-versus.txt"), first_numeric=False):
        tool, size = r[0], int(r[1])
        # perftest prints inf when its CPU frequency estimate failed.
        if r[2] not in ("-", "inf"):
            lat.setdefault(size, {})[tool] = float(r[2])
        perf[(tool, size)] = r[3:8]
    return lat, perf


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def ratio(a, b):
    return None if a is None or not b else a / b


# How the guest's user space reaches the BlueFlame page, per architecture.
X86_POST = [
    "#    Both BlueFlame copies are trapped MMIO under TCG: the instructions are the guest's, not",
    "#    the emulator's.",
]
S390_POST = [
    "#    s390x without the PCI MIO instructions: libmlx4_bf and user_bf are each one",
    "#    s390_pci_mmio_write() system call (rdma-core util/mmio.h; the upstream boot counts them),",
    "#    whose kernel side copies the WQE to a bounce buffer and stores it with PCISTB;",
    "#    ioctl_bf stores the staged WQE with PCISTB from the QP_POST method.",
]


def table(d, s390=False):
    cost = post_costs(d)
    lat, perf = latencies(d)
    ours_seen = analyzer_rows(d)
    out = [
        "# rdma-core beside mlx4-bf (make bench): in each boot two identical adapters, each its own",
        "# device model instance; mlx4_bf drives one, mainline mlx4_core + mlx4_ib (+ libibverbs,",
        "# libmlx4 and perftest from Debian) the other.",
        "#",
        "# 1. One post, in guest instructions (QEMU -icount shift=0: the clock counts instructions),",
        "#    median of the clock read around the call alone, the completion reaped outside the window:",
        "#    libmlx4_bf = ibv_post_send() of an inline RDMA write over mainline mlx4_ib (libmlx4",
        "#    copies the WQE to the BlueFlame page; ibv_post_cost); ioctl_bf = our QP_POST method",
        "#    (uverbs ioctl on mlx4_bf0) of a WQE stamped in the send queue, BlueFlame; user_bf =",
        "#    libmlx4's own ibv_post_send() on mlx4_bf0, its BlueFlame stores; noop_ioctl = the uverbs",
        "#    floor (QUERY_CONTEXT, answered at once).",
    ] + (S390_POST if s390 else X86_POST) + [
        f"{'#bytes':<8} {'libmlx4_bf':>11} {'ioctl_bf':>9} {'user_bf':>8} {'noop_ioctl':>11}"
        f" {'ioctl/libmlx4':>14} {'user/libmlx4':>13}",
    ]
    for size in sorted(cost):
        c = cost[size]
        lib = c.get("libmlx4_bf")
        out.append(
            f"{size:<8} {fmt(lib, '.0f'):>11} {fmt(c.get('ioctl_bf'), '.0f'):>9}"
            f" {fmt(c.get('user_bf'), '.0f'):>8} {fmt(c.get('noop'), '.0f'):>11}"
            f" {fmt(ratio(c.get('ioctl_bf'), lib), '.2f'):>14}"
            f" {fmt(ratio(c.get('user_bf'), lib), '.2f'):>13}")
    out += [
        "#",
        "# 2. Ping-pong latency, t_typical [usec] (median round trip / 2), wall clock under TCG:",
        "#    every BAR write is a trapped vfio-user message, so these rank the number of MMIO",
        "#    writes and DMA round trips, not a silicon latency. ib_send_lat / ib_write_lat:",
        "#    perftest over libmlx4 (inline, BlueFlame up to its inline size); ours_send = mlx4-bf",
        "#    pingpong on mlx4_bf0 (SEND through QP_POST, BlueFlame, busy wait); ours_write_* =",
        "#    mlx4-bf userpost --pingpong (RDMA write, through QP_POST or libmlx4's own stores).",
        f"{'#bytes':<8} {'ib_send_lat':>12} {'ours_send':>10} {'ib_write_lat':>13}"
        f" {'ours_write_ioctl':>17} {'ours_write_user':>16}",
    ]
    for size in sorted(lat):
        t = lat[size]
        out.append(
            f"{size:<8} {fmt(t.get('ib_send_lat'), '.2f'):>12} {fmt(t.get('ours_send'), '.2f'):>10}"
            f" {fmt(t.get('ib_write_lat'), '.2f'):>13} {fmt(t.get('ours_write_ioctl'), '.2f'):>17}"
            f" {fmt(t.get('ours_write_user'), '.2f'):>16}")
    out += [
        "#",
        "# 3. What reached the adapter per post, as its analyzer counted (both directions' posts):",
        "#    BAR2 writes and bytes (BlueFlame or doorbell), WQE DMA reads (0: executed from the",
        "#    BlueFlame bytes), fraction of WQEs run from BlueFlame, protocol errors in the run.",
        f"{'#bytes':<8} {'source':<14} {'BAR2_wr':>8} {'BAR2_bytes':>11} {'WQE_DMA_rd':>11}"
        f" {'BF_fraction':>12} {'errors':>7}",
    ]
    sizes = sorted({s for (_, s) in perf} | set(ours_seen))
    for size in sizes:
        for tool in ("ib_send_lat", "ib_write_lat"):
            p = perf.get((tool, size))
            if p:
                out.append(f"{size:<8} {tool:<14} {p[0]:>8} {p[1]:>11} {p[2]:>11} {p[3]:>12} {p[4]:>7}")
        o = ours_seen.get(size)
        if o:
            out.append(f"{size:<8} {'ours_send_bf':<14} {o[0]:>8} {o[1]:>11} {o[2]:>11} {'-':>12} {'-':>7}")
    return "\n".join(out) + "\n", lat


def plot(path, lat):
    """Latency against size, one polyline per column, as SVG."""
    cols = ["ib_send_lat", "ours_send", "ib_write_lat", "ours_write_ioctl", "ours_write_user"]
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]
    pts = {c: [(s, lat[s][c]) for s in sorted(lat) if c in lat[s]] for c in cols}
    xs = [s for s in lat] or [0]
    ys = [y for c in cols for _, y in pts[c]] or [1]
    w, h, m = 640, 400, 60
    x0, x1, y1 = min(xs), max(xs) or 1, max(ys) * 1.1 or 1

    def sx(x):
        return m + (x - x0) / ((x1 - x0) or 1) * (w - 2 * m)

    def sy(y):
        return h - m - y / y1 * (h - 2 * m)

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-size="11">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle">rdma-core beside mlx4-bf: '
           f'ping-pong t_typical (wall clock under TCG)</text>',
           f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="black"/>',
           f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 20}" text-anchor="middle">payload [bytes]</text>',
           f'<text x="15" y="{h / 2}" transform="rotate(-90 15 {h / 2})" '
           f'text-anchor="middle">t_typical [usec]</text>']
    for x in sorted(set(xs)):
        svg.append(f'<text x="{sx(x):.1f}" y="{h - m + 15}" text-anchor="middle">{x}</text>')
    for i in range(5):
        y = y1 * i / 4
        svg.append(f'<text x="{m - 5}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.0f}</text>')
    for k, (c, color) in enumerate(zip(cols, colors)):
        if not pts[c]:
            continue
        line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts[c])
        svg.append(f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="2"/>')
        svg.append(f'<text x="{m + 10}" y="{m + 14 * k}" fill="{color}">{c}</text>')
    svg.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(svg) + "\n")


def main():
    args = sys.argv[1:]
    s390 = args[:1] == ["--s390"]
    if s390:
        args = args[1:]
    if len(args) != 1:
        sys.exit(__doc__)
    d = args[0]
    text, lat = table(d, s390)
    with open(os.path.join(d, "upstream-vs-ours.txt"), "w") as f:
        f.write(text)
    plot(os.path.join(d, "upstream-vs-ours.svg"), lat)
    print(text, end="")
    print(f"wrote upstream-vs-ours.txt and upstream-vs-ours.svg to {d}")


if __name__ == "__main__":
    main()
