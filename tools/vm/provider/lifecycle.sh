# SPDX-License-Identifier: GPL-2.0
#
# The device's life around its users, sourced by provider.sh: processes
# that exit without cleaning up or are killed in the middle of a run, and
# the adapter unbound while a run goes on. Each function prints what it
# saw as "#" lines and returns 0 if it went as it must.

# Seconds a process may take to end once its device is gone.
GONE_WITHIN=20

# ends_within SECONDS PID: 0 if PID ends within SECONDS; else it is killed.
ends_within() {
	i=0
	while kill -0 "$2" 2>/dev/null; do
		if [ $i -ge $(($1 * 10)) ]; then
			kill -9 "$2"
			return 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
	return 0
}

# Waits (at most 30 s) until the model has delivered COUNT more SENDs than
# at the last `snap before`: the run is in its steady state.
traffic_flows() { # count
	i=0
	while [ $i -lt 60 ]; do
		snap after
		[ "$(delta deliveries)" -ge "$1" ] && return 0
		sleep 0.5
		i=$((i + 1))
	done
	return 1
}

# ibv_rc_pingpong's server and client for a long run, in the background:
# their PIDs in SPID and CPID, their output in /tmp/NAME.server and .out.
long_pingpong() { # name [-e]
	ibv_rc_pingpong -d $DEV -i 1 -n 1000000 -s 64 $2 >/tmp/"$1".server 2>&1 &
	SPID=$!
	sleep 1
	ibv_rc_pingpong -d $DEV -i 1 -n 1000000 -s 64 $2 127.0.0.1 >/tmp/"$1".out 2>&1 &
	CPID=$!
}

# Both ends of a ping-pong killed with SIGKILL in the middle of the run.
kill_mid_run() {
	snap before
	long_pingpong killed
	traffic_flows 40 || echo "# no SENDs delivered within 30 s"
	echo "# killing the server and client after $(delta deliveries) deliveries"
	kill -9 $SPID $CPID
	# The shell's own "Killed" lines are no result.
	{ wait $SPID; wait $CPID; } 2>/dev/null
}

# The adapter unbound while a ping-pong sleeping on completion events runs
# and ibv_hold -f waits for the device to go. The unbind returns within
# 60 s and takes mlx4_bf0 away; then each process ends within GONE_WITHIN
# seconds: the ping-pong's ends with an error (its completion channel
# fails), ibv_hold with 0 (IBV_EVENT_DEVICE_FATAL, then EIO for a new
# object and every object destroyed). Sets UNBOUND (0 if the unbind went
# as it must) and ENDED (0 if the processes did). (QP_POST failing with EIO
# after an unbind is mlx4_bf_qp_unbind_test's.)
unbind_while_running() {
	snap before
	long_pingpong unbind -e
	./ibv_hold -d $DEV -f -t 60 >/tmp/hold.out 2>&1 &
	hpid=$!
	traffic_flows 40 || echo "# no SENDs delivered within 30 s"
	wait_for_line ready /tmp/hold.out || echo "# ibv_hold is not ready: $(tr '\n' '|' </tmp/hold.out)"
	echo "# unbinding $BDF after $(delta deliveries) deliveries"
	timeout 60 sh -c "echo $BDF >$DRV/unbind"
	UNBOUND=$?
	[ $UNBOUND = 0 ] && [ ! -e $I ] || UNBOUND=1
	ENDED=0
	for who in "server $SPID" "client $CPID" "ibv_hold $hpid"; do
		set -- $who
		if ends_within $GONE_WITHIN "$2"; then
			wait "$2"
			rc=$?
		else
			echo "# $1 still running $GONE_WITHIN s after the unbind: killed"
			rc=hung
		fi
		echo "# $1 exited with $rc"
		case $1:$rc in
		ibv_hold:0) ;;
		ibv_hold:*|*:0|*:hung) ENDED=1 ;;
		esac
	done
	sed 's/^/# server: /' /tmp/unbind.server | tail -n 3
	sed 's/^/# client: /' /tmp/unbind.out | tail -n 3
	sed 's/^/# /' /tmp/hold.out
}

wait_for_line() { # text file
	i=0
	while [ $i -lt 300 ]; do
		grep -q "^$1\$" "$2" && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
