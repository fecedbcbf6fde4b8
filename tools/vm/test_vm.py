#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Unit tests of the runner's console parsing (python3 -m unittest)."""

import argparse
import base64
import json
import os
import tempfile
import unittest

from trace_view import command_sequence
from vm import KERNEL_PROBLEM_RE, FileSaver, Ktap, adapter_args, symbolize


def parse(text):
    k = Ktap()
    for line in text.splitlines():
        k.feed(line)
    return k


class KtapTest(unittest.TestCase):
    def test_nested_leaves_are_counted_not_their_parents(self):
        k = parse("KTAP version 1\n1..2\n    1..2\n    ok 1 a\n    not ok 2 b\n"
                  "not ok 1 prog1\n    1..1\n    ok 1 c # SKIP no device\nok 2 prog2\n")
        self.assertEqual((k.passed, k.failed, k.skipped), (1, 1, 1))
        self.assertEqual(k.failures, ["b"])
        self.assertEqual((k.top_plan, k.top_results), (2, 2))

    def test_a_program_failing_without_a_failing_test_counts(self):
        k = parse("1..1\n    1..2\n    ok 1 a\nnot ok 1 prog # exit=139\n")
        self.assertEqual((k.passed, k.failed), (1, 1))
        self.assertIn("crashed", k.failures[0])

    def test_missing_results_are_visible_in_the_plan(self):
        k = parse("KTAP version 1\n1..3\nok 1 a\n")
        self.assertEqual((k.top_plan, k.top_results), (3, 1))

    def test_kernel_lines_are_not_results(self):
        k = parse("1..1\n[    1.0] ok 1 not a result\nok 1 real\n")
        self.assertEqual((k.passed, k.top_results), (1, 1))

    def test_each_program_is_timed_from_the_result_before_it(self):
        ticks = iter([10.0, 12.0, 40.0, 41.5])
        k = Ktap(clock=lambda: next(ticks))
        for line in "1..3\n    ok 1 leaf\nok 1 a\nok 2 slow\nok 3 quick\n".splitlines():
            k.feed(line)
        self.assertEqual(k.durations, [(2.0, "a"), (28.0, "slow"), (1.5, "quick")])
        self.assertEqual(k.slowest(2), "slow 28.0 s, a 2.0 s")


class SymbolizeTest(unittest.TestCase):
    def test_s390_psws_and_x86_rips_name_their_function(self):
        with tempfile.NamedTemporaryFile("w", suffix=".map") as m:
            m.write("0000000000100000 T _stext\n0000000000100200 t arch_cpu_idle\n"
                    "0000000000100400 D some_data\nffffffff81000000 T x86_start\n")
            m.flush()
            text = ("CPU#0\nPSW=mask 0706000180000000 addr 0000000000100210 cc 00\n"
                    "RIP=ffffffff81000010 RFL=00000002\n")
            self.assertEqual(symbolize(text, m.name),
                             ["0x100210 arch_cpu_idle+0x10", "0xffffffff81000010 x86_start+0x10"])

    def test_no_map_no_names(self):
        self.assertEqual(symbolize("PSW=mask 0 addr 10", "/nonexistent"), [])


class ProblemTest(unittest.TestCase):
    def test_kernel_reports_are_problems(self):
        for line in ["[    1.6] WARNING: drivers/x.rs:264 at probe",
                     "[    2.0] BUG: KFENCE: use-after-free read",
                     "[    3.0] WARNING: suspicious RCU usage",
                     "[    4.0] Oops: general protection fault",
                     "unreferenced object 0xffff888001 (size 64):"]:
            self.assertIsNotNone(KERNEL_PROBLEM_RE.search(line), line)

    def test_ordinary_lines_are_not(self):
        for line in ["[    1.4] mlx4_bf: loading out-of-tree module taints kernel.",
                     "    ok 3 bad.unknown_opcode", "# WARNINGS: none"]:
            self.assertIsNone(KERNEL_PROBLEM_RE.search(line), line)


class FileSaverTest(unittest.TestCase):
    def test_files_round_trip_through_the_console(self):
        with tempfile.TemporaryDirectory() as d:
            s = FileSaver(d)
            payload = base64.b64encode(b"# bytes\n4 1.0\n").decode()
            lines = ["noise", "mlx4-bf-file: bench.dat", payload[:8], payload[8:],
                     "mlx4-bf-file-end", "more noise"]
            taken = [s.feed(line) for line in lines]
            self.assertEqual(taken, [False, True, True, True, True, False])
            with open(os.path.join(d, "bench.dat"), "rb") as f:
                self.assertEqual(f.read(), b"# bytes\n4 1.0\n")

    def test_a_marker_behind_a_cleared_progress_bar_is_found(self):
        with tempfile.TemporaryDirectory() as d:
            s = FileSaver(d)
            bar = "lat:   0% [     ] 0/8\r\x1b[2K"
            self.assertTrue(s.feed(bar + "mlx4-bf-file: lat-bf.dat"))
            self.assertTrue(s.feed(base64.b64encode(b"4, 1.0\n").decode()))
            self.assertTrue(s.feed("mlx4-bf-file-end"))
            self.assertTrue(os.path.exists(os.path.join(d, "lat-bf.dat")))
            self.assertFalse(s.feed("see mlx4-bf-file: x"))


class AdapterArgsTest(unittest.TestCase):
    def args(self, arch):
        return argparse.Namespace(arch=arch, no_posted_writes=False, memory="512M")

    def test_two_adapters_on_s390_are_two_zpci_functions(self):
        a = adapter_args(self.args("s390"), "/tmp/a.sock", "/tmp/b.sock")
        devs = [a[i + 1] for i, x in enumerate(a) if x == "-device"]
        self.assertEqual(devs[0], "zpci,uid=1,fid=1,target=mlx")
        self.assertEqual(json.loads(devs[1])["id"], "mlx")
        self.assertEqual(devs[2], "zpci,uid=2,fid=2,target=mlx2")
        self.assertEqual(json.loads(devs[3])["socket"]["path"], "/tmp/b.sock")
        self.assertIn("s390-ccw-virtio,memory-backend=guestmem", a)

    def test_x86_has_no_zpci(self):
        a = adapter_args(self.args("x86_64"), "/tmp/a.sock", "/tmp/b.sock")
        devs = [json.loads(a[i + 1]) for i, x in enumerate(a) if x == "-device"]
        self.assertEqual([d["socket"]["path"] for d in devs], ["/tmp/a.sock", "/tmp/b.sock"])
        self.assertNotIn("id", devs[0])


if __name__ == "__main__":
    unittest.main()


class CommandSequenceTest(unittest.TestCase):
    def test_folds_runs_and_shows_refusals(self):
        cmd = {"kind": "command", "name": "MAP_ICM", "opcode": 0xffa, "op_mod": 0,
               "in_mod": 1, "status": 0, "event": False}
        recs = [{"kind": "device_reset", "source": "reset_register"},
                {"kind": "mmio_write"}, cmd, dict(cmd), dict(cmd),
                {"kind": "fw_refused", "seq": 9, "name": "NOP", "phase": "off", "status": 4},
                dict(cmd, name="NOP", opcode=0x31, status=4, event=True)]
        self.assertEqual(command_sequence(recs), [
            "-- device reset (reset_register)",
            "MAP_ICM (0xffa) opmod 0 in_mod 0x1  x3",
            '   [fw_refused] {"name": "NOP", "phase": "off", "status": 4}',
            "NOP (0x031) opmod 0 in_mod 0x1 E  -> status 0x04",
        ])

