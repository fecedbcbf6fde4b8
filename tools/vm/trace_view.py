#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Print the device model's analyzer trace as the adapter saw a post.

A post starts with the first MMIO write of a BlueFlame burst (chunk offset 0)
or with a send doorbell (UAR + 0x14) and ends with its CQE. Runs of MMIO
writes to one BlueFlame buffer are folded into one line. By default the first
BlueFlame post and the first doorbell post of the trace are shown; --all
shows every post, --limit N the first N.

--commands prints the command sequence instead (the bring-up of a driver:
mlx4_core's QUERY_FW, MAP_FA, RUN_FW ... UNMAP_FA), one line per command
with its modifiers and status, identical consecutive commands folded into one
line with a count; device resets, the strict firmware's refusals and
INIT_HCA's profile, and protocol errors in between.
"""

import argparse
import json
import sys

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
    print(f"  = {len(writes)} MMIO write(s), {dma_wqe} DMA read(s) of the WQE\n", file=out)


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
    args = p.parse_args()
    with open(args.trace) as f:
        records = [json.loads(line) for line in f if line.strip()]
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
