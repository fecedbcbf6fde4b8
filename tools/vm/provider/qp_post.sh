# SPDX-License-Identifier: GPL-2.0
#
# The QP_POST uverbs method (issue 38), sourced by provider.sh: its good
# path and refusals (ibv_qp_post), a fuzz of its attributes, and perftest
# linked against the patched libmlx4 (tools/rdma-core/, MLX4_KERNEL_BF=1),
# whose BlueFlame posts all go through the method. Each function prints
# what it saw as "#" lines and returns 0 if it went as it must.

# The fuzz's seed: fixed, so that a failure replays (ibv_qp_post -s).
FUZZ_SEED=${FUZZ_SEED:-7}
FUZZ_CALLS=3000

# ibv_qp_post's own KTAP, nested.
qp_post_method() {
	./ibv_qp_post -d $DEV >/tmp/qp_post.out 2>&1
	rc=$?
	sed 's/^/    /' /tmp/qp_post.out
	return $rc
}

# FUZZ_CALLS calls with random attributes; the kernel survives and a new QP
# still posts (ibv_qp_post checks that last). A fuzzed WQE the kernel
# passes is still the process's own, on its own QP: a flipped rkey or
# remote address is the responder's to refuse (a remote access fault), a
# flipped WQE counter sends the adapter to the send queue for a WQE that
# is not there (a BlueFlame fallback with nothing to fetch). The adapter's
# protocol errors meanwhile are expected ones (the model's EXPECT), and
# its faults are declared for suite_invariants (mlx4_bf_model.h's
# DECLARED_FAULTS): both are the process wrecking its own QP.
qp_post_fuzz() {
	snap before
	./mlx4-bf counters --expect 1 >/dev/null
	./ibv_qp_post -d $DEV -f $FUZZ_CALLS -s "$FUZZ_SEED" >/tmp/qp_post_fuzz.out 2>&1
	rc=$?
	./mlx4-bf counters --expect 0 >/tmp/counters.after
	sed 's/^/# /' /tmp/qp_post_fuzz.out | tail -n 5
	echo "# the adapter meanwhile: protocol errors $(delta protocol_errors), local protection faults $(delta local_prot_faults), remote access faults $(delta remote_access_faults), BlueFlame fallbacks $(delta bf_fallbacks)"
	i=0
	while [ $i -lt "$(delta local_prot_faults)" ]; do
		echo local >>/tmp/mlx4_bf_declared_faults
		i=$((i + 1))
	done
	i=0
	while [ $i -lt "$(delta remote_access_faults)" ]; do
		echo remote >>/tmp/mlx4_bf_declared_faults
		i=$((i + 1))
	done
	return $rc
}

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
	[ "$files" = 15 ] && [ "$bf" -gt 0 ] || ok=1
	line=$(./mlx4-bf --device $DEV info | grep '^device counters')
	echo "# info: $line"
	echo "$line" | grep -q " $bf BlueFlame," || ok=1
	return $ok
}
