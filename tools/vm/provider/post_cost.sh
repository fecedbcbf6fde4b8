#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# What one ibv_post_send() of an RDMA write to itself costs, in up to four
# columns side by side in one boot (issue 38):
#   mainline  Debian's libmlx4 over mainline mlx4_ib (mlx4_0), when make
#             bench's second adapter holds it (versus.sh up);
#   libmlx4   Debian's libmlx4 over our RDMA device, mlx4_bf0: its own
#             BlueFlame copy (x86: stores to the mapped page; s390x without
#             MIO: one s390_pci_mmio_write() system call per copy);
#   qp_post   the patched libmlx4 posting through our QP_POST method
#             (MLX4_KERNEL_BF=1);
#   doorbell  BlueFlame off: mlx4_bf reloaded with ib_blueflame=0, libmlx4
#             rings the doorbell (the module is reloaded as it was after).
# Per size: the median of ibv_post_cost (the call alone, on the guest clock:
# instructions under -icount shift=0, else TCG's wall time), and per post
# the analyzer's writes to BAR2, their bytes, the WQE's DMA reads, and the
# model's PCIe-clock latencies: post-to-wire and one-way (per RDMA write
# landed), of the posts the model timed (not a WQE a doorbell's scan ran
# ahead to: its post had not reached the bus). Inline up to 208 bytes; 1024
# is gathered (the doorbell in every column). The table goes to /tmp/results/post-cost-CLOCK.txt
# (POST_COST_CLOCK: icount or wall, what the boot's guest clock is); in the
# wall-clock boot also perftest's ib_send_lat and ib_write_lat in each
# column (post-cost-perftest.txt).

cd "$(dirname "$0")" || exit 1
. ./lib.sh
. /etc/mlx4-bf/env
DEV=mlx4_bf0
KO=/lib/modules/mlx4_bf.ko
SIZES=${SIZES:-4 64 128 208 1024}
CLOCK=${POST_COST_CLOCK:-icount}
N=300
# ibv_post_cost's warm-up posts come on top of N.
POSTS=$((N + 20))

# NAME's delta per post, or SUM's delta per COUNT's delta (awk's %.1f).
per() { # name [count-names...]
	name=$1
	shift
	if [ $# = 0 ]; then
		d=$POSTS
	else
		d=0
		for c in "$@"; do d=$((d + $(delta "$c"))); done
	fi
	awk -v s="$(delta "$name")" -v d="$d" 'BEGIN { if (d) printf "%.1f", s / d; else print "-" }'
}

# One column: NAME, the device, the program, its environment.
column() { # name device program [env]
	bdf=$(ib_bdf "$2")
	for s in $SIZES; do
		snap before "$bdf"
		env $4 ./"$3" -d "$2" -m "$s" -M "$s" -s 1 -n $N -i 208 >/tmp/cost.out 2>&1 ||
			{ sed 's/^/# /' /tmp/cost.out; return 1; }
		snap after "$bdf"
		printf '%-6s %-9s %8s %8s %8s %8s %8s %8s\n' "$s" "$1" \
			"$(awk '/^[0-9]/ { m = $3 } END { print m }' /tmp/cost.out)" \
			"$(per bar2_writes)" "$(per bar2_bytes)" "$(per sq_dma_reads)" \
			"$(per post_to_wire_sum_ns post_to_wire_samples)" \
			"$(per rdma_write_one_way_sum_ns rdma_write_one_way_samples)"
	done
}

# perftest in one column (the wall-clock boot only: the model answers a
# ping-pong asynchronously): ib_send_lat and ib_write_lat, t_typical (TCG's
# wall time) and the model's one-way latency per SEND delivered or RDMA
# write landed; BAR2 writes and WQE DMA reads per WQE executed.
perftest_column() { # name device program-prefix [env]
	bdf=$(ib_bdf "$2")
	for tool in ib_send_lat ib_write_lat; do
		for s in $SIZES; do
			args="-d $2 -i 1 -F -s $s -n $N"
			snap before "$bdf"
			server_client "$1-$tool-$s" "env $4 $3$tool $args" "env $4 $3$tool $args 127.0.0.1" >&2 ||
				return 1
			snap after "$bdf"
			case $tool in
			ib_send_lat) oneway=$(per one_way_sum_ns deliveries) ;;
			*) oneway=$(per rdma_write_one_way_sum_ns rdma_write_one_way_samples) ;;
			esac
			printf '%-12s %-6s %-9s %8s %8s %8s %8s\n' "$tool" "$s" "$1" \
				"$(t_typical "$s" /tmp/"$1-$tool-$s".out)" \
				"$oneway" "$(per bar2_writes wqes_bf wqes_dma)" "$(per sq_dma_reads wqes_bf wqes_dma)"
		done
	done
}

rdma_setup
mkdir -p /tmp/results
out=/tmp/results/post-cost-$CLOCK.txt
port_active $DEV 300 || { echo "# $DEV: no active port"; exit 1; }
{
	echo "# post-cost: ibv_post_send() of an RDMA write, $(uname -m), guest clock: $CLOCK"
	echo "# (icount: instructions, QEMU -icount shift=0; wall: TCG's wall time in ns, the"
	echo "# emulator's, not an adapter's). Median of $N posts; the analyzer's counts per post."
	echo "# mainline = Debian's libmlx4 over mainline mlx4_ib; libmlx4 = the same over mlx4_bf0"
	echo "# (x86: its stores to the BlueFlame page; s390x without MIO: one s390_pci_mmio_write()"
	echo "# system call per copy); qp_post = the patched libmlx4 through our QP_POST method;"
	echo "# doorbell = mlx4_bf0 with ib_blueflame=0. p2w_ns, 1way_ns: the model's PCIe-clock"
	echo "# post-to-wire and one-way latency (RDMA write landed) per post it timed."
	[ "$(uname -m)" = s390x ] &&
		echo "# CPU features: $(grep -m1 -o 'pcimio' /proc/cpuinfo || echo 'no pcimio: libmlx4 stores by system call')"
	printf '%-6s %-9s %8s %8s %8s %8s %8s %8s\n' "#bytes" column "$CLOCK" bar2_wr bar2_B wqe_dma \
		p2w_ns 1way_ns
} >$out
pt=/tmp/results/post-cost-perftest.txt
if [ "$CLOCK" = wall ]; then
	{
		echo "# perftest, $N iterations, $(uname -m): t_typical (TCG's wall time, usec), the model's"
		echo "# one-way latency per SEND delivered (ib_send_lat) or RDMA write landed (ib_write_lat),"
		echo "# BAR2 writes and WQE DMA reads per WQE executed; columns as in post-cost-wall.txt"
		printf '%-12s %-6s %-9s %8s %8s %8s %8s\n' "#tool" bytes column t_typ_us 1way_ns bar2_wr wqe_dma
	} >$pt
fi
# Both tables, column by column: NAME, device, ibv_post_cost, perftest's
# directory prefix, the environment.
columns() { # name device program prefix [env]
	column "$1" "$2" "$3" "$5" >>$out || return 1
	[ "$CLOCK" = wall ] || return 0
	perftest_column "$1" "$2" "$4" "$5" >>$pt
}
if [ -e /sys/class/infiniband/mlx4_0 ]; then
	port_active mlx4_0 300 || { echo "# mlx4_0: no active port"; exit 1; }
	columns mainline mlx4_0 ibv_post_cost "" || exit 1
fi
columns libmlx4 $DEV ibv_post_cost "" || exit 1
columns qp_post $DEV ibv_post_cost_qp ./qp-post/ MLX4_KERNEL_BF=1 || exit 1
rmmod mlx4_bf && insmod $KO $MODPARAMS ib_blueflame=0 && port_active $DEV 300 ||
	{ echo "# reload with ib_blueflame=0 failed"; exit 1; }
columns doorbell $DEV ibv_post_cost "" || exit 1
rmmod mlx4_bf && insmod $KO $MODPARAMS && port_active $DEV 300 ||
	{ echo "# reload without ib_blueflame=0 failed"; exit 1; }
cat $out
[ "$CLOCK" = wall ] && cat $pt
exit 0
