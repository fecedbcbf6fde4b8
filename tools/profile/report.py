#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn insn_profile.so's per-address counts into per-function tables.

Input: the plugin's output (per window a kept and a dropped section, each
"# window N kept|dropped insns T addrs A" and "ADDRESS COUNT" lines),
the guest program's lines ("profile: window K config C calls N kept K
dropped D retries R min_ns M kept_ns T"), the guest's /proc/kallsyms lines
of the module (and of _text, to check the kernel's load offset against
System.map), the kernel's System.map and the guest program (nm).

Output: results/profile-<config>.txt per window: instructions per kept call
by function, sorted, with the totals and the amortized count (the module's
instructions of the dropped calls spread over all calls: the reap of a full
send queue is the posts' work), then the same for the dropped calls;
the top rows of the kept table on stdout. With --addrs FUNC, also the
per-instruction counts of the functions whose name contains FUNC.
"""

import argparse
import bisect
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict

# x86's kernel half. s390x's kernel has an address space of its own and
# runs at addresses a process may use too (0x3ffe0000000 with nokaslr, the
# modules below it): there the span of the kernel's and the modules'
# symbols tells (Symbols.in_kernel).
KERNEL_SPACE = 0xFFFF800000000000
# s390x's lowcore, the CPU's prefix area: the return to user space runs its
# lpswe there (lowcore.h, return_lpswe at 0x400). No process maps code so
# low (mmap_min_addr).
LOWCORE_END = 0x2000
TEXT_TYPES = set("tTwW")
WINDOW_RE = re.compile(r"profile: window (\d+) config (\S+)((?: \w+ \d+)+)")


def read_counts(path):
    """{window: {"kept": {addr: count}, "dropped": {...}}}."""
    windows = {}
    cur = None
    with open(path) as f:
        for line in f:
            if line.startswith("# window"):
                w = line.split()
                cur = windows.setdefault(int(w[2]), {}).setdefault(w[3], {})
            elif line.strip():
                a, c = line.split()
                cur[int(a, 16)] = int(c)
    return windows


def read_windows(path):
    """{window: {"config": C, "calls": N, "kept": K, ...}} from the guest's lines."""
    out = {}
    with open(path) as f:
        for line in f:
            m = WINDOW_RE.search(line)
            if m:
                k, conf, rest = m.groups()
                vals = rest.split()
                out[int(k)] = {"config": conf, **{vals[i]: int(vals[i + 1])
                                                  for i in range(0, len(vals), 2)}}
    return out


def system_map(path):
    syms = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 3 and p[1] in TEXT_TYPES:
                syms.append((int(p[0], 16), p[2]))
    return syms


def kallsyms(path):
    """(module symbols [(addr, name, module)], {name: addr} of the kernel's)."""
    mods, kern = [], {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 3:
                continue
            addr, typ, name = int(p[0], 16), p[1], p[2]
            if len(p) >= 4 and p[3].startswith("["):
                if typ in TEXT_TYPES:
                    mods.append((addr, name, p[3].strip("[]")))
            else:
                kern[name] = addr
    return mods, kern


def nm_symbols(binary, nm="nm"):
    out = subprocess.run([nm, "-n", binary], check=True, capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in TEXT_TYPES:
            syms.append((int(p[0], 16), p[2]))
    return syms


def demangler():
    for tool in ("rustfilt", "llvm-cxxfilt", "c++filt"):
        path = shutil.which(tool)
        if path:
            return path
    return None


def generic_spans(name):
    """(start, end) of each generic argument list <...> of a demangled name: a
    '<' right after an identifier or after '::' (not "<T as Trait>")."""
    spans, stack = [], []
    for k, ch in enumerate(name):
        if ch == "<":
            stack.append(k)
        elif ch == ">" and stack and name[k - 1] != "-":
            start = stack.pop()
            before = name[:start]
            if before.endswith("::") or (before and (before[-1].isalnum() or before[-1] == "_")):
                spans.append((start, k))
    return spans


def shorten(name, limit=110):
    """Collapses generic argument lists, longest first, until the name fits."""
    while len(name) > limit:
        spans = [(e - b, b, e) for b, e in generic_spans(name) if e - b > 2]
        if not spans:
            return name[:limit - 3] + "..."
        _, b, e = max(spans)
        name = name[:b] + "<_>" + name[e + 1:]
    return name


def demangle(names):
    """{mangled: readable} for Rust (v0 and legacy) and C++ names."""
    names = sorted(set(names))
    tool = demangler()
    if not tool or not names:
        return {n: shorten(n) for n in names}
    out = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True,
                         text=True).stdout.splitlines()
    if len(out) != len(names):
        out = names
    return {n: shorten(d) for n, d in zip(names, out)}


class Symbols:
    """Address -> (where, symbol) over the kernel, the modules and the program."""

    def __init__(self, kernel, kernel_offset, modules, user):
        entries = [(a + kernel_offset, n, "kernel") for a, n in kernel]
        entries += [(a, n, m) for a, n, m in modules]
        entries.sort()
        self.kaddrs = [e[0] for e in entries]
        self.kent = entries
        # The kernel's and the modules' text, with a symbol's 1 MiB of slack.
        self.kspan = (entries[0][0], entries[-1][0] + (1 << 20)) if entries else (0, 0)
        user = sorted(user)
        self.uaddrs = [u[0] for u in user]
        self.uent = [(a, n, "user") for a, n in user]

    def in_kernel(self, addr):
        return addr >= KERNEL_SPACE or self.kspan[0] <= addr < self.kspan[1]

    def lookup(self, addr):
        if addr < LOWCORE_END:
            return "kernel", "lowcore", addr
        kernel = self.in_kernel(addr)
        addrs, ents = (self.kaddrs, self.kent) if kernel else (self.uaddrs, self.uent)
        i = bisect.bisect_right(addrs, addr) - 1
        # Farther than 1 MiB from the nearest symbol below: not ours to name.
        if i < 0 or addr - ents[i][0] > 1 << 20:
            where = "kernel?" if kernel else "user?"
            return where, f"0x{addr:x}", 0
        return ents[i][2], ents[i][1], addr - ents[i][0]


def file_name(config):
    return "profile-" + re.sub(r"[^A-Za-z0-9]+", "", config) + ".txt"


def table(counts, calls, syms, names):
    """Rows (per-call count, where, name) by function, and the per-place sums."""
    per_fn = defaultdict(int)
    entries = defaultdict(int)
    per_where = defaultdict(int)
    for addr, c in counts.items():
        where, sym, off = syms.lookup(addr)
        key = (where, names.get(sym, sym))
        per_fn[key] += c
        if off == 0:
            entries[key] += c
        per_where[where] += c
    total = sum(counts.values())
    rows = sorted(per_fn.items(), key=lambda kv: (-kv[1], kv[0]))
    lines = [f"# {'insns/call':>10} {'%':>6} {'cum%':>6} {'entries':>8}  {'where':<8} function"]
    cum = 0
    for key, c in rows:
        cum += c
        ent = f"{entries[key] / calls:8.1f}" if entries[key] else f"{'-':>8}"
        lines.append(f"  {c / calls:10.1f} {100 * c / total:5.1f}% {100 * cum / total:5.1f}% "
                     f"{ent}  {key[0]:<8} {key[1]}")
    footer = (f"  {total / calls:10.1f} 100.0%                   total ({len(rows)} functions, "
              f"{len(counts)} instruction addresses)")
    places = ", ".join(f"{w} {c / calls:.1f} ({100 * c / total:.1f}%)"
                       for w, c in sorted(per_where.items(), key=lambda kv: -kv[1]))
    return lines, footer, places


def addr_detail(counts, calls, syms, names, pattern):
    """Per-instruction counts of the functions whose name contains pattern."""
    out = []
    for addr in sorted(counts):
        where, sym, off = syms.lookup(addr)
        name = names.get(sym, sym)
        if pattern in name or pattern in sym:
            out.append(f"  {counts[addr] / calls:10.2f}  {addr:016x}  {where} {name}+0x{off:x}")
    return out


def report(n, win, meta, syms, args):
    """The file's lines and what goes on stdout, for window n."""
    kept, dropped = win.get("kept", {}), win.get("dropped", {})
    conf = meta.get("config", f"window{n}")
    nk = meta.get("kept", 1) or 1
    nd = meta.get("dropped", 0)
    names = demangle([syms.lookup(a)[1] for a in list(kept) + list(dropped)])
    rows, footer, places = table(kept, nk, syms, names)
    total = sum(kept.values())
    # The module's work in the dropped calls is the posts' too (the reap
    # that frees a full send queue, every SQ_ENTRIES posts, takes a dropped
    # call's time); their interrupts and sleeps are not.
    def module(counts):
        return sum(c for a, c in counts.items() if syms.lookup(a)[0] == "mlx4_bf")
    amortized = total / nk + (module(kept) + module(dropped)) / (nk + nd) - module(kept) / nk
    head = [
        f"# mlx4_bf instruction profile: {conf}, {meta.get('calls', '?')} calls, {nk} kept, "
        f"{nd} dropped, {meta.get('retries', 0)} -EAGAIN retries",
        f"# instructions per kept call: {total / nk:.1f} counted by insn_profile.so; "
        f"{meta.get('kept_ns', 0) / nk - meta.get('clock_ns', 0):.1f} by the guest clock "
        f"under -icount ({meta.get('kept_ns', 0) / nk:.1f} minus the clock reads' "
        f"{meta.get('clock_ns', 0)}; fastest call {meta.get('min_ns', 0)})",
        f"# amortized over all {nk + nd} calls: {amortized:.1f} (the kept calls, with the "
        f"module's instructions of the dropped ones spread over every call)",
        f"# by place: {places}",
        f"# symbols: {os.path.normpath(args.system_map)}, the guest's /proc/kallsyms "
        f"(modules), {args.nm} {os.path.normpath(args.user)}",
        "#",
    ]
    body = head + rows + [footer]
    if args.addrs:
        body += ["#", f"# per instruction, kept calls: functions matching '{args.addrs}'"]
        body += addr_detail(kept, nk, syms, names, args.addrs)
    if nd:
        drows, dfooter, dplaces = table(dropped, nd, syms, names)
        body += ["#", f"# the {nd} dropped calls (guest clock over the threshold: slept, "
                 "or took an interrupt), per dropped call", f"# by place: {dplaces}"]
        body += drows + [dfooter]
    screen = head[:4] + rows[:args.top + 1] + [footer]
    return conf, amortized, body, screen


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--counts", required=True, help="insn_profile.so's output")
    p.add_argument("--windows", help="the guest program's 'profile: window ...' lines")
    p.add_argument("--kallsyms", required=True, help="the guest's module and _text kallsyms")
    p.add_argument("--system-map", required=True)
    p.add_argument("--user", required=True, help="the guest program (nm)")
    p.add_argument("--nm", default="nm", help="the nm that reads the guest program")
    p.add_argument("--out-dir", default="results")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--addrs", metavar="FUNC",
                   help="also list per-instruction counts of functions matching FUNC")
    args = p.parse_args()

    kernel = system_map(args.system_map)
    modules, kern_guest = kallsyms(args.kallsyms)
    stext = dict((n, a) for a, n in kernel if n == "_text").get("_text")
    offset = 0
    if stext is not None and "_text" in kern_guest:
        offset = kern_guest["_text"] - stext
        if offset:
            print(f"profile: the kernel runs {offset:+#x} from System.map (KASLR, or "
                  "s390x's image base): symbols shifted", file=sys.stderr)
    syms = Symbols(kernel, offset, modules, nm_symbols(args.user, args.nm))
    windows = read_counts(args.counts)
    meta = read_windows(args.windows) if args.windows else {}
    if not windows:
        sys.exit(f"profile: no window in {args.counts}: did the guest program run?")
    os.makedirs(args.out_dir, exist_ok=True)
    totals = []
    for n in sorted(windows):
        conf, per_call, body, screen = report(n, windows[n], meta.get(n, {}), syms, args)
        path = os.path.join(args.out_dir, file_name(conf))
        with open(path, "w") as f:
            f.write("\n".join(body) + "\n")
        print(f"== {conf}: the top {args.top} functions (all of them in {path})")
        print("\n".join(screen))
        totals.append((conf, per_call))
    if len(totals) > 1:
        base = totals[-1]
        print("== instructions per call, amortized: " + ", ".join(f"{c} {t:.0f}" for c, t in totals)
              + "".join(f"; {c}/{base[0]} {t / base[1]:.2f}" for c, t in totals[:-1]))


if __name__ == "__main__":
    main()
