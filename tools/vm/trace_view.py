#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Print the device model's analyzer trace as the adapter saw a post.

A post starts with the first MMIO write of a BlueFlame burst (chunk offset 0)
or with a send doorbell (UAR + 0x14) and ends with its CQE. Runs of MMIO
writes to one BlueFlame buffer are folded into one line. By default the first
BlueFlame post and the first doorbell post of the trace are shown; --all
shows every post, --limit N the first N.

--paths prints one table instead: per payload size and path, what the
adapter saw per post (BAR2 writes and bytes, DMA reads of the WQE) and the
post's one-way latency on the model's PCIe clock, each the median over the
trace's posts; --wall DIR adds mlx4-bf lat's wall clock beside them, from
its data files DIR/lat-bf.dat and DIR/lat-db.dat (and keeps their sizes).
A post inside which no message arrives is not counted: behind QEMU's posted
writes the model's send-queue scan may run a doorbell's WQE before the
doorbell comes (already_executed); a line after the table counts those.

--commands prints the command sequence instead (the bring-up of a driver:
mlx4_core's QUERY_FW, MAP_FA, RUN_FW ... UNMAP_FA), one line per command
with its modifiers and status, identical consecutive commands folded into one
line with a count; device resets, the strict firmware's refusals and
INIT_HCA's profile, and protocol errors in between. --fields adds each
command's decoded input mailbox (mlx4_mailbox.py: CQ, MPT and QP contexts,
WRITE_MTT, MAD_IFC's attribute), one command a line, none folded.

--window BEGIN END keeps only the records between the trace's mark records
of values BEGIN and END (`mlx4-bf counters --mark`, the guest's way of
bracketing a run), for every view. Each adapter has its own trace (vm.py
--second-adapter writes the second one's to TRACE-2.jsonl).
"""

import argparse
import json
import os
import statistics
import sys

import mlx4_mailbox as mailbox

DOORBELL = 0x14


def starts_post(rec):
    if rec.get("kind") != "mmio_write" or rec.get("bar") != 2:
        return None
    if rec.get("region") == "bf" and rec.get("chunk_off") == 0:
        return "blueflame"
    if rec.get("region") == "uar" and rec["off"] % 4096 == DOORBELL:
        return "doorbell"
    return None


def is_send_cqe(rec):
    """A send CQE (IS_SEND in byte 31); a delivered SEND writes a receive
    CQE first, and the post ends with the sender's."""
    data = rec.get("bytes", "")
    return len(data) >= 64 and int(data[62:64], 16) & 0x40 != 0


def posts(records):
    """Yields (kind, [records]) for every post in the trace."""
    current = None
    for rec in records:
        kind = starts_post(rec)
        if kind:
            if current:
                yield current
            current = (kind, [rec])
            continue
        if current is None:
            continue
        if rec.get("kind") == "mmio_write" and rec.get("region") != "bf":
            continue  # CQ/EQ doorbells, the diagnostic block: not this post's
        current[1].append(rec)
        if rec.get("kind") == "cqe" and is_send_cqe(rec):
            yield current
            current = None
    if current:
        yield current


def describe(rec):
    kind = rec["kind"]
    if kind == "mmio_write":
        where = f"BAR2 +{rec['off']:#08x}"
        if rec.get("region") == "bf":
            where += f" (BF page {rec['page']}, half {rec['half']}, +{rec['chunk_off']:#04x})"
        else:
            where += f" (UAR {rec['page']} send doorbell)"
        return f"MMIO write  {where} {rec['len']} B: {rec['data']}"
    if kind in ("dma_read", "dma_write"):
        verb = "DMA read " if kind == "dma_read" else "DMA write"
        return f"{verb}   {rec['addr']:#x} {rec['len']} B ({rec['what']})"
    if kind == "wqe":
        src = "the BlueFlame bytes" if rec["source"] == "bf" else "the send queue (DMA)"
        return (f"execute     QP {rec['qpn']:#x} WQE {rec['index']}: opcode {rec['opcode']:#04x}, "
                f"DS {rec['ds']}, from {src}")
    if kind == "bf_fallback":
        return f"fallback    QP {rec['qpn']:#x} BF page {rec['page']} half {rec['half']}: {rec['reason']}"
    if kind == "cqe":
        which = "send" if is_send_cqe(rec) else "receive"
        return f"CQE         CQ {rec['cqn']} index {rec['index']} for QP {rec['qpn']:#x} ({which})"
    if kind == "deliver":
        return (f"deliver     QP {rec['from']:#x} -> QP {rec['to']:#x}: {rec['len']} B into "
                f"RQ index {rec['rq_index']} (modelled one-way {rec.get('one_way_ns', '?')} ns)")
    if kind == "rdma_write":
        return (f"RDMA write  QP {rec['from']:#x} -> QP {rec['to']:#x}: {rec['len']} B at "
                f"{rec['raddr']:#x} (modelled one-way {rec.get('one_way_ns', '?')} ns)")
    rest = {k: v for k, v in rec.items() if k not in ("seq", "kind")}
    return f"{kind:<11} {json.dumps(rest)}"


def show(kind, recs, out):
    writes = [r for r in recs if r["kind"] == "mmio_write"]
    dma_wqe = sum(1 for r in recs if r["kind"] == "dma_read" and r.get("what") == "wqe")
    first = recs[0]
    print(f"{kind} post, trace seq {first['seq']}..{recs[-1]['seq']}:", file=out)
    i = 0
    while i < len(recs):
        rec = recs[i]
        j = i
        if rec["kind"] == "mmio_write" and rec.get("region") == "bf":
            while (j + 1 < len(recs) and recs[j + 1]["kind"] == "mmio_write"
                   and recs[j + 1].get("region") == "bf"):
                j += 1
        if j > i:
            total = sum(r["len"] for r in recs[i:j + 1])
            print(f"  {rec['seq']:>7}  MMIO write  BAR2 +{rec['off']:#08x} (BF page {rec['page']}, "
                  f"half {rec['half']}): {j - i + 1} writes of {rec['len']} B, {total} B ascending",
                  file=out)
        else:
            print(f"  {rec['seq']:>7}  {describe(rec)}", file=out)
        i = j + 1
    facts = post_facts(kind, recs)
    one_way = f", modelled one-way {facts['one_way']} ns" if facts else ""
    print(f"  = {len(writes)} MMIO write(s), {dma_wqe} DMA read(s) of the WQE{one_way}\n",
          file=out)


# What a post cost the adapter, by its record: the message's arrival (a
# SEND's delivery or an RDMA write's landing) carries its length and its
# one-way latency on the modelled PCIe clock, from the post's first MMIO
# write to the data (and the receive CQE, if any) in memory.
ARRIVALS = ("deliver", "rdma_write")
PATH_NAMES = {"blueflame": "BlueFlame", "doorbell": "doorbell", "fallback": "BF fallback"}
# mlx4-bf lat's data files per path (its --out with -bf/-db added).
WALL_FILES = {"blueflame": "lat-bf.dat", "doorbell": "lat-db.dat"}


def post_facts(kind, recs):
    """One post's numbers, or None if no message arrived inside it (a WQE
    that an earlier scan ran shows its doorbell only)."""
    arrival = next((r for r in recs if r["kind"] in ARRIVALS), None)
    if arrival is None or arrival.get("one_way_ns") is None:
        return None
    writes = [r for r in recs if r["kind"] == "mmio_write"]
    fell_back = any(r["kind"] == "bf_fallback" for r in recs)
    return {
        "path": "fallback" if fell_back else kind,
        "bytes": arrival["len"],
        "bar2_writes": len(writes),
        "bar2_bytes": sum(r["len"] for r in writes),
        "wqe_reads": sum(1 for r in recs if r["kind"] == "dma_read" and r.get("what") == "wqe"),
        "one_way": arrival["one_way_ns"],
    }


def read_wall(directory):
    """{(path, payload): t_typical in us} from mlx4-bf lat's data files
    (# PacketSize, LatTypical, LatBest, LatWorst)."""
    wall = {}
    for path, name in WALL_FILES.items():
        try:
            with open(os.path.join(directory, name)) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            continue
        for line in lines:
            if line.strip() and not line.startswith("#"):
                size, typical = line.split(",")[:2]
                wall[(path, int(size))] = float(typical)
    return wall


def median(values):
    m = statistics.median(values)
    return str(int(m)) if m == int(m) else f"{m:.1f}"


PATHS_CAPTION = ("# per post as the model saw it; one_way: its PCIe clock, "
                 "first MMIO write to data in memory")
WALL_CAPTION = ("; wall: POST_SEND under QEMU, the emulator's cost of trapped MMIO, "
                "not the adapter's")
PATHS_ROW = " {:<7} {:<10} {:<6} {:<12} {:<11} {:<14} {:<12} {}"


def group_posts(records, wall):
    """The posts by (payload, path), with `wall` only its sizes (and any
    fallback); and how many posts the scan had run ahead, per path."""
    seen, ahead = {}, {}
    for kind, recs in posts(records):
        facts = post_facts(kind, recs)
        if facts is None:
            if any(r["kind"] == "already_executed" for r in recs):
                ahead[kind] = ahead.get(kind, 0) + 1
            continue
        keep = wall is None or (facts["path"], facts["bytes"]) in wall
        if keep or facts["path"] == "fallback":
            seen.setdefault((facts["bytes"], facts["path"]), []).append(facts)
    return seen, ahead


def path_table(records, wall=None):
    """The --paths table as lines: per payload and path, medians over the
    trace's posts; with `wall` ({(path, payload): us}) its column, and
    only its sizes."""
    wall = wall or None  # no data file: no column
    seen, ahead = group_posts(records, wall)
    if not seen:
        return ["no post in the trace"]
    lines = [PATHS_CAPTION + (WALL_CAPTION if wall else ""),
             PATHS_ROW.format("#bytes", "path", "posts", "BAR2_writes", "BAR2_bytes",
                              "WQE_DMA_reads", "one_way[ns]", "wall[us]" if wall else "").rstrip()]
    order = list(PATH_NAMES)
    for (size, path), group in sorted(seen.items(), key=lambda k: (k[0][0], order.index(k[0][1]))):
        col = {key: median([f[key] for f in group])
               for key in ("bar2_writes", "bar2_bytes", "wqe_reads", "one_way")}
        t = wall.get((path, size)) if wall else None
        lines.append(PATHS_ROW.format(
            size, PATH_NAMES[path], len(group), col["bar2_writes"], col["bar2_bytes"],
            col["wqe_reads"], col["one_way"],
            "" if not wall else ("-" if t is None else f"{t:.1f}")).rstrip())
    for kind, n in sorted(ahead.items()):
        lines.append(f"# not counted: {n} {PATH_NAMES[kind]} posts whose WQE the model's scan ran "
                     "before their MMIO write came (QEMU posts the writes; the guest runs ahead)")
    return lines


def command_line(rec):
    """One line for a record of the command sequence, or None."""
    kind = rec.get("kind")
    if kind == "command":
        line = (f"{rec['name']} ({rec['opcode']:#05x}) opmod {rec['op_mod']} "
                f"in_mod {rec['in_mod']:#x}")
        if rec.get("event"):
            line += " E"
        status = rec.get("status", 0)
        return line + (f"  -> status {status:#04x}" if status else "")
    if kind == "device_reset":
        return f"-- device reset ({rec.get('source')})"
    if kind in ("fw_refused", "protocol_error"):
        fields = {k: v for k, v in rec.items() if k not in ("seq", "kind", "t_ns")}
        return f"   [{kind}] {json.dumps(fields)}"
    if kind == "init_hca":
        return "   [init_hca] " + ", ".join(
            f"{k} {v['base']:#x}/2^{v['log_num']}" for k, v in rec.items()
            if isinstance(v, dict))
    return None


def commands(records):
    """The trace's commands as dicts (name, opcode, in_mod, op_mod, status,
    event, fields), each with its input mailbox decoded: the model reads it
    (a `mailbox` DMA read) before it records the command."""
    out, pending = [], None
    for rec in records:
        kind = rec.get("kind")
        if kind == "dma_read" and rec.get("what") == "mailbox" and pending is None:
            pending = bytes.fromhex(rec.get("data", ""))
        elif kind == "command":
            out.append({"name": rec["name"], "opcode": rec["opcode"], "in_mod": rec["in_mod"],
                        "op_mod": rec["op_mod"], "status": rec.get("status", 0),
                        "event": bool(rec.get("event")),
                        "fields": mailbox.decode(rec["opcode"], rec["in_mod"], pending or b"")})
            pending = None
    return out


def command_with_fields(cmd):
    """One command and its decoded mailbox, as one line."""
    line = f"{cmd['name']} opmod {cmd['op_mod']} in_mod {cmd['in_mod']:#x}"
    if cmd.get("event"):
        line += " E"
    if cmd["status"]:
        line += f" -> status {cmd['status']:#04x}"
    fields = " ".join(f"{n}={mailbox.show(n, v)}" for n, v, _ in cmd["fields"] if v)
    return line + (f": {fields}" if fields else "")


def read_trace(path, window=None):
    """The trace's records; with `window` (BEGIN, END), only those between
    the mark records of those values (only they are parsed: a bench trace
    has millions of lines)."""
    if window is None:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    begin, end = window
    out, inside = [], False
    with open(path) as f:
        for line in f:
            if '"mark"' in line:
                rec = json.loads(line)
                if rec.get("kind") == "mark":
                    if rec.get("value") == begin:
                        inside, out = True, []
                        continue
                    if inside and rec.get("value") == end:
                        return out
            if inside and line.strip():
                out.append(json.loads(line))
    raise ValueError(f"{path}: no window between marks {begin} and {end}")


def command_sequence(records):
    """The command sequence as lines, runs of identical lines folded."""
    out = []
    prev, count = None, 0
    for rec in records:
        line = command_line(rec)
        if line is None:
            continue
        if line == prev:
            count += 1
            continue
        if prev is not None:
            out.append(prev + (f"  x{count}" if count > 1 else ""))
        prev, count = line, 1
    if prev is not None:
        out.append(prev + (f"  x{count}" if count > 1 else ""))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--all", action="store_true", help="every post")
    p.add_argument("--limit", type=int, default=0, help="at most N posts")
    p.add_argument("--commands", action="store_true", help="the command sequence")
    p.add_argument("--paths", action="store_true",
                   help="per payload size and path, what the adapter saw per post")
    p.add_argument("--wall", metavar="DIR",
                   help="with --paths: mlx4-bf lat's data files (lat-bf.dat, lat-db.dat) in DIR")
    p.add_argument("--fields", action="store_true",
                   help="with --commands: each command's decoded input mailbox")
    p.add_argument("--window", nargs=2, type=int, metavar=("BEGIN", "END"),
                   help="only the records between the marks of these values")
    args = p.parse_args()
    records = read_trace(args.trace, args.window)
    if args.paths:
        print("\n".join(path_table(records, read_wall(args.wall) if args.wall else None)))
        return
    if args.commands and args.fields:
        lines = [command_with_fields(c) for c in commands(records)]
        print("\n".join(lines) if lines else "no command in the trace")
        return
    if args.commands:
        lines = command_sequence(records)
        print("\n".join(lines) if lines else "no command in the trace")
        return
    shown = set()
    count = 0
    for kind, recs in posts(records):
        if not args.all and not args.limit:
            if kind in shown:
                continue
            shown.add(kind)
        show(kind, recs, sys.stdout)
        count += 1
        if (args.limit and count >= args.limit) or (not args.all and not args.limit
                                                     and len(shown) == 2):
            break
    if count == 0:
        print("no post in the trace")


if __name__ == "__main__":
    main()
