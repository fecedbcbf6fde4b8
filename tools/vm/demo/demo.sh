#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The `make run` demo, inside the guest: what the driver found, then a few
# posts, and on the device model (make run's default) the adapter's view
# of them, printed by the host from the analyzer trace afterwards. The
# latency sweep's wall clock goes back to the host in /tmp/results: under
# emulation it times the emulator, so the host prints it only beside what
# the adapter saw of the same posts, with a caption.
set -e
echo "== probe"
dmesg | grep 'mlx4_bf ' || true
ls /sys/class/infiniband
# The helper on the RDMA device: verbs objects through libibverbs, each
# WQE built in its QP's send queue and posted through QP_POST.
DEV=mlx4_bf0
if [ -x /work/mlx4-bf ]; then
	echo "== mlx4-bf info ($DEV)"
	/work/mlx4-bf --device $DEV info
	echo "== mlx4-bf post (RDMA write, 100 bytes inline, through QP_POST): BlueFlame"
	/work/mlx4-bf --device $DEV post --size 100 --hexdump
	echo "== mlx4-bf post (the same WQE): doorbell"
	/work/mlx4-bf --device $DEV post --size 100 --force-doorbell
	echo "== mlx4-bf lat (4, 72, 140, 208 bytes, each path; shown after the boot)"
	mkdir -p /tmp/results
	# Its tables go to the data files, its stderr only on failure.
	/work/mlx4-bf --device $DEV lat --min 4 --max 208 --step 68 --iters 200 \
		--out /tmp/results/lat.dat >/dev/null 2>/tmp/lat.err ||
		{ cat /tmp/lat.err; exit 1; }
else
	echo "== BlueFlame posts checked by the analyzer"
	/work/selftests/mlx4_bf_qp_post_test
fi
