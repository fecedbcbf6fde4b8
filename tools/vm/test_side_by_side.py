#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Unit tests of the side-by-side comparison and the mailbox decoder
(python3 -m unittest)."""

import json
import os
import tempfile
import unittest

import mlx4_mailbox
import side_by_side
import trace_view


def bf_write(i):
    return {"kind": "mmio_write", "bar": 2, "off": 0x402000 + 8 * i, "len": 8, "region": "bf",
            "page": 2, "half": 0, "chunk_off": 8 * i, "data": "00"}


def uar_write(off):
    return {"kind": "mmio_write", "bar": 2, "off": 0x2000 + off, "len": 4, "region": "uar",
            "page": 2, "data": "00000000"}


def bf_post(writes):
    return [bf_write(i) for i in range(writes)] + [{"kind": "wqe", "source": "bf"}]


def db_post(reads):
    return ([uar_write(0x14)] + [{"kind": "dma_read", "what": "wqe", "len": 64}] * reads
            + [{"kind": "wqe", "source": "dma"}])


def qp_mailbox(optpar, qpn, ackto):
    mb = bytearray(0x100)
    mb[0:4] = optpar.to_bytes(4, "big")
    mb[8 + 0x10:8 + 0x14] = qpn.to_bytes(4, "big")
    mb[8 + 0x18 + 8] = ackto
    return mb.hex()


def command(name, opcode, in_mod, mb=None):
    recs = [{"kind": "dma_read", "what": "mailbox", "len": len(mb) // 2, "data": mb}] if mb else []
    return recs + [{"kind": "command", "name": name, "opcode": opcode, "in_mod": in_mod,
                    "op_mod": 0, "status": 0}]


def write_trace(path, windows):
    """A trace with each (value, records) between marks value and value+1."""
    seq = 0
    with open(path, "w") as f:
        for value, recs in windows:
            for rec in [{"kind": "mark", "value": value}] + recs + [
                    {"kind": "mark", "value": value + 1}]:
                seq += 1
                f.write(json.dumps(dict({"seq": seq}, **rec)) + "\n")


GUEST_HEAD = "#run tool size driver ibdev bdf t_typical wqes_bf wqes_dma BAR2_wr BAR2_bytes " \
             "WQE_DMA_rd doorbells IRQs commands protocol_errors\n"


class MailboxTest(unittest.TestCase):
    def test_a_qp_transition_names_its_optpar_and_path(self):
        fields = mlx4_mailbox.decode(0x1a, 0x40, bytes.fromhex(qp_mailbox(0x4081, 0x40, 0x98)))
        by = {n: (v, k) for n, v, k in fields}
        self.assertEqual(by["optpar"], (0x4081, "val"))
        self.assertEqual(by["local_qpn"], (0x40, "id"))
        self.assertEqual(by["pri_path.ackto"], (0x98, "val"))
        self.assertNotIn("alt_path.ackto", by)
        self.assertEqual(mlx4_mailbox.show("optpar", 0x4081),
                         "0x4081 (ALT_ADDR_PATH|PRIMARY_ADDR_PATH|ACK_TIMEOUT)")

    def test_a_mad_names_its_attribute_and_short_mailboxes_decode_to_nothing(self):
        mad = bytearray(256)
        mad[1], mad[3], mad[16:18] = 0x01, 0x01, (0x15).to_bytes(2, "big")
        fields = mlx4_mailbox.decode(0x24, 1, bytes(mad))
        self.assertIn(("attr", "PortInfo", "val"), fields)
        self.assertEqual(mlx4_mailbox.decode(0x16, 0x80, b"\0" * 8), [])
        self.assertEqual(mlx4_mailbox.decode(0x0a, 1, b"\0" * 64), [])

    def test_commands_take_the_mailbox_read_before_them(self):
        recs = command("INIT2RTR_QP", 0x1a, 0x40, qp_mailbox(0x80, 0x40, 0)) + \
            command("2RST_QP", 0x21, 0x40)
        cmds = trace_view.commands(recs)
        self.assertEqual([c["name"] for c in cmds], ["INIT2RTR_QP", "2RST_QP"])
        self.assertEqual(cmds[1]["fields"], [])
        self.assertIn("optpar=0x80 (PRIMARY_ADDR_PATH)", trace_view.command_with_fields(cmds[0]))


class SideBySideTest(unittest.TestCase):
    def run_case(self, ours_posts, ours_counters=None):
        """Run 1 over mainline (trace -2), run 2 over ours; returns the
        table's lines and the differences."""
        main = bf_post(8) + bf_post(8) + [uar_write(0x800)] + \
            command("RST2INIT_QP", 0x19, 0x40, qp_mailbox(0, 0x40, 0))
        ours = ours_posts + command("RST2INIT_QP", 0x19, 0x41, qp_mailbox(0, 0x41, 0))
        with tempfile.TemporaryDirectory() as d:
            write_trace(os.path.join(d, "t.jsonl"), [(4, ours)])
            write_trace(os.path.join(d, "t-2.jsonl"), [(2, main)])
            with open(os.path.join(d, "perftest-side-by-side.txt"), "w") as f:
                f.write(GUEST_HEAD)
                f.write("1 ib_send_lat 4 mainline mlx4_0 b 9.0 2 0 17 132 0 0 1 1 0\n")
                f.write("2 ib_send_lat 4 mlx4_bf mlx4_bf0 a 9.1 "
                        + (ours_counters or "2 0 16 128 0 0 0 1 0") + "\n")
            rows, _ = side_by_side.guest_rows(os.path.join(d, "perftest-side-by-side.txt"))
            segs = [side_by_side.segments(os.path.join(d, n)) for n in ("t.jsonl", "t-2.jsonl")]
        counts, errors = {}, []
        for row in rows:
            counts[row["run"]] = side_by_side.count(side_by_side.window_of(row, segs))
            errors += side_by_side.cross_check(row, counts[row["run"]])
        lines, differ = side_by_side.table(rows, counts)
        return lines, differ, errors

    def test_equal_posts_pass_and_the_eq_doorbell_is_set_apart(self):
        lines, differ, errors = self.run_case(bf_post(8) + bf_post(8))
        self.assertEqual((differ, errors), ([], []))
        self.assertEqual(lines[1].split()[4:10], ["2", "8.00", "64.00", "0.00", "0.00", "1.00"])
        self.assertTrue(lines[1].endswith("1 EQ doorbell"))
        self.assertTrue(lines[2].endswith("none"))

    def test_a_doorbell_post_differs_loudly(self):
        lines, differ, errors = self.run_case(bf_post(8) + db_post(2),
                                              "1 1 9 68 2 1 0 1 0")
        self.assertEqual(errors, [])
        self.assertIn("ib_send_lat 4: BAR2_wr per post 8.00 over mainline, 4.50 over mlx4_bf",
                      differ)
        self.assertEqual(len(differ), 5)

    def test_the_trace_must_agree_with_the_counters(self):
        _, _, errors = self.run_case(bf_post(8) + bf_post(8), "2 0 15 128 0 0 0 1 0")
        self.assertEqual(errors, ["run 2 (ib_send_lat 4 over mlx4_bf): the trace has 16 "
                                  "bar2_writes, the counters moved 15"])

    def test_commands_pair_by_object_and_fields_differ(self):
        main = trace_view.commands(
            command("SW2HW_MPT", 0x0d, 0x100, "00" * 64)
            + command("INIT2RTR_QP", 0x1a, 0x40, qp_mailbox(0x4080, 0x40, 0x98)))
        ours = trace_view.commands(
            command("WRITE_MTT", 0x11, 2, "00" * 32)
            + command("SW2HW_MPT", 0x0d, 0x3, "00" * 64)
            + command("INIT2RTR_QP", 0x1a, 0x41, qp_mailbox(0x80, 0x41, 0x98)))
        text = "\n".join(side_by_side.command_report("ib_write_lat", 64, main, ours))
        self.assertRegex(text, r"\nWRITE_MTT +> #1 +0x00002\n")
        self.assertIn("  mlx4_bf: WRITE_MTT  x1", text)
        self.assertIn("  QP #1: INIT2RTR_QP: optpar: mainline 0x4080 (PRIMARY_ADDR_PATH|"
                      "ACK_TIMEOUT), mlx4_bf 0x80 (PRIMARY_ADDR_PATH)  x1", text)
        self.assertRegex(text, r"MPT #1: SW2HW_MPT +#1 +0x00100 += #2 +0x00003")

    def test_cqs_pair_by_role_and_identities_by_presence(self):
        def run(first_cq, second_cq, db_rec):
            """A QP whose send CQ is 0x81 and receive CQ 0x82, the CQs made
            in the order given."""
            cq = bytearray(0x40)
            cq[0x0c] = 6  # log_size
            mb = bytearray.fromhex(qp_mailbox(0, 0x40, 0))
            mb[8 + 0x7c:8 + 0x80] = (0x81).to_bytes(4, "big")
            mb[8 + 0x9c:8 + 0xa0] = (0x82).to_bytes(4, "big")
            mb[8 + 0xa0:8 + 0xa8] = db_rec.to_bytes(8, "big")
            cq_a, cq_b = bytearray(cq), bytearray(cq)
            cq_a[0x0c] = 4 if first_cq == 0x81 else 6
            cq_b[0x0c] = 4 if second_cq == 0x81 else 6
            return trace_view.commands(command("SW2HW_CQ", 0x16, first_cq, cq_a.hex())
                                       + command("SW2HW_CQ", 0x16, second_cq, cq_b.hex())
                                       + command("RST2INIT_QP", 0x19, 0x40, mb.hex()))
        main, ours = run(0x81, 0x82, 0x1000), run(0x82, 0x81, 0x2000)
        only, diffs = side_by_side.compare_commands(main, ours)
        self.assertEqual((only, diffs), ({}, {}))
        only, diffs = side_by_side.compare_commands(main, run(0x82, 0x81, 0))
        self.assertEqual(list(diffs), [("QP #1: RST2INIT_QP", "db_rec_addr", "set", "0")])


if __name__ == "__main__":
    unittest.main()
