#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Unit tests of report.py's address attribution (python3 -m unittest)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402


class SymbolsTest(unittest.TestCase):
    def test_x86_kernel_half(self):
        syms = report.Symbols([(0xFFFFFFFF81000000, "_text"), (0xFFFFFFFF81001000, "f")], 0,
                              [(0xFFFFFFFFA0000000, "post", "mlx4_bf")],
                              [(0x401000, "main")])
        self.assertEqual(syms.lookup(0xFFFFFFFF81001010), ("kernel", "f", 0x10))
        self.assertEqual(syms.lookup(0xFFFFFFFFA0000004), ("mlx4_bf", "post", 4))
        self.assertEqual(syms.lookup(0x401008), ("user", "main", 8))
        # Kernel half, no symbol within 1 MiB: unnamed, still the kernel's.
        self.assertEqual(syms.lookup(0xFFFFFE0000001000)[0], "kernel?")

    def test_s390x_kernel_by_span(self):
        # nokaslr: System.map's 0x100000 runs at 0x3ffe0000000, modules below.
        base = 0x3FFE0000000
        syms = report.Symbols([(0x100000, "_text"), (0x101000, "__do_syscall")],
                              base - 0x100000, [(base - 0x100000, "post", "mlx4_bf")],
                              [(0x1000000, "main"), (0x1001000, "mlx4_post_send")])
        self.assertEqual(syms.lookup(base + 0x1008), ("kernel", "__do_syscall", 8))
        self.assertEqual(syms.lookup(base - 0x100000 + 2), ("mlx4_bf", "post", 2))
        self.assertEqual(syms.lookup(0x1001004), ("user", "mlx4_post_send", 4))
        # Above the span (the vDSO, near the top of the process): user's.
        self.assertEqual(syms.lookup(0x3FFFFFF0000)[0], "user?")
        # The return to user space's lpswe, in the lowcore.
        self.assertEqual(syms.lookup(0x400), ("kernel", "lowcore", 0x400))


if __name__ == "__main__":
    unittest.main()
