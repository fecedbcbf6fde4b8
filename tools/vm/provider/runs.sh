# SPDX-License-Identifier: GPL-2.0
#
# rdma-core's and perftest's runs over mlx4_bf0, each between two readings
# of the model's counters (snap, delta: lib.sh) and judged by them; sourced
# by provider.sh. Each function prints what it saw as "#" lines and
# returns 0 if the run is as it must be.
#
# A run's server and client are two processes: two verbs contexts, each
# with a UAR of its own and that UAR's BlueFlame page. libmlx4 writes a
# single WQE to its context's BlueFlame page if it carries its payload
# inline (SEND, RDMA WRITE of at most INLINE_MAX bytes) or is an RDMA READ
# (48 bytes whatever the size: the data segment names where the data
# lands), and the adapter reads no WQE by DMA; a larger SEND or WRITE has a
# data segment, and libmlx4 rings the send doorbell on its UAR page, the
# adapter reading the WQE by DMA. The driver hands out UARs and QPNs round
# robin: a run's are new in this boot, so the model's counts of them are
# the run's alone.

ITERS=200
INLINE_MAX=208

# The QPNs a client printed ("local address: ... QPN 0x0048, ...", then the
# remote's), one a line.
qpns_of() { # name
	awk '/(local|remote) address/ {
		for (i = 1; i < NF; i++) if ($i == "QPN") { q = $(i + 1); sub(",", "", q); print q }
	}' /tmp/"$1".out
}

# The pages of both contexts of run NAME: which UAR each QP's context named
# (the model's record of its QP context) and the writes to that UAR's two
# pages (mlx4-bf counters --qp). The two contexts have UARs of their own,
# none of them 0 (the firmware's); every WQE the run executed from
# BlueFlame bytes was one of these QPs', and each QP's were written to its
# own context's BlueFlame page, with at least 64 bytes there per WQE; each
# QP's send doorbells were written to its own context's UAR page.
run_pages() { # name
	qpns=$(qpns_of "$1")
	[ "$(echo "$qpns" | wc -w)" = 2 ] || { echo "# $1: no two QPNs in the client's output"; return 1; }
	uars= bf_bytes=0 bf_wqes=0 rc=0
	for q in $qpns; do
		./mlx4-bf counters --qp "$q" >/tmp/qp.counters || { rc=1; continue; }
		uar=$(value /tmp/qp.counters qp_uar)
		wqes=$(value /tmp/qp.counters qp_wqes_bf)
		bells=$(value /tmp/qp.counters qp_send_doorbells)
		on_uar=$(value /tmp/qp.counters uar_page_writes)
		on_bf=$(value /tmp/qp.counters bf_page_writes)
		bytes=$(value /tmp/qp.counters bf_page_bytes)
		echo "# $1: qp $q: UAR $uar; $wqes WQEs from BlueFlame, $(value /tmp/qp.counters qp_bf_fallbacks) fallbacks, $bells doorbells; its UAR page $on_uar writes, its BlueFlame page $on_bf writes, $bytes bytes"
		[ "$uar" -gt 0 ] || rc=1
		case " $uars " in *" $uar "*) rc=1 ;; esac
		uars="$uars $uar"
		bf_bytes=$((bf_bytes + bytes))
		bf_wqes=$((bf_wqes + wqes))
		[ "$(value /tmp/qp.counters qp_bf_fallbacks)" = 0 ] || rc=1
		[ "$wqes" = 0 ] || [ "$on_bf" -gt 0 ] || rc=1
		[ "$on_uar" -ge "$bells" ] || rc=1
	done
	[ "$bf_wqes" = "$(delta wqes_bf)" ] && [ "$bf_bytes" -ge $((64 * bf_wqes)) ] || rc=1
	[ $rc = 0 ] || echo "# $1: the contexts' UARs (${uars# }) are not two of their own, or the run's writes did not land on their pages"
	return $rc
}

# ibv_rc_pingpong (or uc, ud, srq) of SIZE bytes, 20 round trips: 40 SENDs delivered
# (whatever else ran), no protocol error. With -e it sleeps on completion
# events (the CQ armed through the UAR page, the EQ's interrupt, the
# completion channel) instead of polling.
pingpong() { # size [-e] [transport: rc (default), uc, ud, srq]
	tool=ibv_${3:-rc}_pingpong
	name=${3:-rc}_pingpong$2-$1
	snap before
	server_client "$name" "$tool -d $DEV -i 1 -n 20 -s $1 $2" \
		"$tool -d $DEV -i 1 -n 20 -s $1 $2 127.0.0.1"
	rc=$?
	snap after
	echo "# $tool $2 $1 bytes: deliveries $(delta deliveries), protocol errors $(delta protocol_errors), irqs $(delta irqs)"
	[ "$(delta protocol_errors)" = 0 ] && [ "$(delta deliveries)" -ge 40 ] || rc=1
	# ibv_srq_pingpong's receives are its SRQ's WQEs.
	if [ "${3:-}" = srq ]; then
		echo "# SRQ WQEs taken $(delta srq_wqes)"
		[ "$(delta srq_wqes)" -ge 40 ] || rc=1
	fi
	if [ -n "$2" ]; then
		[ "$(delta irqs)" -gt 0 ] || rc=1
	fi
	return $rc
}

# perftest's TOOL at SIZE bytes, ITERS iterations: its table to
# results/provider-TOOL.txt, the counters judged by the path the size
# takes, and both contexts' pages (run_pages).
perftest() { # tool size
	args="-d $DEV -i 1 -F -s $2 -n $ITERS"
	snap before
	server_client "$1-$2" "$1 $args" "$1 $args 127.0.0.1"
	rc=$?
	snap after
	grep -E '^ *#bytes|^ *[0-9]+ +[0-9]+ ' /tmp/"$1-$2".out >>/tmp/results/provider-"$1".txt
	echo "# $1 $2 bytes: bf $(delta wqes_bf), dma $(delta wqes_dma), fallbacks $(delta bf_fallbacks), doorbells $(delta send_doorbells), WQE DMA reads $(delta sq_dma_reads), RDMA reads $(delta rdma_reads), fetch-and-adds $(delta atomics_fetch_add), protocol errors $(delta protocol_errors)"
	[ $rc = 0 ] || return 1
	[ "$(delta protocol_errors)" = 0 ] && [ "$(delta bf_fallbacks)" = 0 ] || rc=1
	if [ "$1" = ib_read_lat ]; then
		# The client reads, ITERS times; the server waits.
		[ "$(delta sq_dma_reads)" = 0 ] && [ "$(delta wqes_bf)" -ge $ITERS ] &&
			[ "$(delta rdma_reads)" -ge $ITERS ] || rc=1
	elif [ "$1" = ib_atomic_lat ]; then
		# The client's fetch-and-adds, ITERS: each gathers (its old
		# value lands in a data segment), so by doorbell, never
		# BlueFlame, every one executed.
		[ "$(delta wqes_bf)" = 0 ] && [ "$(delta send_doorbells)" -ge $ITERS ] &&
			[ "$(delta atomics_fetch_add)" -ge $ITERS ] || rc=1
	elif [ "$2" -le $INLINE_MAX ]; then
		[ "$(delta sq_dma_reads)" = 0 ] && [ "$(delta wqes_bf)" -ge $((2 * ITERS)) ] || rc=1
	else
		[ "$(delta send_doorbells)" -ge $((2 * ITERS)) ] && [ "$(delta sq_dma_reads)" -gt 0 ] &&
			[ "$(delta wqes_bf)" = 0 ] || rc=1
	fi
	run_pages "$1-$2" || rc=1
	return $rc
}

# perftest's TOOL (ib_send_bw, ib_write_bw) at 4096 bytes, briefly, with
# QPS QPs a side (perftest's -q, 1 if not given; 64 make 128 QPs in the
# adapter at once, server's and client's): every message of every QP
# delivered (ib_send_bw) or written (ib_write_bw), no protocol error. One
# QP sends ITERS messages, several QPS_ITERS each (perftest's -n counts per
# QP).
QPS_ITERS=10
bandwidth() { # tool [qps] [size, 4096] [perftest options]
	# (Not n: result() counts the KTAP results in it.)
	qps=${2:-1} iters=$ITERS name=$1 what="$1" size=${3:-4096}
	if [ "$qps" -gt 1 ]; then
		iters=$QPS_ITERS name=$1-qps-$qps what="$1 -q $qps"
	fi
	if [ -n "${4:-}" ]; then
		name=$name$(echo "$4" | tr -d ' ') what="$what $4"
	fi
	args="-d $DEV -i 1 -F -s $size -n $iters -q $qps ${4:-}"
	snap before
	server_client "$name" "$1 $args" "$1 $args 127.0.0.1"
	rc=$?
	snap after
	grep -E '^ *#bytes|^ *[0-9]+ +[0-9]+ ' /tmp/"$name".out >>/tmp/results/provider-"$name".txt
	echo "# $what $size bytes: deliveries $(delta deliveries), RDMA writes $(delta rdma_writes), doorbells $(delta send_doorbells), protocol errors $(delta protocol_errors)"
	[ "$(delta protocol_errors)" = 0 ] || rc=1
	case "${4:-}" in
	*--use-srq*)
		echo "# SRQ WQEs taken $(delta srq_wqes)"
		[ "$(delta srq_wqes)" -ge $((iters * qps)) ] || rc=1
		;;
	esac
	case $1 in
	ib_send_bw) [ "$(delta deliveries)" -ge $((iters * qps)) ] || rc=1 ;;
	*) [ "$(delta rdma_writes)" -ge $((iters * qps)) ] || rc=1 ;;
	esac
	return $rc
}
