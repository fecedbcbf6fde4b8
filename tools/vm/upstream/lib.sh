#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# What the guest scripts of the RDMA boots share (upstream.sh, versus.sh,
# and tools/vm/provider's): mlx4_core's parameters, rdma-core's files, the
# adapter's PCI function, KTAP results, waiting for a device's port, a
# server and client pair, and the analyzer's counters before and after a
# run. Sourced, from this directory.

# msi_x=2: one completion EQ; log_num_mgm_entry_size=7: 1 MiB of MCG ICM;
# internal_err_reset=0: a command timeout fails the probe, no reset loop.
CORE_PARAMS="debug_level=1 msi_x=2 log_num_mgm_entry_size=7 internal_err_reset=0"

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
	sed 's/^/# client: /' /tmp/"$1".out | tail -n 8
	sed 's/^/# server: /' /tmp/"$1".server | tail -n 8
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
