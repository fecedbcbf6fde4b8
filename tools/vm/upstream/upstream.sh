#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The upstream boot (issue 23): unmodified mainline mlx4_core and mlx4_ib
# against the device model in strict firmware mode, reported as KTAP. The
# model's identity comes from tools/mlx4-model/src/firmware (caps.rs: the
# GUIDs, 2.42.5000; mad.rs: LID 1). mlx4_bf, loaded by /init, binds the
# adapter first; it is unbound (its teardown: UNMAP_FA) before mlx4_core
# takes it.

cd "$(dirname "$0")" || exit 1
. ./lib.sh
NODE_GUID=0002:c903:00b1:0000
LID=0x1
I=/sys/class/infiniband/mlx4_0


rdma_setup
mkdir -p /tmp/results

# perftest: server and client of TOOL in the guest for SIZE bytes; the
# client's table goes to results/perftest-TOOL.txt. Sizes up to
# INLINE_MAX are sent inline and fit a BlueFlame half: libmlx4 writes
# them to the BlueFlame page, and the adapter reads no WQE by DMA; a larger
# one has a data segment: the send doorbell, and the WQE read by DMA.
ITERS=200
INLINE_MAX=208
perftest() { # tool size
	args="-d mlx4_0 -i 1 -F -s $2 -n $ITERS"
	snap before
	server_client "$1-$2" "$1 $args" "$1 $args 127.0.0.1"
	rc=$?
	snap after
	grep -E '^ *#bytes|^ *[0-9]+ +[0-9]+ ' /tmp/"$1-$2".out >>/tmp/results/perftest-"$1".txt
	why="bf $(delta wqes_bf), dma $(delta wqes_dma), doorbells $(delta send_doorbells)"
	why="$why, WQE DMA reads $(delta sq_dma_reads), fetch-and-adds $(delta atomics_fetch_add)"
	why="$why, protocol errors $(delta protocol_errors)"
	if [ $rc = 0 ]; then
		[ "$(delta protocol_errors)" = 0 ] || rc=1
		if [ "$1" = ib_atomic_lat ]; then
			# The client's fetch-and-adds: they gather (the old
			# value lands in a data segment), so by doorbell.
			[ "$(delta wqes_bf)" = 0 ] && [ "$(delta send_doorbells)" -ge $ITERS ] &&
				[ "$(delta atomics_fetch_add)" -ge $ITERS ] || rc=1
		elif [ "$2" -le $INLINE_MAX ]; then
			[ "$(delta sq_dma_reads)" = 0 ] && [ "$(delta wqes_bf)" -ge $((2 * ITERS)) ] || rc=1
		else
			[ "$(delta send_doorbells)" -ge $((2 * ITERS)) ] && [ "$(delta sq_dma_reads)" -gt 0 ] || rc=1
		fi
	fi
	echo "# $1 $2 bytes: $why"
	return $rc
}

# s390x without the PCI MIO instructions (QEMU has none): libmlx4 must post
# through the s390_pci_mmio_write system call (rdma-core util/mmio.h and
# util/mmio.c choose it when AT_HWCAP lacks HWCAP_S390_PCI_MIO), one call
# per BlueFlame copy or doorbell. Both sides of an ib_write_lat run under
# syscount (the calls counted by the kernel's syscall-entry stops), the
# analyzer's counters around it: the calls per post, and what reached BAR2.
per() { # count posts
	awk -v c="$1" -v p="$2" 'BEGIN { printf "%.2f", c / p }'
}
mmio_syscalls() {
	features=$(sed -n 's/^features[[:space:]]*: //p' /proc/cpuinfo | head -n1)
	echo "# cpu features: $features"
	args="-d mlx4_0 -i 1 -F -s 64 -n $ITERS"
	snap before
	# Traced, the server takes longer to listen.
	SERVER_WAIT=8 server_client mmio-syscalls "./syscount -o /tmp/sc.server ib_write_lat $args" \
		"./syscount -o /tmp/sc.client ib_write_lat $args 127.0.0.1"
	rc=$?
	snap after
	for side in client server; do
		calls=$(awk '$3 == "s390_pci_mmio_write" { print $2 }' /tmp/sc.$side)
		echo "# ib_write_lat 64 bytes, $side: ${calls:-0} s390_pci_mmio_write calls for $ITERS posts," \
			"$(awk '$1 == "total" { print $2 }' /tmp/sc.$side) system calls in all"
		# One per post, and a few outside the loop at most.
		[ "${calls:-0}" -ge $ITERS ] && [ "${calls:-0}" -le $((ITERS + ITERS / 10)) ] || rc=1
	done
	posts=$((2 * ITERS))
	echo "# the adapter, per post ($posts): $(per "$(delta bar2_writes)" $posts) BAR2 writes," \
		"$(per "$(delta bar2_bytes)" $posts) bytes, $(per "$(delta wqes_bf)" $posts) WQEs from" \
		"BlueFlame, $(per "$(delta sq_dma_reads)" $posts) WQE DMA reads"
	case " $features " in *" pcimio "*) rc=1 ;; esac
	[ "$(delta protocol_errors)" = 0 ] && [ "$(delta wqes_bf)" -ge $((2 * ITERS)) ] || rc=1
	return $rc
}

S390=
[ "$(uname -m)" = s390x ] && S390=1
echo "KTAP version 1"
echo "1..$((26 + RDMA_TOOL_RESULTS + ${S390:-0}))"
[ -e /sys/bus/pci/drivers/mlx4_bf/"$BDF" ] && echo "$BDF" >/sys/bus/pci/drivers/mlx4_bf/unbind
# The RDMA core and ib_uverbs are built in (configs/): only mlx4 is a module.
# shellcheck disable=SC2086
insmod ./mlx4_core.ko $CORE_PARAMS
wait_for /sys/bus/pci/drivers/mlx4_core/"$BDF"
result $? mlx4_core_probe "device $BDF not bound to mlx4_core"
insmod ./mlx4_ib.ko
wait_for $I
result $? mlx4_ib_registers_mlx4_0 "no $I"
# What mainline said at its first probe, and its interrupts (MSI-X; on
# s390x through zPCI's adapter interrupts).
dmesg | grep -e 'mlx4_core' -e 'mlx4_ib' | head -n 40 | sed 's/^/# /'
grep -e mlx4 -e 'PCI-MSI' /proc/interrupts | sed 's/^/# /'
port_active mlx4_0
result $? port1_active_linkup "state '$(cat $I/ports/1/state 2>&1)', phys_state '$(cat $I/ports/1/phys_state 2>&1)'"
[ "$(cat $I/node_guid 2>&1)" = $NODE_GUID ] && [ "$(cat $I/ports/1/lid 2>&1)" = $LID ]
result $? guid_and_lid_as_the_model_reports "node_guid $(cat $I/node_guid 2>&1), lid $(cat $I/ports/1/lid 2>&1)"
[ "$(cat $I/fw_ver 2>&1)" = 2.42.5000 ] && [ "$(cat $I/hca_type 2>&1)" = MT4099 ]
result $? fw_ver_and_hca_type "fw_ver $(cat $I/fw_ver 2>&1), hca_type $(cat $I/hca_type 2>&1)"
echo "$BDF" >/sys/bus/pci/drivers/mlx4_core/unbind
gone=1
[ -e $I ] || gone=0
echo "$BDF" >/sys/bus/pci/drivers/mlx4_core/bind
[ $gone = 0 ] && port_active mlx4_0
result $? unbind_and_bind_again "mlx4_0 still there after unbind, or not ACTIVE after bind"
rmmod mlx4_ib && rmmod mlx4_core && [ ! -e $I ] &&
	insmod ./mlx4_core.ko $CORE_PARAMS && insmod ./mlx4_ib.ko && port_active mlx4_0
result $? unload_and_reload "rmmod/insmod of mlx4_ib and mlx4_core"
out=$(ibv_devinfo -d mlx4_0 -i 1 2>&1)
echo "$out" | grep -q 'hca_id:[[:space:]]*mlx4_0' &&
	echo "$out" | grep -q 'state:[[:space:]]*PORT_ACTIVE' &&
	echo "$out" | grep -q 'port_lid:[[:space:]]*1$'
result $? ibv_devinfo_mlx4_0_port1_active "$(echo "$out" | tr '\n' '|' | cut -c1-300)"
identity_check mlx4_0
result $? sysfs_hca_type_hw_rev_board_id "see the line above"
pma_check mlx4_0
result $? sysfs_pma_counters_count_a_pingpong "see the line above"
# A CQ per completion vector: mainline's comp EQs, one interrupt each
# ("mlx4-N@..."), as many as CPUs and the model's EQs allow.
./ibv_comp_vectors -d mlx4_0 -p mlx4- -m "$(comp_vectors_wanted)" >/tmp/comp.out 2>&1
rc=$?
sed 's/^/    /' /tmp/comp.out
result $rc cq_events_on_each_completion_vector "see the lines above"
# Debian's rdma tool over mlx4_ib: the device, its port, a live QP's
# resources, the port's counters (lib.sh; skipped on s390x).
rdma_tool_checks mlx4_0
for run in "rc 64" "rc 4096" "uc 4096" "ud 1024" "srq 1024"; do
	# shellcheck disable=SC2086 # transport and size
	set -- $run
	snap before
	server_client $1_pingpong "ibv_$1_pingpong -d mlx4_0 -i 1 -n 20 -s $2" \
		"ibv_$1_pingpong -d mlx4_0 -i 1 -n 20 -s $2 127.0.0.1"
	rc=$?
	snap after
	# 20 round trips: 40 SENDs delivered, whatever else ran.
	[ "$(delta protocol_errors)" = 0 ] && [ "$(delta deliveries)" -ge 40 ] || rc=1
	# ibv_srq_pingpong's receives are its SRQ's WQEs.
	[ "$1" != srq ] || [ "$(delta srq_wqes)" -ge 40 ] || rc=1
	result $rc ibv_$1_pingpong_size_$2 "deliveries $(delta deliveries), SRQ WQEs $(delta srq_wqes), protocol errors $(delta protocol_errors)"
done
for tool in ib_send_lat ib_write_lat; do
	for size in 4 64 $INLINE_MAX 1024; do
		perftest $tool $size
		result $? ${tool}_size_$size "see the lines above"
	done
done
# An atomic's size is its operand's, 8 bytes (perftest refuses others).
perftest ib_atomic_lat 8
result $? ib_atomic_lat_size_8 "see the lines above"
if [ -n "$S390" ]; then
	mmio_syscalls
	result $? libmlx4_posts_by_s390_pci_mmio_write "see the lines above"
fi
# mlx4_bf's lines are its own boot's; mlx4_core's debug line naming the
# catastrophic error buffer is no error.
bad=$(dmesg | grep -v -e 'mlx4_bf' -e 'Catastrophic error buffer' |
	grep -e 'WARNING:' -e 'Call Trace' -e 'BUG:' -e 'mlx4.*[Ff]ail' \
	-e 'mlx4.*[Ee]rror' -e 'mlx4.*[Aa]bort')
[ -z "$bad" ]
result $? no_error_or_warn_in_the_log "$(echo "$bad" | head -n 5 | tr '\n' '|')"
exit $failed
