#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# make post-cost (issue 38): what one ibv_post_send() of an RDMA write to
# itself costs over our RDMA device, mlx4_bf0, in three ways, under QEMU's
# -icount shift=0 (the guest clock counts instructions): libmlx4 as Debian
# builds it (its own BlueFlame copy: on x86 stores to the mapped page, on
# s390x without MIO one s390_pci_mmio_write() system call per copy), the
# patched libmlx4 posting through our QP_POST method (MLX4_KERNEL_BF=1),
# and BlueFlame off (the module reloaded with ib_blueflame=0: libmlx4 rings
# the doorbell). Per size: the median of ibv_post_cost (the call alone),
# and the analyzer's writes to BAR2, their bytes and the WQE's DMA reads
# per post. Inline up to 208 bytes; 1024 is gathered (the doorbell in
# every column). The table goes to /tmp/results/post-cost.txt.

cd "$(dirname "$0")" || exit 1
. ./lib.sh
. /etc/mlx4-bf/env
DEV=mlx4_bf0
I=/sys/class/infiniband/$DEV
KO=/lib/modules/mlx4_bf.ko
SIZES=${SIZES:-4 64 128 208 1024}
N=300
# ibv_post_cost's warm-up posts come on top of N.
POSTS=$((N + 20))

port_active() {
	i=0
	while [ $i -lt 300 ]; do
		[ "$(cat $I/ports/1/state 2>/dev/null)" = "4: ACTIVE" ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
per_post() { # counter
	awk -v d="$(delta "$1")" -v n=$POSTS 'BEGIN { printf "%.1f", d / n }'
}

# One column: NAME, the program, its environment.
column() { # name program [env]
	for s in $SIZES; do
		snap before
		env $3 ./"$2" -d $DEV -m "$s" -M "$s" -s 1 -n $N -i 208 >/tmp/cost.out 2>&1 ||
			{ sed 's/^/# /' /tmp/cost.out; return 1; }
		snap after
		printf '%-6s %-9s %8s %8s %8s %8s\n' "$s" "$1" \
			"$(awk '/^[0-9]/ { m = $3 } END { print m }' /tmp/cost.out)" \
			"$(per_post bar2_writes)" "$(per_post bar2_bytes)" "$(per_post sq_dma_reads)"
	done
}

rdma_setup
mkdir -p /tmp/results
out=/tmp/results/post-cost.txt
port_active || { echo "# $I: no active port"; exit 1; }
{
	echo "# post-cost: ibv_post_send() of an RDMA write over $DEV, $(uname -m), median guest"
	echo "# instructions of $N posts (QEMU -icount shift=0) and the analyzer's counts per post."
	echo "# libmlx4 = Debian's libmlx4 (x86: its stores to the BlueFlame page; s390x without MIO:"
	echo "# one s390_pci_mmio_write() system call per copy); qp_post = the patched libmlx4"
	echo "# through our QP_POST method; doorbell = ib_blueflame=0 (no BlueFlame register)."
	[ "$(uname -m)" = s390x ] &&
		echo "# CPU features: $(grep -m1 -o 'pcimio' /proc/cpuinfo || echo 'no pcimio: libmlx4 stores by system call')"
	printf '%-6s %-9s %8s %8s %8s %8s\n' "#bytes" column insns bar2_wr bar2_B wqe_dma
} >$out
column libmlx4 ibv_post_cost >>$out || exit 1
column qp_post ibv_post_cost_qp MLX4_KERNEL_BF=1 >>$out || exit 1
rmmod mlx4_bf && insmod $KO $MODPARAMS ib_blueflame=0 && port_active ||
	{ echo "# reload with ib_blueflame=0 failed"; exit 1; }
column doorbell ibv_post_cost >>$out || exit 1
cat $out
