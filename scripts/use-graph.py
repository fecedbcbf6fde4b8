#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The `use crate::` graph of a Rust crate's files, as `make lint` checks it:
exits 1, naming them, if some files import each other in a cycle.

usage: use-graph.py SRC_DIR ROOT_FILE

A file is a module (`a/b.rs` is `a::b`; ROOT_FILE is the crate root); an
edge goes from a file to each module it names with `use crate::x` or
`crate::x::` (the first segment), and from a child module to its parent
when it names `super::`. A parent reaching into its own children is not an
edge: they are one concern. Comments and `#[cfg(test)]` modules are left
out.
"""
import glob
import os
import re
import sys


def module(root, path, crate_root):
    rel = os.path.relpath(path, root)[:-3]
    if rel == os.path.splitext(crate_root)[0]:
        return "crate"
    parts = rel.split(os.sep)
    if parts[-1] == "mod":
        parts.pop()
    return "::".join(parts)


def edges(root, crate_root):
    mods = {module(root, f, crate_root): f
            for f in glob.glob(os.path.join(root, "**", "*.rs"), recursive=True)}
    tops = {m.split("::")[0] for m in mods}
    graph = {}
    for name, path in mods.items():
        text = re.sub(r"//.*", "", open(path, encoding="utf-8").read())
        text = text.split("#[cfg(test)]")[0]
        deps = set(re.findall(r"\bcrate::([a-z_0-9]+)", text))
        for use in re.finditer(r"\buse crate::\{(.*?)\};", text, re.S):
            depth, cur = 0, ""
            for ch in use.group(1) + ",":
                if ch == "," and depth == 0:
                    if cur.strip():
                        deps.add(cur.strip().split("::")[0])
                    cur = ""
                    continue
                depth += ch == "{"
                depth -= ch == "}"
                cur += ch
        if "super::" in text and "::" in name:
            deps.add(name.rsplit("::", 1)[0])
        elif "super::" in text:
            deps.add("crate")
        top = name.split("::")[0]
        graph[name] = {d for d in deps if d in tops or d in mods} - {name, top}
        graph[name] = {d for d in graph[name] if not name.startswith(d + "::")}
    return graph


def cycles(graph):
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    found = cycles(edges(sys.argv[1], sys.argv[2]))
    for comp in found:
        print(f"import cycle in {sys.argv[1]}: {{{', '.join(comp)}}}")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
