# SPDX-License-Identifier: GPL-2.0
#
# The QP_POST uverbs method (issue 38), sourced by provider.sh: perftest
# linked against the patched libmlx4 (tools/rdma-core/, MLX4_KERNEL_BF=1),
# whose BlueFlame posts all go through the method; the helper posting
# through it; the device's post counters in hw_counters/. The method's
# paths, refusals and fuzzing are the kselftests' (mlx4_bf_qp_post_test,
# mlx4_bf_qp_post_refusal_test, mlx4_bf_qp_post_fuzz). Each function prints
# what it saw as "#" lines and returns 0 if it went as it must.

# perftest's TOOL at SIZE bytes (inline) through the method: every WQE of
# both ends a BlueFlame post of the kernel's (the device's bf_posts), none
# by the user's BlueFlame copy or read by DMA (the model's counters).
qp_post_perftest() { # tool size
	args="-d $DEV -i 1 -F -s $2 -n $ITERS"
	posts=$(value $STATS bf_posts)
	snap before
	server_client "qp-post-$1-$2" "env MLX4_KERNEL_BF=1 ./qp-post/$1 $args" \
		"env MLX4_KERNEL_BF=1 ./qp-post/$1 $args 127.0.0.1"
	rc=$?
	snap after
	posts=$(($(value $STATS bf_posts) - posts))
	echo "# $1 $2 bytes through QP_POST: the kernel's BlueFlame posts $posts, the model's bf $(delta wqes_bf), WQE DMA reads $(delta sq_dma_reads), protocol errors $(delta protocol_errors)"
	[ $rc = 0 ] || return 1
	[ "$posts" -ge $((2 * ITERS)) ] && [ "$(delta wqes_bf)" -ge "$posts" ] &&
		[ "$(delta sq_dma_reads)" = 0 ] && [ "$(delta protocol_errors)" = 0 ]
}

# The helper (tools/mlx4-bf) on the RDMA device (issue 45): its post
# subcommand builds an RDMA write in a QP's own send queue and posts it
# through the method; each post's path as the kernel reports it, and the
# write's bytes where they landed (the helper checks them); its lat sweep
# on both paths; its bench, BlueFlame and doorbell against the uverbs
# floor, a row per size; its userpost, QP_POST against libmlx4's own
# stores and the kernel ping, a row per size; its stress run, one and two
# threads each on a context of its own, every WQE completed (each row's
# posts above none); its pingpong, two contexts: SENDs on both paths and
# both waits (threads), and RDMA writes with immediate, one gathered, with
# event waits (processes), every message checked by its receiver.
helper_posts() {
	ok=0
	for case in "32 BlueFlame" "208 BlueFlame" "32 doorbell --force-doorbell" \
		"2000 doorbell"; do
		# shellcheck disable=SC2086
		set -- $case
		out=$(./mlx4-bf --device $DEV post --size "$1" $3 2>&1)
		rc=$?
		echo "# post --size $1 $3: $out"
		[ $rc = 0 ] && echo "$out" | grep -q ": $2 path" || ok=1
	done
	# lat: every size of the sweep timed on both paths (two tables).
	out=$(./mlx4-bf --device $DEV lat --min 4 --max 208 --step 204 --iters 20 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# lat: /'
	[ $rc = 0 ] && [ "$(echo "$out" | grep -cE '^ *(4|208) ')" = 4 ] || ok=1
	out=$(./mlx4-bf --device $DEV bench --out-dir /tmp/helper-bench --min 4 --max 208 \
		--step 204 --iters 20 2>&1)
	rc=$?
	echo "$out" | grep -v '^wrote' | sed 's/^/# bench: /'
	[ $rc = 0 ] && [ "$(grep -cE '^(4|208) ' /tmp/helper-bench/bench.txt)" = 2 ] || ok=1
	out=$(./mlx4-bf --device $DEV userpost --out-dir /tmp/helper-userpost --min 4 \
		--max 208 --step 204 --iters 20 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# userpost: /'
	[ $rc = 0 ] && [ "$(grep -cE '^(4|208) ' /tmp/helper-userpost/userpost.txt)" = 2 ] || ok=1
	out=$(./mlx4-bf --device $DEV pingpong --all --min 4 --max 208 --step 204 \
		--iters 20 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# pingpong: /'
	[ $rc = 0 ] && [ "$(echo "$out" | grep -cE '^ *(4|208) +[0-9]+ ')" = 8 ] || ok=1
	out=$(./mlx4-bf --device $DEV pingpong --op rdma-write-imm --procs --wait event \
		--min 64 --max 2000 --step 1936 --iters 20 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# pingpong: /'
	[ $rc = 0 ] && [ "$(echo "$out" | grep -cE '^ *(64|2000) +[0-9]+ ')" = 2 ] || ok=1
	out=$(./mlx4-bf --device $DEV stress --threads 1,2 --seconds 1 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# stress: /'
	[ $rc = 0 ] && [ "$(echo "$out" | grep -cE '^[12] +[1-9]')" = 2 ] || ok=1
	return $ok
}

# The post counters as the RDMA core shows them (sysfs hw_counters/, the
# device's rdma_hw_stats): a file for each line of debugfs's post counters
# with the same count (nothing posts in between), the BlueFlame posts
# above none after the helper's; the helper's info shows that count.
hw_counters_agree() {
	# Not n: lib.sh's result() numbers the results with it.
	ok=0 files=0
	for f in "$I"/hw_counters/*; do
		name=${f##*/}
		[ "$name" = lifespan ] && continue
		files=$((files + 1))
		want=$(value $STATS "$name")
		got=$(cat "$f")
		[ "$got" = "$want" ] || { echo "# hw_counters/$name $got, debugfs $want"; ok=1; }
	done
	echo "# hw_counters: $files counters, bf_posts $(cat "$I"/hw_counters/bf_posts 2>/dev/null)"
	bf=$(cat "$I"/hw_counters/bf_posts)
	# 4 post counts and 12 refusal reasons (rust/mlx4_bf_core reject.rs)
	[ "$files" = 16 ] && [ "$bf" -gt 0 ] || ok=1
	line=$(./mlx4-bf --device $DEV info | grep '^device counters')
	echo "# info: $line"
	echo "$line" | grep -q " $bf BlueFlame," || ok=1
	return $ok
}
