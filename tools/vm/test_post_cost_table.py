#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Unit tests of the post-cost table's join (python3 -m unittest)."""

import os
import tempfile
import unittest

import post_cost_table

HEAD = "#bytes column {clock} bar2_wr bar2_B wqe_dma p2w_ns 1way_ns\n"


def write(d, clock, rows):
    with open(os.path.join(d, f"post-cost-{clock}.txt"), "w") as f:
        f.write(f"# post-cost: guest clock: {clock}\n# caption\n" + HEAD.format(clock=clock))
        for r in rows:
            f.write(" ".join(str(v) for v in r) + "\n")


ICOUNT = [
    (4, "libmlx4", 1190, 8.0, 64.0, 0.0, 1000.0, 2000.0),
    (4, "qp_post", 2614, 8.0, 64.0, 0.0, 1000.0, 2000.0),
    (4, "doorbell", 1175, 1.0, 4.0, 1.0, 1500.0, 2600.0),
    (1024, "libmlx4", 1072, 1.0, 4.0, 2.0, 3000.0, 5000.0),
    (1024, "qp_post", 1084, 1.0, 4.0, 2.0, 3000.0, 5000.0),
    (1024, "doorbell", 1120, 1.0, 4.0, 2.0, 3000.0, 5000.0),
]


class Join(unittest.TestCase):
    def test_both_boots_join_by_size_and_column(self):
        with tempfile.TemporaryDirectory() as d:
            write(d, "icount", ICOUNT)
            write(d, "wall", [(s, c, 10 * i, *rest) for s, c, i, *rest in ICOUNT])
            post_cost_table.main(["post_cost_table.py", d])
            text = open(os.path.join(d, "post-cost-table.txt")).read()
        row = next(ln.split() for ln in text.splitlines()
                   if ln.startswith("4 ") and "qp_post" in ln)
        self.assertEqual(row[:5], ["4", "qp_post", "2614", "26140", "8.0"])
        self.assertIn("qp_post / libmlx4 instructions: 4:2.20 1024:1.01", text)
        self.assertIn("qp_post / libmlx4 TCG wall time: 4:2.20", text)
        # 1024 is gathered: only the inline sizes are judged.
        self.assertIn("libmlx4 (BlueFlame) below doorbell at every inline size: yes (4:2000/2600)",
                      text)
        self.assertNotIn("mainline", [ln.split()[1] for ln in text.splitlines()
                                      if not ln.startswith("#")])

    def test_a_missing_wall_boot_leaves_its_column_empty(self):
        with tempfile.TemporaryDirectory() as d:
            write(d, "icount", ICOUNT)
            lines, verdict = post_cost_table.table(
                post_cost_table.read(os.path.join(d, "post-cost-icount.txt"))[0], {})
        self.assertEqual(lines[1].split()[3], "-")
        self.assertFalse(any("wall" in v for v in verdict))

    def test_a_doorbell_faster_than_blueflame_is_said(self):
        rows = {(4, "qp_post"): {"1way_ns": "3000"}, (4, "doorbell"): {"1way_ns": "2600"}}
        _, verdict = post_cost_table.table(rows, {})
        self.assertTrue(any("qp_post (BlueFlame) below doorbell" in v and ": no" in v
                            for v in verdict))

    def test_perftest_rows_follow_with_their_verdict(self):
        with tempfile.TemporaryDirectory() as d:
            write(d, "icount", ICOUNT)
            with open(os.path.join(d, "post-cost-perftest.txt"), "w") as f:
                f.write("# caption\n#tool bytes column t_typ_us 1way_ns bar2_wr wqe_dma\n"
                        "ib_send_lat 4 libmlx4 40.1 2100.0 8.0 0.0\n"
                        "ib_send_lat 4 doorbell 38.2 2700.0 1.0 1.0\n")
            post_cost_table.main(["post_cost_table.py", d])
            text = open(os.path.join(d, "post-cost-table.txt")).read()
        self.assertIn("ib_send_lat  4      libmlx4       40.1   2100.0", text)
        self.assertIn("# ib_send_lat: modelled one-way, libmlx4 (BlueFlame) below doorbell at "
                      "every inline size: yes", text)

    def test_no_files_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(SystemExit):
                post_cost_table.main(["post_cost_table.py", d])


if __name__ == "__main__":
    unittest.main()
