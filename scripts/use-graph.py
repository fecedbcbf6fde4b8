#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The import graph of a Rust crate's files, as `make lint` checks it:
exits 1, naming them, if some files import each other in a cycle, or if a
file imports from a layer above its own.

usage: use-graph.py SRC_DIR ROOT_FILE [LAYERS]

A file is a module (`a/b.rs` and `a/b/mod.rs` are `a::b`; ROOT_FILE is
the crate root). An edge goes from a file to each file whose items it
names, in any form: `use` trees however nested and whatever precedes the
brace (`use crate::a::{b::X, c}` names `a::b` and `a::c`), with or without
`pub`, `pub(crate)` or `as`, over several lines; `crate::`, `super::`
(repeated), `self::` and `$crate::` paths in code; and paths through a
name a `use` bound (`use crate::hw; hw::cmd::f()` names `hw::cmd`). A path
names the longest prefix that is a file (or, if none is, its first
segment: an item of the root or a module included with `#[path]`). A
parent reaching into its own children (and the root, into any file) is
not an edge: they are one concern. Comments, strings, `pub(in ..)` and
`#[cfg(test)]` items are left out; a module declared `#[cfg(test)] mod x;`
is left out with its files.

LAYERS, lowest first, separated by `|`, each a space-separated list of
top-level modules (`crate` is the root): a file may import from its own
layer and those below, never from one above.
"""
import glob
import os
import re
import sys

from rust_text import blank, closing

IDENT = r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*"
CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*(?:all\s*\(\s*)?test\s*[,)]")
CFG_TEST_INNER = re.compile(r"#\s*!\s*\[\s*cfg\s*\(\s*(?:all\s*\(\s*)?test\s*[,)]")


def module(root, path, crate_root):
    rel = os.path.relpath(path, root)[:-3]
    if rel == os.path.splitext(crate_root)[0]:
        return "crate"
    parts = rel.split(os.sep)
    if parts[-1] == "mod":
        parts.pop()
    return "::".join(parts)


def item_end(text, i):
    """The index just past the item that starts at I (after its
    attributes): at its `;` or its body's closing brace."""
    depth = 0
    for j in range(i, len(text)):
        ch = text[j]
        if ch in "([":
            depth += 1
        elif ch in ")]}" and depth == 0:
            return j  # the end of what holds it: a field, an argument
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == ";":
            return j + 1
        elif depth == 0 and ch == "{":
            return closing(text, j)
    return len(text)


def drop_tests(text):
    """TEXT without its `#[cfg(test)]` items, and the names of the
    modules it declares `#[cfg(test)] mod x;` (their files are tests)."""
    tests = []
    while m := CFG_TEST.search(text):
        start = m.start()
        i = closing(text, text.index("[", start))
        while True:
            i += len(text[i:]) - len(text[i:].lstrip())
            if text.startswith("#", i) and "[" in text[i:i + 3]:
                i = closing(text, text.index("[", i))
            else:
                break
        end = item_end(text, i)
        decl = re.match(rf"(?:pub\s*(?:\([^)]*\))?\s*)?mod\s+({IDENT})\s*;",
                        text[i:end])
        if decl:
            tests.append(decl.group(1))
        text = text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]
    return text, tests


def use_tree(tokens, i, prefix):
    """The leaves of the `use` tree at TOKENS[I]: (path, bound name or
    None) each, and the index past it."""
    segs = list(prefix)
    while i < len(tokens):
        tok = tokens[i]
        if tok == "{":
            i += 1
            leaves = []
            while i < len(tokens) and tokens[i] != "}":
                sub, i = use_tree(tokens, i, segs)
                leaves += sub
                if i < len(tokens) and tokens[i] == ",":
                    i += 1
            return leaves, i + 1
        if tok == "*":
            return [(segs, None)], i + 1
        if tok == "::":
            i += 1
            continue
        i += 1
        if tok == "self" and segs:
            name = segs[-1]
        else:
            segs = segs + [tok]
            name = tok
        if i < len(tokens) and tokens[i] == "::":
            continue
        if i + 1 < len(tokens) and tokens[i] == "as":
            name = tokens[i + 1]
            i += 2
        return [(segs, None if name == "_" else name)], i
    return [(segs, None)], i


class Resolver:
    """Paths as the file module CUR (its segments) writes them, made
    absolute (segments from the crate root), through the names its `use`
    declarations bound."""

    def __init__(self, cur, mods):
        self.cur, self.mods, self.bound = cur, mods, {}

    def absolute(self, segs):
        head = segs[0]
        if head in ("crate", "$crate"):
            return segs[1:]
        if head == "self":
            return self.cur + segs[1:]
        if head == "super":
            base = self.cur
            while segs and segs[0] == "super":
                base, segs = base[:-1], segs[1:]
            return base + segs
        if head in self.bound:
            return self.bound[head] + segs[1:]
        if "::".join(self.cur + [head]) in self.mods:
            return self.cur + segs
        return None  # another crate, or a local item

    def bind(self, leaves):
        """Resolves LEAVES, binding their names; a leaf that goes through
        a name another leaf binds waits for it. Returns the paths."""
        paths, todo = [], list(leaves)
        while todo:
            left = []
            for segs, name in todo:
                path = self.absolute(segs)
                if path is None:
                    left.append((segs, name))
                    continue
                paths.append(path)
                if name:
                    self.bound[name] = path
            if len(left) == len(todo):
                break
            todo = left
        return paths


def names(text, cur, mods):
    """The absolute paths TEXT (blanked, without tests) names, written in
    the module CUR; inline `mod x { .. }` bodies are read as CUR::x."""
    paths, pos = [], 0
    while m := re.compile(rf"\bmod\s+({IDENT})\s*\{{").search(text, pos):
        end = closing(text, m.end() - 1)
        paths += names(text[m.end():end - 1], cur + [m.group(1)], mods)
        text = text[:m.start()] + re.sub(r"[^\n]", " ", text[m.start():end]) + text[end:]
        pos = end
    text = re.sub(r"\bpub\s*\(\s*in\b[^)]*\)", "pub", text)
    res = Resolver(cur, mods)
    leaves = []
    for m in re.finditer(r"(?<![\w$])use\s+([^;]*);", text):
        tokens = re.findall(rf"::|[{{}},*]|\$crate|{IDENT}", m.group(1))
        leaves += use_tree(tokens, 0, [])[0]
    paths += res.bind(leaves)
    text = re.sub(r"(?<![\w$])use\s+([^;]*);", "", text)
    for m in re.finditer(rf"(?<![\w$:])(\$crate|{IDENT})((?:\s*::\s*{IDENT})+)", text):
        segs = [m.group(1)] + re.findall(IDENT, m.group(2))
        path = res.absolute(segs)
        if path is not None:
            paths.append(path)
    return paths


def resolve(path, mods):
    for n in range(len(path), 0, -1):
        name = "::".join(path[:n])
        if name in mods:
            return name
    # A path no file holds names an item of the root or a module
    # included from elsewhere (`#[path]`): its first segment stands for it.
    return path[0] if path else "crate"


def edges(root, crate_root):
    mods = {module(root, f, crate_root): f
            for f in glob.glob(os.path.join(root, "**", "*.rs"), recursive=True)}
    texts, tests = {}, set()
    for name, path in mods.items():
        with open(path, encoding="utf-8") as f:
            text = blank(f.read())
        if CFG_TEST_INNER.search(text):
            tests.add(name)
            continue
        texts[name], declared = drop_tests(text)
        base = "" if name == "crate" else name + "::"
        tests.update(base + t for t in declared)
    live = {n for n in mods
            if not any(n == t or n.startswith(t + "::") for t in tests)}
    graph = {}
    for name in sorted(live):
        cur = [] if name == "crate" else name.split("::")
        deps = {resolve(p, mods) for p in names(texts[name], cur, mods)}
        graph[name] = {d for d in deps if name != "crate" and d != name
                       and not d.startswith(name + "::")}
    return graph


def cycles(graph):
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
