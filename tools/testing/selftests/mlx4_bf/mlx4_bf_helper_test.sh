#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The userspace helper (tools/mlx4-bf) on the RDMA device, the first
# mlx4_bf<N> there is (verbs objects through libibverbs, posts through
# QP_POST): it fails cleanly, a one-line error that names the cause, a
# non-zero exit, never a panic; it refuses the misc device's path; and it
# posts, measures and checks what landed. Skipped when the helper is not
# installed next to the tests or in $PATH, or there is no RDMA device
# mlx4_bf<N>.

HELPER=${MLX4_BF_HELPER:-$(dirname "$0")/../mlx4-bf}
[ -x "$HELPER" ] || HELPER=$(command -v mlx4-bf)
rdma=$(ls /sys/class/infiniband 2>/dev/null | grep '^mlx4_bf' | head -n1)
n=0
fail=0

echo "TAP version 13"
if [ -z "$HELPER" ] || [ -z "$rdma" ]; then
	echo "1..0 # SKIP mlx4-bf helper or an RDMA device mlx4_bf<N> missing"
	exit 4
fi
echo "1..16"

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

# The misc device is gone: its node's path is refused before anything is
# opened, with what to name instead.
check misc_device_path_is_refused "misc device /dev/mlx4_bf<N> is gone; name the RDMA device" \
	"$HELPER" --device /dev/mlx4_bf0 info
check missing_device "mlx4_bf9: no such RDMA device" "$HELPER" --device mlx4_bf9 info
check size_out_of_range "not in" "$HELPER" --device "$rdma" post --size 70000
check min_above_max "above --max" "$HELPER" --device "$rdma" lat --min 100 --max 10
check bf_path_has_no_gathered_rdma_write "gathered: doorbell path only" \
	"$HELPER" --device "$rdma" pingpong --op rdma-write-imm --path bf --size 1000

# uverbs makes /dev/infiniband/uverbs<N> 0666: an unprivileged user has
# the RDMA device like any verbs user, and QP_POST with it; only the
# kernel ping, which userpost times beside it, is root's (debugfs).
ok_if non_root_posts_through_qp_post su nobody -s /bin/sh -c \
	"'$HELPER' --device $rdma post --size 32 | grep -q ': BlueFlame path'"
check non_root_userpost_needs_debugfs "kping: .*Permission denied" su nobody -s /bin/sh -c \
	"'$HELPER' --device $rdma userpost --min 4 --max 4 --iters 20 --out-dir /tmp/nobody"

ok_if posts_bf_up_to_208_and_doorbell_above sh -c \
	"'$HELPER' --device $rdma post --size 208 | grep -q ': BlueFlame path' &&
	 '$HELPER' --device $rdma post --size 209 | grep -q ': doorbell path'"
if [ "$rdma" = mlx4_bf0 ]; then
	ok_if info_speaks_mlx4_bf0_by_default sh -c \
		"'$HELPER' info | grep -q '^device  *mlx4_bf0,'"
else
	n=$((n + 1))
	echo "ok $n info_speaks_mlx4_bf0_by_default # SKIP the RDMA device is $rdma"
fi
ok_if info_reads_the_hw_counters sh -c \
	"'$HELPER' --device $rdma info | grep '^device counters .* BlueFlame' >/dev/null"

# Registered memory: what does not fit inline is gathered from a registered
# buffer, and RDMA_WRITE_IMM ping-pong checks what landed in the peer's.
ok_if lat_gathers_what_does_not_fit_inline sh -c \
	"'$HELPER' --device $rdma lat --min 4 --max 1004 --step 1000 --iters 20 |
	 grep '^# gathered' >/dev/null"
# The test bed's adapter is the device model: lat's caption says that its
# wall clock times the emulator.
ok_if lat_says_its_clock_times_the_emulator sh -c \
	"'$HELPER' --device $rdma lat --min 4 --max 4 --iters 20 |
	 grep '^# clock: .*device model.*emulator' >/dev/null"
ok_if lat_plots_with_the_blueflame_limit sh -c \
	"rm -f /tmp/lat.svg && '$HELPER' --device $rdma lat --min 4 --max 208 --step 204 \
	 --iters 20 --plot /tmp/lat.svg >/dev/null && grep -q 'BlueFlame limit' /tmp/lat.svg"
ok_if rdma_write_imm_pingpong_lands_its_data \
	"$HELPER" --device "$rdma" pingpong --op rdma-write-imm --iters 20 --min 4 --max 2004 \
	--step 2000
# rdma-core's way beside QP_POST: libmlx4's own posts complete.
ok_if userpost_compares_libmlx4_and_qp_post sh -c \
	"'$HELPER' --device $rdma userpost --min 4 --max 208 --step 204 --iters 20 \
	 --out-dir /tmp/userpost | grep '^208 ' >/dev/null"
ok_if userpost_pingpong_runs_both_ways sh -c \
	"'$HELPER' --device $rdma userpost --pingpong --min 4 --max 8 --step 4 --iters 20 \
	 --out-dir /tmp/userpost | grep '^8 ' >/dev/null"
exit $fail
