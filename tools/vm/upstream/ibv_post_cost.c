// SPDX-License-Identifier: GPL-2.0
/*
 * ibv_post_cost: what one ibv_post_send() costs through libibverbs and
 * libmlx4, timed the way `mlx4-bf userpost` times our posts: the median of
 * the clock read around the call alone, the completion reaped outside the
 * window. The QP is an RC QP connected to itself by the port's LID, each
 * post an RDMA write into a registered buffer of the same process: inline
 * up to --inline bytes (libmlx4 then copies the WQE to the BlueFlame page),
 * else gathered from the buffer (the send doorbell). Under QEMU's
 * `-icount shift=0` the clock counts guest instructions.
 *
 * Usage: ibv_post_cost [-d DEV] [-m MIN] [-M MAX] [-s STEP] [-n ITERS]
 *                      [-i INLINE] [-p NAME [-W FIRST]]
 * Prints "#bytes path median" lines (path bf: inline, db: gathered).
 *
 * -p NAME (x86 and s390x) is for make profile: each measured post is
 * bracketed by tools/profile/insn_profile.so's markers (markers.h) (a post
 * whose clock exceeds 1.5 times the fastest is dropped), one window per size, and a
 * "profile: window K config NAME:BYTES ..." line for tools/profile/report.py
 * follows each size's line. The plugin numbers the windows of the whole
 * boot: -W is this run's first (default 1).
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../profile/markers.h"
#include "verbs_util.h"

#define BUF_SIZE 4096
#define WARMUP 20
#define DROP_FACTOR 1.5

void die(const char *what, int err)
{
	fprintf(stderr, "ibv_post_cost: %s: %s\n", what, strerror(err));
	exit(1);
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The guest clock between two reads around two markers: the smallest of 50. */
static double clock_cost(void)
{
	double best = 0;
	int i;

	for (i = 0; i < 50; i++) {
		double t0 = now_ns(), dt;

		asm volatile(TWO_NOPS ::: "memory");
		dt = now_ns() - t0;
		if (!i || dt < best)
			best = dt;
	}
	return best;
}

static void reap(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int n;

	do
		n = ibv_poll_cq(cq, 1, &wc);
	while (n == 0);
	if (n < 0 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "ibv_post_cost: completion %s\n",
			n < 0 ? "poll failed" : ibv_wc_status_str(wc.status));
		exit(1);
	}
}

struct window_stats {
	long kept, dropped;
	double min_ns, kept_ns;
};

/*
 * ibv_post_cost -p: the posts of one size as main() times them, each also
 * counted by the plugin, one window. Apart from main()'s loop, which the
 * markers would change: without -p the clock's window is as it was.
 */
static void profiled_posts(struct ibv_qp *qp, struct ibv_send_wr *wr,
			   struct ibv_cq *cq, int iters, double *samples,
			   struct window_stats *st)
{
	struct ibv_send_wr *bad;
	int i;

	for (i = 0; i < iters + WARMUP; i++) {
		double t0 = now_ns(), t;
		int err;

		if (i >= WARMUP)
			asm volatile(COUNT_START ::: "memory");
		err = ibv_post_send(qp, wr, &bad);
		if (i >= WARMUP)
			asm volatile(COUNT_PAUSE ::: "memory");
		t = now_ns() - t0;
		if (err)
			die("ibv_post_send", err);
		reap(cq);
		if (!st->min_ns || t < st->min_ns)
			st->min_ns = t;
		if (i < WARMUP)
			continue;
		samples[i - WARMUP] = t;
		/* slept or took an interrupt: counted apart */
		if (t > DROP_FACTOR * st->min_ns) {
			asm volatile(DROP ::: "memory");
			st->dropped++;
		} else {
			asm volatile(KEEP ::: "memory");
			st->kept++;
			st->kept_ns += t;
		}
	}
	asm volatile(WINDOW_END ::: "memory");
}

int main(int argc, char **argv)
{
	const char *dev = "mlx4_0", *prof = NULL;
	int window = 1;
	int min = 4, max = 208, step = 68, iters = 300, inl = 208;
	struct ibv_qp_init_attr qpa = { 0 };
	struct ibv_context *ctx;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	double *samples;
	char *buf;
	int opt, size, i;
	uint16_t lid;

	while ((opt = getopt(argc, argv, "d:m:M:s:n:i:p:W:")) != -1) {
		switch (opt) {
		case 'd':
			dev = optarg;
			break;
		case 'm':
			min = atoi(optarg);
			break;
		case 'M':
			max = atoi(optarg);
			break;
		case 's':
			step = atoi(optarg);
			break;
		case 'n':
			iters = atoi(optarg);
			break;
		case 'i':
			inl = atoi(optarg);
			break;
		case 'p':
			prof = optarg;
			break;
		case 'W':
			window = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: %s [-d DEV] [-m MIN] [-M MAX] [-s STEP] [-n ITERS] [-i INLINE] [-p NAME [-W FIRST]]\n",
				argv[0]);
			return 2;
		}
	}
	if (min < 1 || max > BUF_SIZE / 2 || step < 1 || iters < 1 || inl < 0 ||
	    (prof && !HAVE_MARKERS))
		die("arguments", EINVAL);
	samples = calloc(iters, sizeof(*samples));
	buf = aligned_alloc(BUF_SIZE, BUF_SIZE);
	if (!samples || !buf)
		die("memory", ENOMEM);
	memset(buf, 0x5a, BUF_SIZE);

	ctx = open_device(dev);
	lid = port_lid(ctx);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	mr = pd ? ibv_reg_mr(pd, buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			     IBV_ACCESS_REMOTE_WRITE) : NULL;
	if (!pd || !cq || !mr)
		die("PD, CQ or MR", errno);
	qpa.send_cq = cq;
	qpa.recv_cq = cq;
	qpa.qp_type = IBV_QPT_RC;
	qpa.cap.max_send_wr = 16;
	qpa.cap.max_recv_wr = 1;
	qpa.cap.max_send_sge = 1;
	qpa.cap.max_recv_sge = 1;
	qpa.cap.max_inline_data = inl;
	qp = ibv_create_qp(pd, &qpa);
	if (!qp)
		die("ibv_create_qp", errno);
	connect_to_self(qp, lid);

	printf("# ibv_post_cost: %s, libmlx4's ibv_post_send of an RDMA write to itself, %d posts per size\n",
	       dev, iters);
	printf("# median of the clock around the call (completion reaped outside): ns, or guest instructions under -icount shift=0\n");
	printf("#bytes path median\n");
	for (size = min; size <= max; size += step) {
		struct ibv_sge sge = {
			.addr = (uintptr_t)buf,
			.length = size,
			.lkey = mr->lkey,
		};
		struct ibv_send_wr wr = {
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED |
				      (size <= inl ? IBV_SEND_INLINE : 0),
			.wr.rdma.remote_addr = (uintptr_t)buf + BUF_SIZE / 2,
			.wr.rdma.rkey = mr->rkey,
		};
		struct ibv_send_wr *bad;
		struct window_stats st = { 0 };

		if (prof) {
			profiled_posts(qp, &wr, cq, iters, samples, &st);
		} else {
			for (i = 0; i < iters + WARMUP; i++) {
				double t0 = now_ns(), t;
				int err = ibv_post_send(qp, &wr, &bad);

				t = now_ns() - t0;
				if (err)
					die("ibv_post_send", err);
				reap(cq);
				if (i >= WARMUP)
					samples[i - WARMUP] = t;
			}
		}
		qsort(samples, iters, sizeof(*samples), cmp_double);
		printf("%-7d %-4s %.0f\n", size, size <= inl ? "bf" : "db",
		       samples[iters / 2]);
		if (prof)
			printf("profile: window %d config %s:%d calls %d kept %ld dropped %ld retries 0 min_ns %.0f kept_ns %.0f clock_ns %.0f\n",
			       window++, prof, size, iters, st.kept, st.dropped,
			       st.min_ns, st.kept_ns, clock_cost());
	}
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
