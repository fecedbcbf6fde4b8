#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The `use crate::` graph of a Rust crate's files, as `make lint` checks it:
exits 1, naming them, if some files import each other in a cycle, or if a
file imports from a layer above its own.

usage: use-graph.py SRC_DIR ROOT_FILE [LAYERS]

A file is a module (`a/b.rs` is `a::b`; ROOT_FILE is the crate root). An
edge goes from a file to each file whose items it names: every path
`crate::a::b::..` (also inside `use crate::{..}` trees) names the longest
prefix that is a file (or, if none is, its first segment: an item of the
root or a module included with `#[path]`); `super::` names the parent (or the sibling after
it). A parent reaching into its own children is not an edge: they are one
concern. Comments and `#[cfg(test)]` modules are left out.

LAYERS, lowest first, separated by `|`, each a space-separated list of
top-level modules (`crate` is the root): a file may import from its own
layer and those below, never from one above.
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


def use_paths(tree):
    """The paths a `use` tree's body (inside `crate::{..}`) names."""
    items, depth, cur = [], 0, ""
    for ch in tree + ",":
        if ch == "," and depth == 0:
            if cur.strip():
                items.append(cur.strip())
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    for item in items:
        head, brace, rest = item.partition("{")
        head = head.rstrip(":").strip()
        if not brace:
            yield head.split(" as ")[0].strip()
            continue
        for sub in use_paths(rest.rsplit("}", 1)[0]):
            yield f"{head}::{sub}" if sub != "self" else head


def resolve(path, mods):
    parts = [p for p in path.split("::") if p]
    for n in range(len(parts), 0, -1):
        name = "::".join(parts[:n])
        if name in mods:
            return name
    return None


def edges(root, crate_root):
    mods = {module(root, f, crate_root): f
            for f in glob.glob(os.path.join(root, "**", "*.rs"), recursive=True)}
    graph = {}
    for name, path in mods.items():
        text = re.sub(r"//.*", "", open(path, encoding="utf-8").read())
        text = text.split("#[cfg(test)]")[0]
        paths = set()
        for use in re.finditer(r"\buse crate::\{(.*?)\};", text, re.S):
            paths.update(use_paths(use.group(1)))
        text = re.sub(r"\buse crate::\{(.*?)\};", "", text, flags=re.S)
        paths.update(re.findall(r"\bcrate::([a-z_0-9]+(?:::[a-z_0-9]+)*)", text))
        parent = name.rsplit("::", 1)[0] if "::" in name else "crate"
        for sup in re.findall(r"\bsuper::([a-z_0-9]+(?:::[a-z_0-9]+)*)?", text):
            base = "" if parent == "crate" else parent + "::"
            paths.add(base + sup if sup else parent)
        # A path no file holds names an item of the root or a module
        # included from elsewhere (`#[path]`): its first segment stands
        # for it.
        deps = {resolve(p, mods) or p.split("::")[0] for p in paths if p}
        graph[name] = {d for d in deps
                       if d != name and not d.startswith(name + "::")}
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


def layer_violations(graph, spec):
    rank = {}
    for i, layer in enumerate(spec.split("|")):
        for top in layer.split():
            rank[top] = i
    bad = []
    for name in sorted(graph):
        top = name.split("::")[0]
        if top not in rank:
            bad.append(f"{name}: in no layer")
            continue
        for dep in sorted(graph[name]):
            if rank.get(dep.split("::")[0], -1) > rank[top]:
                bad.append(f"{name} imports {dep}, a layer above it")
    return bad


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    graph = edges(sys.argv[1], sys.argv[2])
    found = cycles(graph)
    for comp in found:
        print(f"import cycle in {sys.argv[1]}: {{{', '.join(comp)}}}")
    bad = layer_violations(graph, sys.argv[3]) if len(sys.argv) == 4 else []
    for line in bad:
        print(f"layering in {sys.argv[1]}: {line}")
    sys.exit(1 if found or bad else 0)


if __name__ == "__main__":
    main()
