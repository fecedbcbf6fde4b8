#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# make profile-post: ibv_post_send() of an inline RDMA write over mlx4_bf0
# under tools/profile/insn_profile.so, by the patched libmlx4 through our
# QP_POST method (MLX4_KERNEL_BF=1, config qp_post:BYTES) and by its own
# stores to the BlueFlame page (MLX4_KERNEL_BF=0, libmlx4:BYTES): one
# ibv_post_cost -p run per size, each one window of the plugin's, numbered
# across the boot (-W). The window lines and the module's kallsyms go to
# /tmp/results for tools/profile/report.py.

cd "$(dirname "$0")" || exit 1
. ./lib.sh
SIZES=${SIZES:-4 208}
N=${N:-300}

port_active mlx4_bf0 300 || { echo "# mlx4_bf0: no active port"; exit 1; }
mkdir -p /tmp/results
out=/tmp/results/windows.txt
: >$out
w=1
for conf in qp_post:1 libmlx4:0; do
	for s in $SIZES; do
		MLX4_KERNEL_BF=${conf#*:} ./ibv_post_cost_qp -d mlx4_bf0 -m "$s" -M "$s" -s 1 \
			-n "$N" -i 208 -p "${conf%:*}" -W $w >>$out || exit 1
		w=$((w + 1))
	done
done
cat $out
grep -e '\[mlx4_bf\]' -e ' _text$' /proc/kallsyms >/tmp/results/kallsyms.txt
