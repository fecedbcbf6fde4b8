#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The fault walk (issue 43, "every failure walked"), on the debug kernel
# (configs/debug.config: FAULT_INJECTION, FAILSLAB, FAIL_PAGE_ALLOC,
# FAULT_INJECTION_DEBUG_FS): ibv_fault_walk fails every allocation and every
# firmware command of each operation of the RDMA provider in turn
# (tools/vm/provider/ibv_fault_walk.c). This sets the fault-injection knobs
# fail-nth needs, runs it, and reads the kernel log of the whole walk for
# the reports of the kernel's checkers. KTAP, three results, every line
# after $FAULT_WALK_INDENT (provider.sh nests it); exit status 0 if all
# passed. FAULT_WALK_ARGS: ibv_fault_walk's options (-o OPS, -F, -D, -T).
#
# Both failslab and fail_page_alloc skip sleeping allocations (GFP_KERNEL)
# unless ignore-gfp-wait is 0, and fail_page_alloc skips order 0 unless
# min-order is 0; verbose 0: no line nor stack dump per injected failure
# on the serial console. probability stays 0: fail-nth alone decides.
# The allocations each operation spares (reject-start and reject-end,
# FAULT_INJECTION_STACKTRACE_FILTER) ibv_fault_walk sets itself
# (fault_walk_spare.c).

cd "$(dirname "$0")" || exit 1
. ./lib.sh

IN=${FAULT_WALK_INDENT:-}
KTAP_INDENT=$IN
FI=/sys/kernel/debug
LOG=/tmp/fault_walk.kmsg

say() {
	echo "$IN$1"
}

knobs() {
	for f in failslab fail_page_alloc; do
		echo 0 >$FI/$f/ignore-gfp-wait && echo 0 >$FI/$f/verbose || return 1
		[ "$(cat $FI/$f/probability)" = 0 ] && [ -w $FI/$f/reject-start ] ||
			return 1
	done
	echo 0 >$FI/fail_page_alloc/min-order && [ -w /proc/thread-self/fail-nth ]
}

# The reports in the kernel log after the walk's marker: the kernel's
# checkers, and stack dumps that are not an allocator's report of a failure
# the walk injected (a vmalloc() without __GFP_NOWARN dumps its stack).
problems() {
	awk '/fault_walk: start/ { on = 1; next } !on { next }
		/page allocation failure|vmalloc error|FAULT_INJECTION/ { dump = NR; next }
		/WARNING:|BUG:|KASAN:|KFENCE:|UBSAN:|Oops|general protection|circular locking|recursive locking|lock state|suspicious RCU|new suspected memory leak|unreferenced object|leak detector disabled|kmemleak_object|panicked at/ { print; dump = NR; next }
		/Call Trace/ && (!dump || NR - dump > 60) { print }' $LOG |
		sed 's/^[^;]*;//' | head -n 5 | tr '\n' '|'
}

say "KTAP version 1"
say "1..3"
knobs
result $? fault_injection_knobs_for_fail_nth \
	"$(grep . $FI/failslab/ignore-gfp-wait $FI/fail_page_alloc/ignore-gfp-wait \
		$FI/fail_page_alloc/min-order $FI/failslab/reject-* 2>&1 | tr '\n' ' ')"

# Every record from here on, whatever the log buffer keeps.
cat /dev/kmsg >$LOG &
cat_pid=$!
echo "fault_walk: start" >/dev/kmsg
start=$(date +%s)
# shellcheck disable=SC2086
./ibv_fault_walk -p "$IN    " ${FAULT_WALK_ARGS:-}
rc=$?
say "# the walk took $(($(date +%s) - start)) s"
result $rc ibv_fault_walk "see the subtests above"
sleep 1
kill $cat_pid
wait $cat_pid 2>/dev/null
bad=$(problems)
[ -z "$bad" ]
result $? fault_walk_leaves_no_report_in_the_log "$bad"
exit $failed
