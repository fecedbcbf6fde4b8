// SPDX-License-Identifier: GPL-2.0
/*
 * ibv_hold: a verbs context with one of each object the provider makes (a
 * PD, a CQ with a completion channel, an RC QP connected to itself in RTS,
 * a memory region), one RDMA write through it, then one of two ends:
 *
 *   -x  exit at once without freeing anything: the kernel must give back
 *       all of it when the process's file is closed (the suite then reads
 *       the device's debugfs counters and the model's gauges);
 *   -f  print "ready" and wait (at most -t seconds) for the device to go:
 *       IBV_EVENT_DEVICE_FATAL on the async fd; after it a new object is
 *       refused with EIO and every object is still destroyed without error,
 *       as the RDMA core promises after a disassociation.
 *
 * Usage: ibv_hold [-d DEV] -x | -f [-t SECONDS]
 * Exit status: 0 if the chosen end went as described, 1 if not.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../upstream/verbs_util.h"

#define BUF_SIZE 4096

struct objects {
	struct ibv_context *ctx;
	struct ibv_comp_channel *channel;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
};

void die(const char *what, int err)
{
	printf("ibv_hold: %s: %s\n", what, strerror(err));
	exit(1);
}

static void make(struct objects *o, const char *dev)
{
	struct ibv_qp_init_attr qpa = { 0 };
	uint16_t lid;

	o->buf = aligned_alloc(BUF_SIZE, BUF_SIZE);
	if (!o->buf)
		die("memory", ENOMEM);
	memset(o->buf, 0x5a, BUF_SIZE);
	o->ctx = open_device(dev);
	lid = port_lid(o->ctx);
	o->channel = ibv_create_comp_channel(o->ctx);
	o->pd = ibv_alloc_pd(o->ctx);
	o->cq = ibv_create_cq(o->ctx, 16, NULL, o->channel, 0);
	o->mr = o->pd ? ibv_reg_mr(o->pd, o->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE) : NULL;
	if (!o->channel || !o->pd || !o->cq || !o->mr)
		die("channel, PD, CQ or MR", errno);
	qpa.send_cq = o->cq;
	qpa.recv_cq = o->cq;
	qpa.qp_type = IBV_QPT_RC;
	qpa.cap.max_send_wr = 4;
	qpa.cap.max_recv_wr = 4;
	qpa.cap.max_send_sge = 1;
	qpa.cap.max_recv_sge = 1;
	qpa.cap.max_inline_data = 64;
	o->qp = ibv_create_qp(o->pd, &qpa);
	if (!o->qp)
		die("ibv_create_qp", errno);
	connect_to_self(o->qp, lid);
	if (ibv_req_notify_cq(o->cq, 0))
		die("ibv_req_notify_cq", errno);
}

/* One inline RDMA write of 32 bytes into the region, and its completion. */
static void write_once(struct objects *o)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)o->buf,
		.length = 32,
		.lkey = o->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
		.wr.rdma.remote_addr = (uintptr_t)o->buf + BUF_SIZE / 2,
		.wr.rdma.rkey = o->mr->rkey,
	};
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int n, tries = 0;

	errno = ibv_post_send(o->qp, &wr, &bad);
	if (errno)
		die("ibv_post_send", errno);
	do
		n = ibv_poll_cq(o->cq, 1, &wc);
	while (n == 0 && ++tries < 10000000);
	if (n != 1 || wc.status != IBV_WC_SUCCESS)
		die("the write's completion", n < 0 ? EIO : ETIMEDOUT);
}

/* Waits for IBV_EVENT_DEVICE_FATAL, then checks what the context still does. */
static int until_fatal(struct objects *o, int seconds)
{
	struct pollfd p = { .fd = o->ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	struct ibv_pd *pd;
	int err, fatal, refused;

	printf("ready\n");
	if (poll(&p, 1, seconds * 1000) != 1) {
		printf("ibv_hold: no async event in %d s\n", seconds);
		return 1;
	}
	if (ibv_get_async_event(o->ctx, &ev))
		die("ibv_get_async_event", errno);
	fatal = ev.event_type == IBV_EVENT_DEVICE_FATAL;
	printf("ibv_hold: async event %s\n", ibv_event_type_str(ev.event_type));
	ibv_ack_async_event(&ev);
	errno = 0;
	pd = ibv_alloc_pd(o->ctx);
	refused = !pd && errno == EIO;
	printf("ibv_hold: a new PD after it: %s, errno %d (%s)\n",
	       pd ? "made" : "refused", errno, strerror(errno));
	err = ibv_destroy_qp(o->qp);
	err = err ?: ibv_dereg_mr(o->mr);
	err = err ?: ibv_destroy_cq(o->cq);
	err = err ?: ibv_dealloc_pd(o->pd);
	err = err ?: ibv_destroy_comp_channel(o->channel);
	err = err ?: ibv_close_device(o->ctx);
	printf("ibv_hold: destroying every object: %s\n", err ? strerror(err) : "done");
	return fatal && refused && !err ? 0 : 1;
}

static int print_usage(const char *prog)
{
	fprintf(stderr, "usage: %s [-d DEV] -x | -f [-t SECONDS]\n", prog);
	return 2;
}

int main(int argc, char **argv)
{
	const char *dev = "mlx4_bf0";
	int opt, mode = 0, seconds = 60;
	struct objects o;

	while ((opt = getopt(argc, argv, "d:xft:")) != -1) {
		switch (opt) {
		case 'd':
			dev = optarg;
			break;
		case 'x':
		case 'f':
			mode = opt;
			break;
		case 't':
			seconds = atoi(optarg);
			break;
		default:
			return print_usage(argv[0]);
		}
	}
	if (!mode)
		return print_usage(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	make(&o, dev);
	write_once(&o);
	printf("ibv_hold: context, PD, CQ, QP 0x%x in RTS, MR 0x%x, one write done\n",
	       o.qp->qp_num, o.mr->lkey);
	/* -x: the kernel cleans up what the process leaves. */
	if (mode == 'x')
		return 0;
	return until_fatal(&o, seconds);
}
