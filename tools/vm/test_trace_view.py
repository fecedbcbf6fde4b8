#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Unit tests of the trace viewer's per-path table (python3 -m unittest)."""

import os
import tempfile
import unittest

from trace_view import path_table, read_wall

BF_PAGE = 4202496  # BF page 2, half 0


def bf_post(payload, one_way, writes=8):
    recs = [{"kind": "mmio_write", "bar": 2, "off": BF_PAGE + 8 * i, "len": 8, "region": "bf",
             "page": 2, "half": 0, "chunk_off": 8 * i, "data": "00"} for i in range(writes)]
    return recs + arrival(payload, one_way)


def db_post(payload, one_way, reads=1):
    recs = [{"kind": "mmio_write", "bar": 2, "off": 8212, "len": 4, "region": "uar",
             "page": 2, "data": "00004000"}]
    recs += [{"kind": "dma_read", "addr": 0x1000, "len": 64, "what": "wqe"}] * reads
    return recs + arrival(payload, one_way)


def arrival(payload, one_way):
    # The CQ doorbell between is not the post's; the send CQE ends it.
    return [{"kind": "rdma_write", "from": 64, "to": 64, "len": payload, "raddr": 0x2000,
             "rkey": 1, "rq_index": None, "post_t_ns": 0, "one_way_ns": one_way},
            {"kind": "mmio_write", "bar": 2, "off": 8224, "len": 4, "region": "uar", "page": 2},
            {"kind": "cqe", "cqn": 1, "index": 0, "qpn": 64, "bytes": "00" * 31 + "4a"}]


def trace(*posts):
    recs = [r for p in posts for r in p]
    return [dict(r, seq=i + 1) for i, r in enumerate(recs)]


class PathTableTest(unittest.TestCase):
    def test_medians_per_size_and_path_sizes_first(self):
        lines = path_table(trace(db_post(4, 4340), bf_post(4, 2300), bf_post(4, 2400),
                                 bf_post(4, 2350), bf_post(72, 2700, writes=16),
                                 db_post(72, 4500, reads=2)))
        self.assertTrue(lines[0].startswith("# per post"))
        self.assertNotIn("wall", lines[1])
        rows = [line.split() for line in lines[2:]]
        self.assertEqual(rows, [["4", "BlueFlame", "3", "8", "64", "0", "2350"],
                                ["4", "doorbell", "1", "1", "4", "1", "4340"],
                                ["72", "BlueFlame", "1", "16", "128", "0", "2700"],
                                ["72", "doorbell", "1", "1", "4", "2", "4500"]])

    def test_the_wall_column_keeps_the_sizes_of_lat(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "lat-bf.dat"), "w") as f:
                f.write("# PacketSize, LatTypical, LatBest, LatWorst\n4, 16.700, 15.000, 90.000\n")
            with open(os.path.join(d, "lat-db.dat"), "w") as f:
                f.write("# PacketSize, LatTypical, LatBest, LatWorst\n4, 5.900, 5.000, 40.000\n")
            wall = read_wall(d)
        self.assertEqual(wall, {("blueflame", 4): 16.7, ("doorbell", 4): 5.9})
        lines = path_table(trace(bf_post(4, 2300), db_post(4, 4340), bf_post(100, 3362)), wall)
        self.assertIn("wall: POST_SEND under QEMU", lines[0])
        self.assertEqual([line.split()[-1] for line in lines[1:]], ["wall[us]", "16.7", "5.9"])

    def test_a_post_without_its_arrival_is_left_out_and_a_run_ahead_one_said(self):
        doorbell_only = db_post(4, 0, reads=0)[:1]
        lines = path_table(trace(doorbell_only, bf_post(4, 2300)))
        self.assertEqual(len(lines), 3)
        ran_ahead = doorbell_only + [{"kind": "already_executed", "qpn": 64, "by": "doorbell"}]
        lines = path_table(trace(ran_ahead, ran_ahead, bf_post(4, 2300)))
        self.assertEqual(len(lines), 4)
        self.assertTrue(lines[3].startswith("# not counted: 2 doorbell posts"))
        self.assertEqual(path_table([]), ["no post in the trace"])


if __name__ == "__main__":
    unittest.main()
