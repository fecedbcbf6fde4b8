# SPDX-License-Identifier: GPL-2.0
"""side_by_side.py: unittest's verbose report read right, each verdict."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import side_by_side as sbs  # noqa: E402

REPORT = """\
libibverbs: Warning: couldn't open config directory '/etc/libibverbs.d'.
test_a (tests.test_x.T.test_a) ... ok
test_b (tests.test_x.T.test_b)
Checks that b works ... skipped 'Device does not support b'
test_c (tests.test_x.T.test_c) ... ERROR
test_d (tests.test_x.T.test_d) ... some output of the test
FAIL
test_e (tests.test_x.T.test_e) ... expected failure

======================================================================
ERROR: test_c (tests.test_x.T.test_c)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/work/tests/test_x.py", line 9, in test_c
    raise x
pyverbs.pyverbs_error.PyverbsRDMAError: Failed to create QP. Errno: 95, Operation not supported

======================================================================
FAIL: test_d (tests.test_x.T.test_d)
----------------------------------------------------------------------
Traceback (most recent call last):
AssertionError: 1 != 2

----------------------------------------------------------------------
Ran 5 tests in 1.000s

FAILED (failures=1, errors=1, skipped=1)
"""


class Parse(unittest.TestCase):
    def test_every_outcome_with_its_detail(self):
        r = sbs.parse(REPORT)
        self.assertEqual(r["tests.test_x.T.test_a"], ("ok", ""))
        self.assertEqual(r["tests.test_x.T.test_b"], ("skip", "Device does not support b"))
        self.assertEqual(r["tests.test_x.T.test_c"],
                         ("error", "pyverbs.pyverbs_error.PyverbsRDMAError: Failed to create QP. "
                          "Errno: 95, Operation not supported"))
        self.assertEqual(r["tests.test_x.T.test_d"], ("fail", "AssertionError: 1 != 2"))
        self.assertEqual(r["tests.test_x.T.test_e"], ("ok", ""))
        self.assertEqual(len(r), 5)


class Verdict(unittest.TestCase):
    OK, SKIP, ERR = ("ok", ""), ("skip", "no b"), ("error", "E: x")

    def test_passing_over_ours_is_ok(self):
        self.assertEqual(sbs.verdict(self.SKIP, self.OK, None)[0], "ok")

    def test_skipped_over_both_is_a_skip(self):
        self.assertEqual(sbs.verdict(self.SKIP, self.SKIP, None)[0], "skip")

    def test_failing_over_both_is_a_skip(self):
        self.assertEqual(sbs.verdict(self.ERR, self.ERR, None), ("skip", "fails over mainline too: E: x"))

    def test_worse_over_ours_fails_unless_explained(self):
        self.assertEqual(sbs.verdict(self.OK, self.ERR, None)[0], "not ok")
        self.assertEqual(sbs.verdict(self.OK, self.SKIP, None)[0], "not ok")
        self.assertEqual(sbs.verdict(self.SKIP, self.ERR, None)[0], "not ok")
        self.assertEqual(sbs.verdict(self.OK, self.ERR, "why")[0], "skip")

    def test_a_stale_explanation_fails(self):
        self.assertEqual(sbs.verdict(self.SKIP, self.OK, "why")[0], "not ok")
        self.assertEqual(sbs.verdict(self.SKIP, self.SKIP, "why")[0], "not ok")
        self.assertEqual(sbs.verdict(self.ERR, self.ERR, "why")[0], "not ok")

    def test_a_test_not_run_is_a_skip_unless_it_ran(self):
        self.assertEqual(sbs.verdict(None, None, None, "crashes"), ("skip", "not run: crashes"))
        self.assertEqual(sbs.verdict(self.OK, None, None, "crashes")[0], "not ok")

    def test_a_test_reported_twice_counts_with_its_worse_result(self):
        r = sbs.parse("test_a (tests.t.T.test_a) ... ok\ntest_a (tests.t.T.test_a) ... ERROR\n")
        self.assertEqual(r["tests.t.T.test_a"], ("error", ""))

    def test_a_test_one_report_lacks_fails(self):
        self.assertEqual(sbs.verdict(None, self.OK, None)[0], "not ok")
        self.assertEqual(sbs.verdict(self.OK, None, None)[0], "not ok")


if __name__ == "__main__":
    unittest.main()
