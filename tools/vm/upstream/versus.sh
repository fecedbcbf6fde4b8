#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# make bench's boots with two adapters (vm.py --second-adapter), each its
# own device model: /init's mlx4_bf binds both; it gives the second back
# (unbind), which mainline mlx4_core + mlx4_ib then take (driver_override),
# so that rdma-core's posts and ours run in one boot on identical adapters.
#
#   versus.sh up                 mainline on the second adapter, port ACTIVE
#   versus.sh perftest SIZE...   ib_send_lat and ib_write_lat per size, with
#                                that adapter's analyzer counters around each
#                                run: /tmp/results/perftest-versus.txt
#   versus.sh side-by-side SIZE...
#                                the same runs over both drivers: mainline
#                                (mlx4_0) and our provider (mlx4_bf0), each
#                                adapter's counters around each run and a
#                                mark in its trace at both ends:
#                                /tmp/results/perftest-side-by-side.txt;
#                                ibv_devinfo -v of both: devinfo-*.txt
#   versus.sh post-cost ARGS...  ibv_post_cost (libmlx4's post, timed as
#                                mlx4-bf userpost times ours):
#                                /tmp/results/ibv-post-cost.txt

cd "$(dirname "$0")" || exit 1
. ./lib.sh
ITERS=${PERFTEST_ITERS:-300}
# 300 iterations at the largest size while the other adapter is busy too.
SERVER_CLIENT_TIMEOUT=300

# The second ConnectX-3, taken from mlx4_bf if it holds it.
mainline_bdf() {
	[ -n "$BDF" ] || return 1
	[ -e /sys/bus/pci/drivers/mlx4_bf/"$BDF" ] && echo "$BDF" >/sys/bus/pci/drivers/mlx4_bf/unbind
	echo "$BDF"
}

up() {
	bdf=$(mainline_bdf) || { echo "versus: no adapter left for mlx4_core" >&2; return 1; }
	rdma_setup
	echo mlx4_core >/sys/bus/pci/devices/"$bdf"/driver_override
	# shellcheck disable=SC2086
	insmod ./mlx4_core.ko $CORE_PARAMS && insmod ./mlx4_ib.ko || return 1
	port_active mlx4_0 200 || { echo "versus: mlx4_0 port 1 not ACTIVE" >&2; return 1; }
	echo "versus: mainline mlx4_core + mlx4_ib on $bdf (mlx4_0), mlx4_bf on the other adapter"
}

# Per post: the analyzer's deltas divided by POSTS, and the protocol errors.
per_post() { # posts
	echo "$(delta bar2_writes) $(delta bar2_bytes) $(delta sq_dma_reads) $(delta wqes_bf) $1" |
		awk '{ printf "%.2f %.2f %.2f %.2f", $1 / $5, $2 / $5, $3 / $5, $4 / $5 }'
	echo " $(delta protocol_errors)"
}

perftest() {
	bdf=$(mainline_bdf) || return 1
	out=/tmp/results/perftest-versus.txt
	mkdir -p /tmp/results
	{
		echo "# perftest on mainline mlx4_ib + libmlx4 ($bdf), $ITERS iterations per size, wall clock under TCG"
		echo "# t_typical[usec] from the client's table; per post (both sides' posts) from the adapter's analyzer"
		echo "#tool size t_typical[usec] BAR2_wr BAR2_bytes WQE_DMA_rd BF_fraction protocol_errors"
	} >"$out"
	rm -f /tmp/results/perftest-versus-raw.txt
	for tool in ib_send_lat ib_write_lat; do
		for size in "$@"; do
			args="-d mlx4_0 -i 1 -F -s $size -n $ITERS"
			snap before "$bdf" || return 1
			server_client "$tool-$size" "$tool $args" "$tool $args 127.0.0.1"
			rc=$?
			snap after "$bdf" || return 1
			[ $rc = 0 ] || return 1
			{
				echo "==== $tool $size: client"
				cat /tmp/"$tool-$size".out
				echo "==== $tool $size: server"
				cat /tmp/"$tool-$size".server
			} >>/tmp/results/perftest-versus-raw.txt
			typical=$(t_typical "$size" /tmp/"$tool-$size".out)
			echo "$tool $size ${typical:--} $(per_post $((2 * ITERS)))" >>"$out"
		done
	done
	cat "$out"
}

# The uverbs ABI version RDMA device $1 registered (libibverbs reads it).
uverbs_abi() { # ibdev
	for u in /sys/class/infiniband_verbs/uverbs*; do
		[ "$(cat "$u/ibdev" 2>/dev/null)" = "$1" ] && { cat "$u/abi_version"; return 0; }
	done
	echo -
}

# One perftest run of TOOL at SIZE over IBDEV on BDF, between the marks
# 2 * ROW and 2 * ROW + 1 in that adapter's trace, as a row of the table.
side_run() { # row tool size driver ibdev bdf
	args="-d $5 -i 1 -F -s $3 -n $ITERS"
	./mlx4-bf counters --bdf "$6" --mark $((2 * $1)) >/tmp/counters.before || return 1
	# Its diagnostics on failure to the console, not into the table.
	server_client "$2-$3-$4" "$2 $args" "$2 $args 127.0.0.1" >&2
	rc=$?
	./mlx4-bf counters --bdf "$6" --mark $((2 * $1 + 1)) >/tmp/counters.after || return 1
	[ $rc = 0 ] || return 1
	{
		echo "==== $2 $3 over $4 ($5): client"
		cat /tmp/"$2-$3-$4".out
		echo "==== $2 $3 over $4 ($5): server"
		cat /tmp/"$2-$3-$4".server
	} >>/tmp/results/perftest-side-by-side-raw.txt
	typical=$(t_typical "$3" /tmp/"$2-$3-$4".out)
	echo "$1 $2 $3 $4 $5 $6 ${typical:--} $(delta wqes_bf) $(delta wqes_dma)" \
		"$(delta bar2_writes) $(delta bar2_bytes) $(delta sq_dma_reads)" \
		"$(delta send_doorbells) $(delta irqs) $(delta commands) $(delta protocol_errors)"
}

# The same perftest runs over mainline mlx4_ib (the second adapter) and our
# provider (the first, still mlx4_bf's), one after the other. The table has
# each run's counter deltas, not per post: tools/vm/side_by_side.py divides,
# splits the BAR2 writes into the posts' and the rest by the trace between
# the run's marks, and compares the two drivers.
side_by_side() {
	main_bdf=$(ib_bdf mlx4_0) || { echo "side-by-side: no mlx4_0 (versus.sh up first)" >&2; return 1; }
	ours_bdf=$(ib_bdf mlx4_bf0) || { echo "side-by-side: no mlx4_bf0, our provider's device" >&2; return 1; }
	out=/tmp/results/perftest-side-by-side.txt
	mkdir -p /tmp/results
	rm -f /tmp/results/perftest-side-by-side-raw.txt
	{
		echo "# perftest over mainline mlx4_ib (mlx4_0, $main_bdf) and over mlx4_bf's provider (mlx4_bf0, $ours_bdf)"
		echo "# $ITERS iterations per run; t_typical[usec] from the client's table (wall clock under TCG);"
		echo "# the adapter's analyzer counters moved by the run (both processes, set-up included);"
		echo "# run N lies between marks 2N and 2N+1 in its adapter's trace"
		echo "# uverbs ABI: mlx4_0 $(uverbs_abi mlx4_0), mlx4_bf0 $(uverbs_abi mlx4_bf0)"
		echo "#run tool size driver ibdev bdf t_typical wqes_bf wqes_dma BAR2_wr BAR2_bytes WQE_DMA_rd doorbells IRQs commands protocol_errors"
	} >"$out"
	# What each device tells libibverbs, for the host to set side by side.
	ibv_devinfo -v -d mlx4_0 >/tmp/results/devinfo-mlx4_0.txt 2>&1
	ibv_devinfo -v -d mlx4_bf0 >/tmp/results/devinfo-mlx4_bf0.txt 2>&1
	row=1
	for tool in ib_send_lat ib_write_lat; do
		for size in "$@"; do
			side_run $row "$tool" "$size" mainline mlx4_0 "$main_bdf" >>"$out" || return 1
			side_run $((row + 1)) "$tool" "$size" mlx4_bf mlx4_bf0 "$ours_bdf" >>"$out" || return 1
			row=$((row + 2))
		done
	done
	cat "$out"
}

post_cost() {
	mkdir -p /tmp/results
	./ibv_post_cost "$@" >/tmp/results/ibv-post-cost.txt || return 1
	cat /tmp/results/ibv-post-cost.txt
}

cmd=$1
shift
case $cmd in
up)        up ;;
perftest)  perftest "$@" ;;
side-by-side) side_by_side "$@" ;;
post-cost) post_cost "$@" ;;
*)         echo "usage: versus.sh up | perftest SIZE... | side-by-side SIZE... | post-cost ARGS..." >&2; exit 2 ;;
esac
