// SPDX-License-Identifier: GPL-2.0
/*
 * ibv_fault_walk's objects (see fault_walk.h): made without faults, in the
 * order an operation needs them, and given back; the errors by name.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../upstream/verbs_util.h"
#include "fault_walk.h"

/* errno after a call that failed, or ERR_NO_ERRNO if it set none. */
int failed(void)
{
	return errno ? errno : ERR_NO_ERRNO;
}

const char *err_name(int err)
{
	switch (err) {
	case 0:
		return "success";
	case ERR_NO_ERRNO:
		return "failed without errno";
	case ERR_NO_IBDEV:
		return "no RDMA device";
	case ERR_NO_COMPLETION:
		return "posted, no completion";
	case ERR_COMPLETED:
		return "refused, yet completed";
	}
	return strerrorname_np(err) ?: "errno ?";
}

int find_device(struct world *w)
{
	int i;

	errno = 0;
	w->list = ibv_get_device_list(NULL);
	if (!w->list)
		return failed();
	for (i = 0; w->list[i]; i++)
		if (!strcmp(ibv_get_device_name(w->list[i]), DEV_NAME))
			w->dev = w->list[i];
	return w->dev ? 0 : ENODEV;
}

int make_ctx(struct world *w)
{
	struct ibv_port_attr port;
	int err = find_device(w);

	if (err)
		return err;
	errno = 0;
	w->ctx = ibv_open_device(w->dev);
	if (!w->ctx)
		return failed();
	err = ibv_query_port(w->ctx, 1, &port);
	w->lid = port.lid;
	return err;
}

int make_pd(struct world *w)
{
	int err = make_ctx(w);

	if (err)
		return err;
	w->pd = ibv_alloc_pd(w->ctx);
	return w->pd ? 0 : failed();
}

int make_buf(struct world *w)
{
	int err = make_pd(w);

	return err ? err : alloc_buf(w);
}

int alloc_buf(struct world *w)
{
	w->buf = aligned_alloc(BUF_SIZE, BUF_SIZE);
	if (!w->buf)
		return failed();
	/* Touched now: no page fault of it inside a fault's window. */
	memset(w->buf, 0, BUF_SIZE);
	return 0;
}

int make_mr(struct world *w)
{
	int err = make_buf(w);

	if (err)
		return err;
	w->mr = ibv_reg_mr(w->pd, w->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE);
	return w->mr ? 0 : failed();
}

int make_cq(struct world *w)
{
	w->cq = ibv_create_cq(w->ctx, 16, NULL, NULL, 0);
	return w->cq ? 0 : failed();
}

int make_srq(struct world *w)
{
	struct ibv_srq_init_attr a = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_recv_wr wr = { 0 }, *bad;
	int err = 0, i;

	errno = 0;
	w->srq = ibv_create_srq(w->pd, &a);
	if (!w->srq)
		return failed();
	for (i = 0; i < 4 && !err; i++)
		err = ibv_post_srq_recv(w->srq, &wr, &bad);
	return err;
}

struct ibv_qp *new_qp(struct world *w)
{
	struct ibv_qp_init_attr a = {
		.send_cq = w->cq,
		.recv_cq = w->cq,
		.srq = w->srq,
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = 16,
			.max_recv_wr = 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = 64,
		},
	};

	return ibv_create_qp(w->pd, &a);
}

int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

/* To RTR with PEER as its destination, as ibv_rc_pingpong connects. */
int to_rtr(struct ibv_qp *qp, struct ibv_qp *peer, uint16_t lid)
{
	struct ibv_qp_attr a;

	self_rtr_attr(qp, lid, &a);
	a.dest_qp_num = peer->qp_num;
	return ibv_modify_qp(qp, &a, SELF_RTR_MASK);
}

int to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = 1,
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Context, PD, CQ and the two QPs, taken to STATE (RESET, INIT, RTR, RTS). */
int make_qps(struct world *w, enum ibv_qp_state state)
{
	int err = make_pd(w), i;

	err = err ?: make_cq(w);
	for (i = 0; i < 2 && !err; i++) {
		w->qp[i] = new_qp(w);
		err = w->qp[i] ? 0 : failed();
	}
	for (i = 0; i < 2 && !err && state >= IBV_QPS_INIT; i++)
		err = to_init(w->qp[i]);
	for (i = 0; i < 2 && !err && state >= IBV_QPS_RTR; i++)
		err = to_rtr(w->qp[i], w->qp[!i], w->lid);
	for (i = 0; i < 2 && !err && state >= IBV_QPS_RTS; i++)
		err = to_rts(w->qp[i]);
	return err;
}

int world_free(struct world *w)
{
	int refused = 0, i;

	for (i = 0; i < 2; i++)
		if (w->qp[i] && ibv_destroy_qp(w->qp[i]))
			refused++;
	if (w->srq && ibv_destroy_srq(w->srq))
		refused++;
	if (w->mr && ibv_dereg_mr(w->mr))
		refused++;
	if (w->cq && ibv_destroy_cq(w->cq))
		refused++;
	if (w->pd && ibv_dealloc_pd(w->pd))
		refused++;
	if (w->ctx && ibv_close_device(w->ctx))
		refused++;
	if (w->list)
		ibv_free_device_list(w->list);
	if (w->fd >= 0)
		close(w->fd);
	free(w->buf);
	if (refused)
		printf("# %d object(s) refused to go\n", refused);
	memset(w, 0, sizeof(*w));
	w->fd = -1;
	return refused;
}
