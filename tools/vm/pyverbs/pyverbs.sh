#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# make pyverbs' boot (x86_64, two adapters: vm.py --second-adapter):
# rdma-core's own test suite (tests/run_tests.py over pyverbs, Debian's
# python3-pyverbs 56.1 in /work/debroot: scripts/build-guest-debs.sh
# pyverbs) over mainline mlx4_core + mlx4_ib on the second adapter
# (versus.sh up: mlx4_0) and over our provider on the first (mlx4_bf0), one
# device after the other, each with unittest's verbose report in
# /tmp/results/pyverbs-DEVICE.txt and the adapter's analyzer counters
# around it (pyverbs-counters-DEVICE.txt: each counter's delta). A failing test does not fail
# the boot: tools/vm/pyverbs/side_by_side.py judges the two reports on the
# host. The boot fails if a device is missing or the suite does not finish.

cd "$(dirname "$0")" || exit 1
. ./lib.sh
sh ./versus.sh up || exit 1
PATH=/work/debroot/bin:$PATH
# A crash shows the Python stack it happened in.
PYTHONFAULTHANDLER=1
export PATH PYTHONFAULTHANDLER
mkdir -p /tmp/results
tests=/work/debroot/usr/share/doc/rdma-core
# Every test the suite lists but those of not_run.txt.
sed -n 's/^\(tests\.[^ #]*\) .*/\1/p' ./not_run.txt >/tmp/not_run
(cd "$tests" && python3 tests/run_tests.py --list-tests) 2>/dev/null | grep '^tests\.test_' |
	grep -v -x -F -f /tmp/not_run >/tmp/run_ids
echo "pyverbs: $(wc -l </tmp/run_ids) tests, $(wc -l </tmp/not_run) not run (not_run.txt)"
rc=0
for dev in ${PYVERBS_DEVICES:-mlx4_0 mlx4_bf0}; do
	[ -e /sys/class/infiniband/$dev ] || { echo "pyverbs: no $dev" >&2; rc=1; continue; }
	port_active $dev 200 || { echo "pyverbs: $dev port 1 not ACTIVE" >&2; rc=1; continue; }
	bdf=$(ib_bdf $dev)
	snap before "$bdf" || rc=1
	start=$(date +%s)
	(cd "$tests" && timeout "${PYVERBS_TIMEOUT:-1500}" python3 tests/run_tests.py \
		--dev "$dev" --port 1 -v ${PYVERBS_TESTS:-$(cat /tmp/run_ids)}) >/tmp/results/pyverbs-$dev.txt 2>&1
	run=$?
	snap after "$bdf" || rc=1
	# What the adapter did for the suite: each counter's delta.
	awk '$2 ~ /^[0-9]+$/ { if (FILENAME ~ /before/) b[$1] = $2; else print $1, $2 - b[$1] }' \
		/tmp/counters.before /tmp/counters.after >/tmp/results/pyverbs-counters-$dev.txt
	# unittest exits 1 when a test failed: the host judges that; a
	# timeout (124) or a crash is this boot's failure.
	[ $run -le 1 ] || { echo "pyverbs: run_tests.py over $dev exited $run" >&2; rc=1; }
	echo "pyverbs: $dev in $(($(date +%s) - start)) s: $(tail -n 1 /tmp/results/pyverbs-$dev.txt)"
done
exit $rc
