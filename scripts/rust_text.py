# SPDX-License-Identifier: GPL-2.0
"""Rust source as the lint scripts read it (use-graph.py, size-check.py):
code only, with comments and literals blanked out, and its brackets
matched."""
import re


def blank(text):
    """TEXT with comments and the insides of string and character
    literals turned to spaces (newlines kept), so that what is left is
    code: its braces balance and its paths are paths."""
    out, i, n = [], 0, len(text)

    def spaces(s):
        return re.sub(r"[^\n]", " ", s)

    while i < n:
        c = text[i]
        prev = text[i - 1] if i else " "
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(spaces(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(spaces(text[i:j]))
            i = j
        elif not (prev.isalnum() or prev == "_") and \
                (m := re.compile(r'b?r(#*)"').match(text, i)):
            end = '"' + m.group(1)
            j = text.find(end, m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + spaces(text[i + 2:j]))
            i = j
        elif c == '"' or (c == "b" and text.startswith('b"', i)
                          and not (prev.isalnum() or prev == "_")):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append('""' + spaces(text[i + 2:j]))
            i = j
        elif c == "'":
            # A character literal ('x', '\n', '\u{..}'), or a lifetime.
            m = re.compile(r"'(?:\\(?:u\{[0-9a-fA-F]*\}|x..|.)|[^\\'\n])'").match(text, i)
            if m:
                out.append("' '" + spaces(text[i + 3:m.end()]))
                i = m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def closing(text, i):
    """The index just past the bracket that closes the one at I."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] in "([{":
            depth += 1
        elif text[j] in ")]}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)
