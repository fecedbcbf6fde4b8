#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The provider boot (issue 36): our driver's RDMA device, mlx4_bf0, under
# unmodified rdma-core (libibverbs, libmlx4) and perftest, reported as KTAP,
# with the model's analyzer counters around each run (tools/vm/upstream/
# upstream.sh does the same for mainline mlx4_ib); then the QP_POST method
# (issue 38, qp_post.sh: perftest and the helper posting through it; the
# method's own rules are the kselftests'). The model's identity
# comes from tools/mlx4-model/src/firmware (caps.rs: the GUIDs, 2.42.5000;
# mad.rs: LID 1). mlx4_bf is loaded by /init and has bound the adapter.
#
# What a run leaves is read from the device's debugfs counters (contexts:
# UARs in use, mrs), the kernel's pinned pages (/proc/vmstat: pins taken
# less pins released, ib_umem's and the driver's) and the model's gauges
# (MPTs, EQs + CQs, QPs the device holds), each against its value before
# the first run.

cd "$(dirname "$0")" || exit 1
. ./lib.sh
# MODPARAMS: the module's parameters of this boot, for the reload.
. /etc/mlx4-bf/env
NODE_GUID=0002:c903:00b1:0000
LID=0x1
FW=2.42.5000
DEV=mlx4_bf0
I=/sys/class/infiniband/$DEV
STATS=/sys/kernel/debug/$DEV/device/stats
DRV=/sys/bus/pci/drivers/mlx4_bf
KO=/lib/modules/mlx4_bf.ko

value() { # file name: the value of "name value" in file
	awk -v n="$2" '$1 == n { print $2 }' "$1"
}
# Pages pinned now, by anyone (ib_umem, the driver's own pins). The
# counters are per CPU and folded into /proc/vmstat lazily: stat_refresh
# folds them first.
pinned() {
	cat /proc/sys/vm/stat_refresh >/dev/null
	awk '$1 == "nr_foll_pin_acquired" { a = $2 } $1 == "nr_foll_pin_released" { r = $2 }
		END { print a - r }' /proc/vmstat
}
# What the device and the kernel hold now, one line, to compare with the
# same line at idle: debugfs contexts and MRs, pinned pages, the model's
# MPTs and queues.
held() {
	./mlx4-bf counters >/tmp/counters.held
	printf 'contexts %s mrs %s pinned %s hw_mpts %s live_eqs_cqs %s live_qps %s\n' \
		"$(value $STATS contexts)" "$(value $STATS mrs)" "$(pinned)" \
		"$(value /tmp/counters.held hw_mpts)" "$(value /tmp/counters.held live_eqs_cqs)" \
		"$(value /tmp/counters.held live_qps)"
}
# Every process of the run is gone: what is held is what was held at idle.
nothing_left() { # name
	now=$(held)
	[ "$now" = "$IDLE" ]
	result $? "$1" "held now: $now; at idle: $IDLE"
}
# The kernel log's problems since line $1: errors, WARNs, BUGs, lockdep;
# not the driver's report of a failure a test made on purpose (a line of
# $EXPECTED_LOG).
EXPECTED_LOG=/tmp/expected-log
: >$EXPECTED_LOG
log_problems() { # from-line
	dmesg | tail -n +"$1" | grep -e 'WARNING:' -e 'Call Trace' -e 'BUG:' \
		-e 'circular locking' -e 'lock state' -e 'mlx4_bf.*[Ff]ail' \
		-e 'mlx4_bf.*[Ee]rror' -e 'infiniband.*[Ee]rror' |
		grep -v -f $EXPECTED_LOG | head -n 5 | tr '\n' '|'
}

rdma_setup
mkdir -p /tmp/results

# The fault walk (fault_walk.sh, last): on the debug kernel only.
WALK=0
[ "${FAULT_WALK:-}" = 1 ] && WALK=1
echo "KTAP version 1"
echo "1..$((56 + RDMA_TOOL_RESULTS + WALK))"
# The RDMA core and ib_uverbs are built in (configs/).
wait_for $I && [ "$(basename "$(readlink $I/device/driver)")" = mlx4_bf ] &&
	[ "$(basename "$(readlink $I/device)")" = "$BDF" ]
result $? mlx4_bf0_registered_by_mlx4_bf "$I: device $(readlink $I/device), driver $(readlink $I/device/driver)"
port_active $DEV
result $? port1_active_linkup "state '$(cat $I/ports/1/state 2>&1)', phys_state '$(cat $I/ports/1/phys_state 2>&1)'"
[ "$(cat $I/node_guid 2>&1)" = $NODE_GUID ] && [ "$(cat $I/ports/1/lid 2>&1)" = $LID ]
result $? guid_and_lid_as_the_model_reports "node_guid $(cat $I/node_guid 2>&1), lid $(cat $I/ports/1/lid 2>&1)"
[ "$(cat $I/fw_ver 2>&1)" = $FW ] && [ "$(cat $I/node_type 2>&1)" = "1: CA" ]
result $? fw_ver_and_node_type "fw_ver $(cat $I/fw_ver 2>&1), node_type $(cat $I/node_type 2>&1)"
IDLE=$(held)
echo "# at idle: $IDLE"

out=$(ibv_devices 2>&1)
echo "$out" | grep -q "^[[:space:]]*$DEV[[:space:]]*$(echo $NODE_GUID | tr -d :)\$"
result $? ibv_devices_lists_mlx4_bf0 "$(echo "$out" | tr '\n' '|')"
out=$(ibv_devinfo -v -d $DEV -i 1 2>&1)
missing=
for want in "hca_id:[[:space:]]*$DEV\$" "fw_ver:[[:space:]]*$FW\$" \
	"vendor_id:[[:space:]]*0x02c9\$" "vendor_part_id:[[:space:]]*4099\$" \
	"state:[[:space:]]*PORT_ACTIVE" "port_lid:[[:space:]]*1\$"; do
	echo "$out" | grep -q "$want" || missing="$missing '$want'"
done
[ -z "$missing" ]
result $? ibv_devinfo_v_vendor_part_fw_port "no line matching$missing in: $(echo "$out" | head -n 12 | tr '\n' '|')"
identity_check $DEV
result $? sysfs_hca_type_hw_rev_board_id_as_mlx4_ib "see the line above"
pma_check $DEV
result $? sysfs_pma_counters_count_a_pingpong "see the line above"
# Debian's rdma tool over mlx4_bf0, as over mainline mlx4_ib (upstream.sh):
# the device, its port, a live QP's resources through the RDMA core's
# netlink (our query_qp answers for the QP), the port's counters (lib.sh;
# skipped on s390x). The QP's process is killed: what it held goes with
# it, before the runs below.
rdma_tool_checks $DEV

. ./runs.sh
for events in "" -e; do
	for size in 64 4096; do
		pingpong "$size" $events
		result $? "ibv_rc_pingpong${events:+_events}_size_$size" "see the lines above"
	done
done
pingpong 4096 "" uc
result $? ibv_uc_pingpong_size_4096 "see the lines above"
pingpong 1024 "" ud
result $? ibv_ud_pingpong_size_1024 "see the lines above"
# 16 RC QPs receiving from one SRQ (ibv_srq_pingpong's default).
pingpong 1024 "" srq
result $? ibv_srq_pingpong_size_1024 "see the lines above"
for tool in ib_send_lat ib_write_lat ib_read_lat; do
	for size in 4 64 $INLINE_MAX 1024; do
		perftest $tool $size
		result $? "${tool}_size_$size" "see the lines above"
	done
done
# An atomic's size is its operand's, 8 bytes (perftest refuses others).
perftest ib_atomic_lat 8
result $? ib_atomic_lat_size_8 "see the lines above"
for tool in ib_send_bw ib_write_bw; do
	bandwidth $tool
	result $? "${tool}_size_4096" "see the lines above"
done
bandwidth ib_write_bw 64
result $? ib_write_bw_qps_64 "see the lines above"
# UD: a message is one packet, at most the path MTU.
bandwidth ib_send_bw 1 2048 "-c UD"
result $? ib_send_bw_ud_size_2048 "see the lines above"
# Four QPs a side receiving from one SRQ a side.
bandwidth ib_send_bw 4 4096 "--use-srq"
result $? ib_send_bw_srq_qps_4 "see the lines above"

# A CQ per completion vector: an EQ and an MSI-X vector each, as mainline
# makes them (upstream.sh), the interrupt named by the vector.
./ibv_comp_vectors -d $DEV -p mlx4_bf-comp -e -m "$(comp_vectors_wanted)" >/tmp/comp.out 2>&1
rc=$?
sed 's/^/    /' /tmp/comp.out
result $rc cq_events_on_each_completion_vector "see the lines above"

# Refusals: one result per request (nested), and none of them a WARN.
from=$(($(dmesg | wc -l) + 1))
./ibv_refusals -d $DEV >/tmp/refusals.out 2>&1
rc=$?
sed 's/^/    /' /tmp/refusals.out
result $rc ibv_refusals "see the subtests above"
bad=$(log_problems $from)
[ -z "$bad" ]
result $? refusals_leave_no_warn_in_the_log "$bad"

. ./qp_post.sh
qp_post_perftest ib_send_lat 64
result $? ib_send_lat_size_64_through_qp_post "see the lines above"
qp_post_perftest ib_write_lat $INLINE_MAX
result $? ib_write_lat_size_${INLINE_MAX}_through_qp_post "see the lines above"
helper_posts
result $? mlx4_bf_helper_posts_through_qp_post "see the lines above"
hw_counters_agree
result $? mlx4_bf_hw_counters_are_the_post_counters "see the lines above"

. ./lifecycle.sh
out=$(./ibv_hold -d $DEV -x 2>&1)
result $? ibv_hold_exits_without_cleaning_up "$out"
nothing_left exit_without_cleanup_leaves_nothing
kill_mid_run
nothing_left sigkill_mid_run_leaves_nothing

# A CQ whose HW2SW_CQ fails is still the adapter's: its ring and doorbell
# record stay pinned (the adapter may write them) until unbind has reset the
# adapter, and are released then, not before and not never (issue 43). The
# model fails the command once (CMD_FAULT); ibv_hold -x leaves its objects
# for the core to destroy at exit.
./mlx4-bf counters --bdf "$BDF" --fail-command 0x17 >/dev/null
from=$(($(dmesg | wc -l) + 1))
echo 'mlx4_bf .*: HW2SW_CQ (in_mod 0x[0-9a-f]*, op_mod 1) failed: status 0x01 ' >>$EXPECTED_LOG
echo 'mlx4_bf: released [0-9]* umems kept by failed destroys' >>$EXPECTED_LOG
out=$(./ibv_hold -d $DEV -x 2>&1)
./mlx4-bf counters --bdf "$BDF" >/tmp/counters.kept
KEPT_PINNED=$(pinned)
idle_pinned=$(echo "$IDLE" | awk '{ print $6 }')
fired=$(value /tmp/counters.kept cmd_faults_fired)
bad=$(log_problems $from)
[ "$fired" = 1 ] && [ "$KEPT_PINNED" -gt "$idle_pinned" ] && [ -z "$bad" ]
result $? failed_hw2sw_cq_keeps_the_cq_pinned "ibv_hold -x: $out; faults fired $fired, pinned $KEPT_PINNED (at idle $idle_pinned), live_eqs_cqs $(value /tmp/counters.kept live_eqs_cqs); log: $bad"
unbind_from=$(($(dmesg | wc -l) + 1))

unbind_while_running
result $UNBOUND unbind_while_ibv_rc_pingpong_runs "the unbind failed or took over 60 s, or $I is still there"
result $ENDED applications_see_the_device_go "see the lines above"
# The device is torn down: the model holds nothing of the host's.
./mlx4-bf counters --bdf "$BDF" >/tmp/counters.unbound
now="pinned $(pinned) hw_mpts $(value /tmp/counters.unbound hw_mpts) live_eqs_cqs $(value /tmp/counters.unbound live_eqs_cqs) live_qps $(value /tmp/counters.unbound live_qps) fw_phase $(value /tmp/counters.unbound fw_phase)"
[ "$now" = "pinned $(echo "$IDLE" | awk '{ print $6 }') hw_mpts 0 live_eqs_cqs 0 live_qps 0 fw_phase 0" ]
result $? nothing_held_after_unbind "now: $now; pinned at idle: $(echo "$IDLE" | awk '{ print $6 }')"
released=$(dmesg | tail -n +"$unbind_from" | grep -c 'released [0-9]* umems kept by failed destroys')
[ "$(pinned)" = "$idle_pinned" ] && [ "$released" = 1 ]
result $? failed_hw2sw_cq_leaves_no_pinned_page_after_unbind "pinned $(pinned) (at idle $idle_pinned, $KEPT_PINNED before the unbind); release messages at unbind: $released"
timeout 60 rmmod mlx4_bf && [ ! -e /sys/module/mlx4_bf ]
result $? rmmod_mlx4_bf "rmmod failed, took over 60 s, or the module is still there"
# A module whose QP_POST declaration (Rust, ib/post.rs) says less than its
# description (C, ib/methods.c) gets no RDMA device: the layer checks the
# two before registering and names the attribute; the adapter stays bound
# to mlx4_bf (probe went on without the RDMA device).
from=$(($(dmesg | wc -l) + 1))
echo 'mlx4_bf .*: no RDMA device: Error(22)' >>$EXPECTED_LOG
# shellcheck disable=SC2086
insmod ./mlx4_bf_mismatch.ko $MODPARAMS && wait_for $DRV/$BDF
log=$(dmesg | tail -n +"$from")
echo "$log" | grep -q 'uverbs method 0x1000: attribute 0x1000 is declared PtrIn' &&
	echo "$log" | grep -q 'no RDMA device' && [ ! -e $I ] && [ -e $DRV/$BDF ]
result $? method_declaration_mismatch_refused_at_registration "$I $([ -e $I ] || echo not) there, $BDF $([ -e $DRV/$BDF ] || echo not) bound to mlx4_bf; log: $(echo "$log" | grep -e uverbs -e 'RDMA device' | tr '\n' '|')"
timeout 60 rmmod mlx4_bf
# A probe that fails half-way: the model fails the second SW2HW_EQ, the
# first completion EQ's, once the async EQ is in the adapter and mapped.
# The adapter is given back whole (no EQ, CQ or firmware phase left in the
# model), nothing is bound, and the next probe binds as before.
./mlx4-bf counters --bdf "$BDF" >/tmp/counters.before-eq-fault
./mlx4-bf counters --bdf "$BDF" --fail-command 0x13 --skip 1 >/dev/null
from=$(($(dmesg | wc -l) + 1))
echo 'mlx4_bf .*: SW2HW_EQ (in_mod 0x[0-9a-f]*, op_mod 0) failed: status 0x01 ' >>$EXPECTED_LOG
echo 'mlx4_bf .*: probe with driver mlx4_bf failed with error -[0-9]*' >>$EXPECTED_LOG
# shellcheck disable=SC2086
insmod $KO $MODPARAMS
./mlx4-bf counters --bdf "$BDF" >/tmp/counters.eq-fault
fired=$(($(value /tmp/counters.eq-fault cmd_faults_fired) - $(value /tmp/counters.before-eq-fault cmd_faults_fired)))
now="bound $([ -e $DRV/$BDF ] && echo yes || echo no) $I $([ -e $I ] && echo there || echo absent) fired $fired live_eqs_cqs $(value /tmp/counters.eq-fault live_eqs_cqs) fw_phase $(value /tmp/counters.eq-fault fw_phase) pinned $(pinned)"
[ "$now" = "bound no $I absent fired 1 live_eqs_cqs 0 fw_phase 0 pinned $idle_pinned" ]
result $? failed_completion_eq_fails_the_probe_and_holds_nothing "$now; log: $(dmesg | tail -n +"$from" | grep mlx4_bf | tail -n 4 | tr '\n' '|')"
timeout 60 rmmod mlx4_bf
# shellcheck disable=SC2086
insmod $KO $MODPARAMS && port_active $DEV
result $? insmod_brings_mlx4_bf0_back "no ACTIVE $I after insmod"
pingpong 64
result $? ibv_rc_pingpong_after_reload "see the lines above"
nothing_left nothing_left_after_reload

./mlx4_bf_invariants >/tmp/invariants.out 2>&1
result $? suite_invariants "$(tr '\n' '|' </tmp/invariants.out)"
sed 's/^/# /' /tmp/invariants.out
bad=$(log_problems 1)
[ -z "$bad" ]
result $? no_error_or_warn_in_the_log "$bad"

# After the log's check: the walk makes the driver log its failures.
if [ $WALK = 1 ]; then
	FAULT_WALK_INDENT="    " sh ./fault_walk.sh
	result $? fault_walk "see the subtests above"
fi
exit $failed
