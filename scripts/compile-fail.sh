#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# compile-fail.sh KDIR: what must not build, as KTAP. The RDMA layer's
# attribute tokens (drivers/mlx4_bf/rdma/method.rs) make a uverbs method's
# handler that reads an attribute as what it is not a type error: each case
# is a function of drivers/mlx4_bf/ib/post.rs behind
# `--cfg mlx4_bf_compile_fail_CASE`, built in a copy of the module's
# sources against KDIR; it passes if rustc refuses it with E0308 (mismatched
# types) in that function's body, and with nothing before.

source "$(dirname "$0")/lib.sh"

kdir=${1:?usage: compile-fail.sh KDIR}
cases=(ptr_in_as_qp flags_as_bytes)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
module_sources_copy "$work"

echo "KTAP version 1"
echo "1..${#cases[@]}"
n=0 failed=0
for c in "${cases[@]}"; do
	n=$((n + 1))
	if out=$(make -s -C "$kdir" M="$work" "${KMAKE_FLAGS[@]}" \
		KRUSTFLAGS="--cfg mlx4_bf_compile_fail_$c" modules 2>&1); then
		echo "# $c: built"
		echo "not ok $n ${c}_refused_at_build"
		failed=$((failed + 1))
	elif at=$(grep -m1 -A1 'error\[E0308\]' <<<"$out" | sed -n 's|.*--> drivers/mlx4_bf/ib/post.rs:\([0-9]*\):.*|\1|p') &&
		fn_at=$(grep -n "^fn $c(" "$TOP/drivers/mlx4_bf/ib/post.rs" | cut -d: -f1) &&
		[ -n "$at" ] && [ -n "$fn_at" ] && [ "$at" -gt "$fn_at" ] && [ "$at" -le $((fn_at + 3)) ]; then
		echo "# $c: $(grep -m1 -A3 'error\[E0308\]' <<<"$out" | tr -s ' \n' ' ' | cut -c1-160)"
		echo "ok $n ${c}_refused_at_build"
	else
		echo "# $c: refused, but not as a type error in fn $c:"
		sed 's/^/# /' <<<"$out" | head -n 20
		echo "not ok $n ${c}_refused_at_build"
		failed=$((failed + 1))
	fi
done
echo "$((n - failed)) passed, $failed failed"
[ "$failed" = 0 ]
