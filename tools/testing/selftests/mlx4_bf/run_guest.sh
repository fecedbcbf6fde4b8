#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs every selftest program next to this script and reports KTAP: one
# top-level result per program with the program's own output nested (indented
# by four spaces, as KTAP v1 nests subtests). Exit statuses follow kselftest:
# 0 pass, 4 skip, anything else (a timeout too) fail. The per-program timeout
# comes from ./settings.
#
# MLX4_BF_PARAM_SETS="writer=1;writer=2" runs everything once per set of
# module parameters, reloading mlx4_bf from $MLX4_BF_KO in between, but
# the programs of MLX4_BF_ONCE (names), whose rules no module parameter
# changes, which run in the first set only.
# MLX4_BF_TESTS="prog1 prog2" runs only those programs.
#
# After all of them, one more result, suite_invariants (mlx4_bf_invariants):
# no page left pinned (the kernel's pins as before the first program), and
# no protection fault the adapter ever saw that a test did not declare.

cd "$(dirname "$0")" || exit 1
limit=$(sed -n 's/^timeout=//p' settings)
if [ -n "${MLX4_BF_TESTS:-}" ]; then
	progs=$(for p in $MLX4_BF_TESTS; do echo "./$p"; done)
else
	progs=$(ls ./*_test ./*_test.sh 2>/dev/null)
fi
# Pages pinned by anyone now (/proc/vmstat: pins taken less pins released;
# stat_refresh folds the per-CPU counts in first), for suite_invariants.
cat /proc/sys/vm/stat_refresh >/dev/null 2>&1
MLX4_BF_PINS_AT_START=$(awk '$1 == "nr_foll_pin_acquired" { a = $2 }
	$1 == "nr_foll_pin_released" { r = $2 } END { if (a != "") print a - r }' /proc/vmstat)
export MLX4_BF_PINS_AT_START
sets=${MLX4_BF_PARAM_SETS:-}
nsets=1
[ -n "$sets" ] && nsets=$(echo "$sets" | tr ';' '\n' | wc -l)
# The programs of MLX4_BF_ONCE among those run.
once=0
for p in ${MLX4_BF_ONCE:-}; do
	case " $(echo $progs) " in *" ./$p "*) once=$((once + 1)) ;; esac
done
echo "KTAP version 1"
echo "1..$(($(echo $progs | wc -w) * nsets - once * (nsets - 1) + 1))"
n=0
failed=0

run_one() { # program name
	n=$((n + 1))
	{ timeout "${limit:-300}" "$1" 2>&1; echo $? >/tmp/rc; } | sed 's/^/    /'
	rc=$(cat /tmp/rc)
	case $rc in
	0) echo "ok $n $2" ;;
	4) echo "ok $n $2 # SKIP" ;;
	*) echo "not ok $n $2 # exit=$rc"; failed=1 ;;
	esac
}

run_all() { # suffix [first set: 1]
	for prog in $progs; do
		case " ${MLX4_BF_ONCE:-} " in
		*" ${prog#./} "*) [ "${2:-}" = 1 ] || continue ;;
		esac
		run_one "$prog" "${prog#./}$1"
	done
}

if [ -z "$sets" ]; then
	run_all "" 1
else
	echo "$sets" | tr ';' '\n' >/tmp/param_sets
	first=1
	while read -r params; do
		rmmod mlx4_bf 2>/dev/null
		export MLX4_BF_PARAMS="$params"
		# shellcheck disable=SC2086
		insmod "${MLX4_BF_KO:-/lib/modules/mlx4_bf.ko}" $params
		# insmod probes the adapter: its RDMA device registers, and its
		# port comes up a little later (a QP connected to itself needs
		# the LID).
		i=0
		while [ $i -lt 50 ]; do
			grep -qs ACTIVE /sys/class/infiniband/mlx4_bf*/ports/1/state && break
			sleep 0.2
			i=$((i + 1))
		done
		run_all " [$params]" $first
		first=0
	done </tmp/param_sets
fi
run_one ./mlx4_bf_invariants suite_invariants
exit $failed
