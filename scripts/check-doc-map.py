#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks that a documentation map names every Rust file of a folder, as
`make lint` runs it on Documentation/mlx4_bf.rst's "Where things are" and
drivers/mlx4_bf: exits 1 listing the files it leaves out.

usage: check-doc-map.py DOC SECTION_TITLE DIR

The section runs from the title SECTION_TITLE (a line underlined with
punctuation) to the next title. It is read in paragraphs and list items,
each naming files as ``literals``:

- ``a/b.rs`` (or ``.../DIR/a/b.rs``, DIR's last component) names that
  file;
- ``a/`` names the folder's own module, a.rs or a/mod.rs;
- ``b.rs`` names a/b.rs for each folder ``a/`` the same item names that
  holds a b.rs, and, if none holds one, the top-level b.rs (``context.rs``
  in the item about ``context/``).
"""
import glob
import os
import re
import sys


def section(text, title):
    """The lines of the section titled TITLE (its title excluded)."""
    lines = text.splitlines()

    def is_title(i):
        return (i + 1 < len(lines) and lines[i].strip()
                and re.fullmatch(r"([=\-~^\"'`#*+])\1{2,}", lines[i + 1].strip() or "-")
                and len(lines[i + 1].strip()) >= len(lines[i].strip()))

    for i, line in enumerate(lines):
        if line.strip() == title and is_title(i):
            end = next((j for j in range(i + 2, len(lines)) if is_title(j)), len(lines))
            return lines[i + 2:end]
    return None


def units(lines):
    """The paragraphs and list items of LINES, each as one string."""
    out, cur = [], []
    for line in lines:
        if not line.strip() or re.match(r"[-*+] ", line):
            if cur:
                out.append(" ".join(cur))
            cur = [line] if line.strip() else []
        else:
            cur.append(line)
    if cur:
        out.append(" ".join(cur))
    return out


def named(lines, base, files):
    """The paths (relative to the folder BASE) LINES name, of FILES."""
    # ``drivers/mlx4_bf/hw/`` is hw/ of the folder mlx4_bf.
    prefix = re.compile(rf"(?:.*/)?{re.escape(base)}/(?=.)")
    names = set()
    for unit in units(lines):
        literals = [prefix.sub("", lit, count=1)
                    for lit in re.findall(r"``([^`]+)``", unit)]
        folders = [lit for lit in literals if lit.endswith("/")]
        for folder in folders:
            names.update({folder.rstrip("/") + ".rs", folder + "mod.rs"})
        for lit in literals:
            if not lit.endswith(".rs"):
                continue
            if "/" in lit:
                names.add(lit)
                continue
            inside = [f + lit for f in folders if f + lit in files]
            names.update(inside or [lit])
    return names


def missing(doc_text, title, root):
    """The .rs files under ROOT that the section TITLE of DOC_TEXT leaves
    out, sorted; None if it has no such section."""
    lines = section(doc_text, title)
    if lines is None:
        return None
    files = {os.path.relpath(f, root).replace(os.sep, "/")
             for f in glob.glob(os.path.join(root, "**", "*.rs"), recursive=True)}
    base = os.path.basename(os.path.normpath(root))
    return sorted(files - named(lines, base, files))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    doc, title, root = sys.argv[1:]
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    left = missing(text, title, root)
    if left is None:
        sys.exit(f"{doc}: no section titled '{title}'")
    for path in left:
        print(f"{doc}: '{title}' does not name {os.path.join(root, path)}")
    sys.exit(1 if left else 0)


if __name__ == "__main__":
    main()
