#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# What the guest scripts of the RDMA boots share (upstream.sh, versus.sh,
# and tools/vm/provider's): mlx4_core's parameters, rdma-core's files, the
# adapter's PCI function, KTAP results, waiting for a device's port, a
# server and client pair, the analyzer's counters before and after a run,
# and the checks by Debian's rdma tool. Sourced, from this directory.

# MSI-X as mlx4_core chooses (a completion EQ per CPU, as mlx4_bf does);
# log_num_mgm_entry_size=7: 1 MiB of MCG ICM; internal_err_reset=0: a
# command timeout fails the probe, no reset loop.
CORE_PARAMS="debug_level=1 log_num_mgm_entry_size=7 internal_err_reset=0"

# rdma-core's tools and perftest, static (scripts/build-rdma-core.sh).
PATH=$PWD/rdma/bin:$PATH

# The ConnectX-3's PCI function (of make bench's two, the second).
BDF=
for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/vendor")" = 0x15b3 ] && BDF=${d##*/}
done

# KTAP: one result line a test, its diagnostic before a failure's; each
# line after $KTAP_INDENT (a suite nested in another's).
n=0
failed=0
result() { # condition-status name [diagnostic]
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "${KTAP_INDENT:-}ok $n $2"
	else
		echo "${KTAP_INDENT:-}# $3"
		echo "${KTAP_INDENT:-}not ok $n $2"
		failed=1
	fi
}
# A test that cannot run here: KTAP's SKIP directive, counted apart (vm.py).
skip() { # name reason
	n=$((n + 1))
	echo "${KTAP_INDENT:-}ok $n $1 # SKIP $2"
}
wait_for() { # path [tenths of a second, 100]
	i=0
	while [ $i -lt "${2:-100}" ]; do
		[ -e "$1" ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
# The device's port 1 ACTIVE and LinkUp within the time (the port comes
# up after the device registers).
port_active() { # device [tenths of a second, 100]
	i=0
	p=/sys/class/infiniband/$1/ports/1
	while [ $i -lt "${2:-100}" ]; do
		[ "$(cat $p/state 2>/dev/null)" = "4: ACTIVE" ] &&
			[ "$(cat $p/phys_state 2>/dev/null)" = "5: LinkUp" ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# The PCI function of RDMA device $1.
ib_bdf() { # ibdev
	link=$(readlink /sys/class/infiniband/"$1"/device) || return 1
	echo "${link##*/}"
}

# perftest's t_typical for SIZE from a latency test's table in FILE.
t_typical() { # size file
	awk -v s="$1" '$1 == s && NF >= 5 { print $5 }' "$2"
}

# The loopback interface their out-of-band exchange uses (TCP on
# 127.0.0.1: a numeric address, as static glibc resolves no names).
rdma_setup() {
	ip link set lo up
}

# Server in the background, then the client SERVER_WAIT seconds later (1
# unless the caller sets it: the client does not retry its connection);
# both must succeed within SERVER_CLIENT_TIMEOUT seconds (120 unless set).
# Their output is kept in /tmp/NAME.out (client) and /tmp/NAME.server.
server_client() { # name server-cmd client-cmd
	t=${SERVER_CLIENT_TIMEOUT:-120}
	# shellcheck disable=SC2086
	timeout "$t" $2 >/tmp/"$1".server 2>&1 &
	spid=$!
	sleep "${SERVER_WAIT:-1}"
	# shellcheck disable=SC2086
	timeout "$t" $3 >/tmp/"$1".out 2>&1
	crc=$?
	wait $spid
	src=$?
	[ $crc = 0 ] && [ $src = 0 ] && return 0
	echo "# $1: client exit $crc, server exit $src"
	# Without the address lines (ibv_srq_pingpong prints 32): an error
	# goes to stderr before stdout's buffer, so it is not the last line.
	grep -v 'address:' /tmp/"$1".out | sed 's/^/# client: /' | tail -n 8
	grep -v 'address:' /tmp/"$1".server | sed 's/^/# server: /' | tail -n 8
	return 1
}

# The analyzer's counters (mlx4-bf counters [--bdf BDF]) as WHEN (before,
# after); delta NAME is how far NAME moved between the two.
snap() { # when [bdf]
	./mlx4-bf counters ${2:+--bdf "$2"} >/tmp/counters."$1"
}
delta() { # name
	awk -v n="$1" '$1 == n { v[FILENAME] = $2 }
		END { print v["/tmp/counters.after"] - v["/tmp/counters.before"] }' \
		/tmp/counters.before /tmp/counters.after
}

# What RDMA device $1 shows of the adapter in sysfs, as mlx4_ib does: the
# model's ConnectX-3 (PCI device 0x1003), NodeInfo's revision 1, the board
# id QUERY_ADAPTER gives; and ibv_devinfo's board_id line, read from there.
# The completion vectors mlx4_core makes on the model: one per CPU
# (mlx4_enable_msi_x()), as far as the 8 EQs less the 4 the firmware
# reserves, less the async EQ, allow (tools/mlx4-model/src/layout.rs).
comp_vectors_wanted() {
	cpus=$(ls -d /sys/devices/system/cpu/cpu[0-9]* | wc -l)
	echo $((cpus < 3 ? cpus : 3))
}

identity_check() { # dev
	id=$(cd /sys/class/infiniband/"$1" && echo "$(cat hca_type) $(cat hw_rev) $(cat board_id)")
	echo "# $1: hca_type hw_rev board_id: $id"
	[ "$id" = "MT4099 1 MT_1090120019" ] &&
		ibv_devinfo -d "$1" | grep -q "board_id:[[:space:]]*MT_1090120019\$"
}

# Port 1's PMA counters of RDMA device $1 as sysfs reads them (the core's
# PerfMgmt Gets through the driver's process_mad to the model's agent),
# around an ibv_rc_pingpong of 20 round trips of 64 bytes: 40 SENDs on the
# loopback port, each sent and received there, so packets and data
# (4-octet words) sent and received move by at least 40 and 40 * 64 / 4.
pma_check() { # dev
	c=/sys/class/infiniband/$1/ports/1/counters
	names="port_xmit_packets port_rcv_packets port_xmit_data port_rcv_data"
	# shellcheck disable=SC2086 # the names, each a file
	before=$(cd "$c" && cat $names | tr '\n' ' ') || return 1
	server_client pma "ibv_rc_pingpong -d $1 -i 1 -n 20 -s 64" \
		"ibv_rc_pingpong -d $1 -i 1 -n 20 -s 64 127.0.0.1" || return 1
	# shellcheck disable=SC2086
	after=$(cd "$c" && cat $names | tr '\n' ' ') || return 1
	echo "# $1 $names: before $before, after $after"
	# shellcheck disable=SC2086
	set -- $before $after
	[ $(($5 - $1)) -ge 40 ] && [ $(($6 - $2)) -ge 40 ] &&
		[ $(($7 - $3)) -ge 640 ] && [ $(($8 - $4)) -ge 640 ]
}

# Debian's rdma tool (iproute2: scripts/build-guest-debs.sh, with its own
# loader and libraries in /work/debroot) on RDMA device $1, as
# RDMA_TOOL_RESULTS results, each a SKIP where the tree is missing (a
# guest built without scripts/build-guest-debs.sh): the device and its port
# as the RDMA core's netlink reports them, and the resources of a process
# with a live QP: an ibv_rc_pingpong server has made its PD, MR, CQ and RC
# QP (moved to INIT) and waits for a client that never comes.
RDMA_TOOL=/work/debroot/bin/rdma
RDMA_TOOL_RESULTS=7
# rdma_tool NAME ARGS...: rdma ARGS, its output in /tmp/rdma-tool.NAME and
# as "#" lines, its exit status in $rc.
rdma_tool() { # name args...
	rt=$1
	shift
	$RDMA_TOOL "$@" >/tmp/rdma-tool."$rt" 2>&1
	rc=$?
	echo "# rdma $*: exit $rc"
	sed 's/^/#   /' /tmp/rdma-tool."$rt"
}
# The output of rdma_tool NAME, one line.
rdma_tool_out() { # name
	tr '\n' '|' </tmp/rdma-tool."$1"
}
rdma_tool_checks() { # device
	if [ ! -x $RDMA_TOOL ]; then
		for t in rdma_dev_show_names_the_device rdma_link_show_port1_active \
			rdma_res_show_qp_lists_the_rc_qp rdma_res_show_cq rdma_res_show_pd \
			rdma_res_show_mr rdma_statistic_answers; do
			skip $t "no $RDMA_TOOL (scripts/build-guest-debs.sh)"
		done
		return 0
	fi
	rdma_tool dev dev show "$1"
	[ $rc = 0 ] && grep -q "^[0-9]*: $1: " /tmp/rdma-tool.dev
	result $? rdma_dev_show_names_the_device "exit $rc: $(rdma_tool_out dev)"
	rdma_tool link link show "$1"/1
	# iproute2 6.15 prints "link DEV/1 subnet_prefix ... state ACTIVE ..."
	[ $rc = 0 ] && grep -q "^link $1/1 .*state ACTIVE " /tmp/rdma-tool.link
	result $? rdma_link_show_port1_active "exit $rc: $(rdma_tool_out link)"

	ibv_rc_pingpong -d "$1" -i 1 -n 1000000 >/tmp/rdma-tool.server 2>&1 &
	spid=$!
	sleep 2
	# qp takes link DEV (its every port), not dev. A slow server's QP (a
	# debug kernel) is looked for again, up to 5 s more.
	i=0
	while :; do
		$RDMA_TOOL res show qp link "$1" >/tmp/rdma-tool.qp 2>&1
		qrc=$?
		grep -q -E " type RC .*pid $spid( |\$)" /tmp/rdma-tool.qp && break
		i=$((i + 1))
		[ $i -le 5 ] && kill -0 $spid 2>/dev/null || break
		sleep 1
	done
	echo "# rdma res show qp link $1: exit $qrc"
	sed 's/^/#   /' /tmp/rdma-tool.qp
	alive=yes
	kill -0 $spid 2>/dev/null || alive="no, it left: $(rdma_tool_out server)"
	for r in cq pd mr; do
		rdma_tool $r res show $r dev "$1"
		echo $rc >/tmp/rdma-tool.$r.rc
	done
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	# The server's QP: an RC QP of its pid.
	[ $qrc = 0 ] && grep -q -E " type RC .*pid $spid( |\$)" /tmp/rdma-tool.qp
	result $? rdma_res_show_qp_lists_the_rc_qp "exit $qrc, server (pid $spid) alive: $alive; $(rdma_tool_out qp)"
	for r in cq pd mr; do
		rc=$(cat /tmp/rdma-tool.$r.rc)
		[ "$rc" = 0 ]
		result $? rdma_res_show_$r "exit $rc: $(rdma_tool_out $r)"
	done

	# The port's hardware counters if the driver has any; without them
	# the core (EINVAL) or the driver (EOPNOTSUPP) refuses: rdma's one
	# line, exit 1. Either is an answer; its output is the diagnostic.
	rdma_tool stat statistic show link "$1"/1
	[ $rc = 0 ] || { [ $rc = 1 ] && [ "$(wc -l </tmp/rdma-tool.stat)" = 1 ] &&
		grep -q -i -e 'not supported' -e 'invalid argument' /tmp/rdma-tool.stat; }
	result $? rdma_statistic_answers "exit $rc: $(rdma_tool_out stat)"
}
