#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The userspace helper (tools/mlx4-bf) fails cleanly: a one-line error that
# names the cause, a non-zero exit, never a panic; and it posts, on the misc
# device and on the RDMA device (--device mlx4_bf<N>: verbs objects, posts
# through QP_POST). Skipped when the helper is not installed next to the
# tests or in $PATH.

HELPER=${MLX4_BF_HELPER:-$(dirname "$0")/../mlx4-bf}
[ -x "$HELPER" ] || HELPER=$(command -v mlx4-bf)
n=0
fail=0

echo "TAP version 13"
if [ -z "$HELPER" ] || [ ! -e /dev/mlx4_bf0 ]; then
	echo "1..0 # SKIP mlx4-bf helper or /dev/mlx4_bf0 missing"
	exit 4
fi
echo "1..18"

check() { # name expected-text command...
	name=$1 want=$2
	shift 2
	n=$((n + 1))
	out=$("$@" 2>&1 >/dev/null)
	rc=$?
	lines=$(printf '%s\n' "$out" | wc -l)
	if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && printf '%s' "$out" | grep -q "$want" &&
	   ! printf '%s' "$out" | grep -q panicked; then
		echo "ok $n $name"
	else
		echo "# exit $rc, $lines line(s): $out"
		echo "not ok $n $name"
		fail=1
	fi
}

check non_root_on_a_0600_device "permission denied" su nobody -s /bin/sh -c "$HELPER info"
check missing_device "does not exist" "$HELPER" --device /dev/mlx4_bf9 info
check size_out_of_range "not in" "$HELPER" post --size 70000
check min_above_max "above --max" "$HELPER" lat --min 100 --max 10
check bf_path_has_no_gathered_rdma_write "gathered: doorbell path only" \
	"$HELPER" pingpong --op rdma-write-imm --path bf --size 1000
n=$((n + 1))
if "$HELPER" info >/dev/null && "$HELPER" post --size 208 | grep -q BlueFlame &&
   "$HELPER" post --size 209 | grep -q doorbell; then
	echo "ok $n root_posts_bf_up_to_208_and_doorbell_above"
else
	echo "not ok $n root_posts_bf_up_to_208_and_doorbell_above"
	fail=1
fi

# Registered memory: what does not fit inline is gathered from a registered
# buffer, and RDMA_WRITE_IMM ping-pong checks what landed in the peer's.
ok_if() { # name command...
	name=$1
	shift
	n=$((n + 1))
	if "$@"; then
		echo "ok $n $name"
	else
		echo "not ok $n $name"
		fail=1
	fi
}
ok_if lat_gathers_what_does_not_fit_inline sh -c \
	"'$HELPER' lat --min 4 --max 1004 --step 1000 --iters 20 | grep '^# gathered' >/dev/null"
# The test bed's adapter is the device model: lat's caption says that its
# wall clock times the emulator.
ok_if lat_says_its_clock_times_the_emulator sh -c \
	"'$HELPER' lat --min 4 --max 4 --iters 20 | grep '^# clock: .*device model.*emulator' >/dev/null"
ok_if rdma_write_imm_pingpong_lands_its_data \
	"$HELPER" pingpong --op rdma-write-imm --iters 20 --min 4 --max 2004 --step 2000
# rdma-core's way beside the ioctl: a user-posted QP's posts complete.
ok_if userpost_compares_user_and_ioctl_posts sh -c \
	"'$HELPER' userpost --min 4 --max 208 --step 204 --iters 20 --out-dir /tmp/userpost |
	 grep '^208 ' >/dev/null"
ok_if userpost_pingpong_runs_both_ways sh -c \
	"'$HELPER' userpost --pingpong --min 4 --max 8 --step 4 --iters 20 --out-dir /tmp/userpost |
	 grep '^8 ' >/dev/null"

# The same on the RDMA device, the first mlx4_bf<N> there is.
rdma=$(ls /sys/class/infiniband 2>/dev/null | grep '^mlx4_bf' | head -n1)
if [ -z "$rdma" ]; then
	for name in missing_rdma_device rdma_posts_bf_up_to_208_and_doorbell_above \
		    rdma_lat_gathers_what_does_not_fit_inline rdma_rdma_write_imm_pingpong_lands_its_data \
		    rdma_userpost_compares_libmlx4_and_qp_post rdma_userpost_pingpong_runs_both_ways \
		    rdma_info_reads_the_hw_counters; do
		n=$((n + 1))
		echo "ok $n $name # SKIP no RDMA device mlx4_bf<N>"
	done
	exit $fail
fi
check missing_rdma_device "No such device" "$HELPER" --device mlx4_bf9 info
ok_if rdma_posts_bf_up_to_208_and_doorbell_above sh -c \
	"'$HELPER' --device $rdma post --size 208 | grep -q BlueFlame &&
	 '$HELPER' --device $rdma post --size 209 | grep -q doorbell"
ok_if rdma_lat_gathers_what_does_not_fit_inline sh -c \
	"'$HELPER' --device $rdma lat --min 4 --max 1004 --step 1000 --iters 20 |
	 grep '^# gathered' >/dev/null"
ok_if rdma_rdma_write_imm_pingpong_lands_its_data \
	"$HELPER" --device "$rdma" pingpong --op rdma-write-imm --iters 20 --min 4 --max 2004 \
	--step 2000
ok_if rdma_userpost_compares_libmlx4_and_qp_post sh -c \
	"'$HELPER' --device $rdma userpost --min 4 --max 208 --step 204 --iters 20 \
	 --out-dir /tmp/userpost | grep '^208 ' >/dev/null"
ok_if rdma_userpost_pingpong_runs_both_ways sh -c \
	"'$HELPER' --device $rdma userpost --pingpong --min 4 --max 8 --step 4 --iters 20 \
	 --out-dir /tmp/userpost | grep '^8 ' >/dev/null"
ok_if rdma_info_reads_the_hw_counters sh -c \
	"'$HELPER' --device $rdma info | grep '^device counters .* BlueFlame' >/dev/null"
exit $fail
