#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Sizes a maintainer can read: no .rs or .c file over 500 lines outside
tests, and no function of the driver over 80 lines. Prints what exceeds;
exits 1 if anything does (0 with --report, which only prints).

usage: size-check.py [--report] [--functions DIR]... [PATH...]

PATH: files or folders to read (by default drivers, rust and tools of the
checkout this script is in, and the functions of its drivers/mlx4_bf).
--functions DIR: check the length of every Rust function under DIR.

Tests do not count: files under a tests/ or selftests/ folder, *_test.c and tests.rs
files, and what follows a .rs file's first `#[cfg(test)]`. A function
runs from the line of its `fn` to its closing brace (braces counted in
the code, not in comments or literals).
"""
import argparse
import os
import re
import sys

from rust_text import blank, closing

MAX_FILE_LINES = 500
MAX_FN_LINES = 80
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_DIRS = {"target", "build", "__pycache__"}


def sources(paths):
    """The .rs and .c files of PATHS, sorted (not Kbuild's *.mod.c)."""
    found = []
    for path in paths:
        if os.path.isfile(path):
            found.append(path)
            continue
        for dirpath, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
            found += [os.path.join(dirpath, f) for f in files
                      if f.endswith((".rs", ".c")) and not f.endswith(".mod.c")]
    return sorted(set(found))


def is_test(path):
    parts = os.path.normpath(path).split(os.sep)
    return ("tests" in parts[:-1] or parts[-1] == "tests.rs" or parts[-1].endswith("_test.c")
            or "selftests" in parts[:-1])


def code(path, text):
    """The part of TEXT that is not tests: a .rs file's lines before its
    first `#[cfg(test)]`, all of a .c file."""
    if path.endswith(".rs"):
        m = re.search(r"^[ \t]*#\[cfg\(test\)\]", text, re.M)
        if m:
            return text[:m.start()]
    return text


def line_count(text):
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def functions(text):
    """(name, first line, lines) of each function with a body in TEXT,
    Rust source."""
    text = blank(text)
    found = []
    for m in re.finditer(r"\bfn\s+((?:r#)?[A-Za-z_][A-Za-z0-9_]*)", text):
        depth = 0
        for j in range(m.end(), len(text)):
            ch = text[j]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif depth == 0 and ch == ";":
                break  # no body: a trait's or an extern declaration
            elif depth == 0 and ch == "{":
                first = text.count("\n", 0, m.start()) + 1
                last = text.count("\n", 0, closing(text, j) - 1) + 1
                found.append((m.group(1), first, last - first + 1))
                break
    return found


def under(path, dirs):
    path = os.path.abspath(path)
    return any(path == d or path.startswith(d.rstrip(os.sep) + os.sep) for d in dirs)


def check(paths, fn_dirs, shown):
    """The lines to print: files and functions over their limits."""
    out = []
    paths = [os.path.abspath(p) for p in paths]
    fn_dirs = [os.path.abspath(d) for d in fn_dirs]
    for path in sources(paths + fn_dirs):
        name = shown(path)
        if is_test(name):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = code(path, f.read())
        n = line_count(text)
        if n > MAX_FILE_LINES and under(path, paths):
            out.append(f"{name}: {n} lines outside tests (at most {MAX_FILE_LINES})")
        if path.endswith(".rs") and under(path, fn_dirs):
            for fn, line, length in functions(text):
                if length > MAX_FN_LINES:
                    out.append(f"{name}:{line}: fn {fn}: {length} lines (at most {MAX_FN_LINES})")
    return out


def main():
    parser = argparse.ArgumentParser(usage=__doc__.split("usage: ")[1].split("\n")[0])
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--functions", action="append", default=[], metavar="DIR")
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args()
    if args.paths or args.functions:
        paths, fn_dirs, base = args.paths, args.functions, os.getcwd()
    else:
        paths = [os.path.join(TOP, d) for d in ("drivers", "rust", "tools")]
        fn_dirs, base = [os.path.join(TOP, "drivers", "mlx4_bf")], TOP
    out = check(paths, fn_dirs, lambda p: os.path.relpath(p, base))
    for line in out:
        print(line)
    if args.report:
        print(f"{len(out)} over the limits")
    sys.exit(1 if out and not args.report else 0)


if __name__ == "__main__":
    main()
