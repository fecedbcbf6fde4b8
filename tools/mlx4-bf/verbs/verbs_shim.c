// SPDX-License-Identifier: GPL-2.0
/*
 * The helper's verbs calls: see verbs_shim.h. Linked statically with the
 * project's libibverbs and libmlx4 (scripts/build-rdma-core.sh, the
 * QP_POST-patched libmlx4).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/mlx4dv.h>
#include <infiniband/verbs.h>
#include <string.h>

#include "verbs_shim.h"

/* errno after a verbs call that failed, never 0. */
static int failed(void)
{
	return errno ?: EIO;
}

int hv_open(const char *name, struct ibv_context **ctx)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	int i;

	if (!list)
		return failed();
	*ctx = NULL;
	errno = ENODEV;
	for (i = 0; list[i] && !*ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			*ctx = ibv_open_device(list[i]);
	i = *ctx ? 0 : failed();
	ibv_free_device_list(list);
	return i;
}

int hv_close(struct ibv_context *ctx)
{
	return ibv_close_device(ctx) ? failed() : 0;
}

int hv_cmd_fd(struct ibv_context *ctx)
{
	return ctx->cmd_fd;
}

int hv_facts(struct ibv_context *ctx, struct hv_facts *f)
{
	struct ibv_device_attr d;
	struct ibv_port_attr p;
	int err = ibv_query_device(ctx, &d) ?: ibv_query_port(ctx, 1, &p);

	if (err)
		return err;
	memset(f, 0, sizeof(*f));
	memcpy(f->fw_ver, d.fw_ver, sizeof(f->fw_ver) - 1);
	f->max_mr_size = d.max_mr_size;
	f->max_qp = d.max_qp;
	f->max_qp_wr = d.max_qp_wr;
	f->max_cq = d.max_cq;
	f->max_cqe = d.max_cqe;
	f->max_mr = d.max_mr;
	f->max_pd = d.max_pd;
	f->vendor_part_id = d.vendor_part_id;
	f->hw_ver = d.hw_ver;
	f->lid = p.lid;
	f->port_state = p.state;
	f->active_mtu = p.active_mtu;
	return 0;
}

int hv_alloc_pd(struct ibv_context *ctx, struct ibv_pd **pd)
{
	*pd = ibv_alloc_pd(ctx);
	return *pd ? 0 : failed();
}

int hv_dealloc_pd(struct ibv_pd *pd)
{
	return ibv_dealloc_pd(pd);
}

int hv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access,
	      struct ibv_mr **mr, uint32_t *lkey, uint32_t *rkey)
{
	*mr = ibv_reg_mr(pd, addr, len, access);
	if (!*mr)
		return failed();
	*lkey = (*mr)->lkey;
	*rkey = (*mr)->rkey;
	return 0;
}

int hv_dereg_mr(struct ibv_mr *mr)
{
	return ibv_dereg_mr(mr);
}

int hv_create_cq(struct ibv_context *ctx, int cqe, int events,
		 struct ibv_cq **cq, int *event_fd)
{
	struct ibv_comp_channel *ch = NULL;
	int err;

	*event_fd = -1;
	if (events) {
		ch = ibv_create_comp_channel(ctx);
		if (!ch)
			return failed();
		/* Read only when poll(2) said so; never blocks regardless. */
		if (fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK)) {
			err = failed();
			ibv_destroy_comp_channel(ch);
			return err;
		}
	}
	*cq = ibv_create_cq(ctx, cqe, NULL, ch, 0);
	if (!*cq) {
		err = failed();
		if (ch)
			ibv_destroy_comp_channel(ch);
		return err;
	}
	if (ch)
		*event_fd = ch->fd;
	return 0;
}

int hv_destroy_cq(struct ibv_cq *cq)
{
	struct ibv_comp_channel *ch = cq->channel;
	int err = ibv_destroy_cq(cq);

	if (!err && ch)
		err = ibv_destroy_comp_channel(ch);
	return err;
}

int hv_poll_wc(struct ibv_cq *cq, struct hv_wc *out)
{
	struct ibv_wc wc;
	int n = ibv_poll_cq(cq, 1, &wc);

	if (n <= 0)
		return n < 0 ? -EIO : 0;
	out->wr_id = wc.wr_id;
	out->status = wc.status;
	out->opcode = wc.opcode;
	out->byte_len = wc.byte_len;
	out->imm = wc.wc_flags & IBV_WC_WITH_IMM ? be32toh(wc.imm_data) : 0;
	out->qp_num = wc.qp_num;
	out->src_qp = wc.src_qp;
	out->with_imm = !!(wc.wc_flags & IBV_WC_WITH_IMM);
	return 1;
}

int hv_req_notify(struct ibv_cq *cq)
{
	return ibv_req_notify_cq(cq, 0);
}

int hv_take_event(struct ibv_cq *cq)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	if (ibv_get_cq_event(cq->channel, &ev_cq, &ev_ctx))
		return failed();
	ibv_ack_cq_events(ev_cq, 1);
	return ev_cq == cq ? 0 : EPROTO;
}

int hv_create_rc_qp(struct ibv_pd *pd, struct ibv_cq *send_cq,
		    struct ibv_cq *recv_cq, uint32_t send_wr, uint32_t recv_wr,
		    uint32_t max_inline, struct ibv_qp **qp, struct hv_sq *sq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = send_cq,
		.recv_cq = recv_cq,
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = send_wr,
			.max_recv_wr = recv_wr,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = max_inline,
		},
	};
	struct mlx4dv_qp dv;
	struct mlx4dv_obj obj = { .qp = { .out = &dv } };
	int err;

	*qp = ibv_create_qp(pd, &a);
	if (!*qp)
		return failed();
	obj.qp.in = *qp;
	err = mlx4dv_init_obj(&obj, MLX4DV_OBJ_QP);
	if (err) {
		ibv_destroy_qp(*qp);
		return err;
	}
	sq->buf = (uint8_t *)dv.buf.buf + dv.sq.offset;
	sq->wqe_cnt = dv.sq.wqe_cnt;
	sq->wqe_shift = dv.sq.wqe_shift;
	sq->qpn = (*qp)->qp_num;
	return 0;
}

int hv_connect(struct ibv_qp *qp, uint32_t dest_qpn, uint16_t dlid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	int err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);

	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = dlid;
	a.ah_attr.port_num = 1;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int hv_destroy_qp(struct ibv_qp *qp)
{
	return ibv_destroy_qp(qp);
}

int hv_set_bf_post(struct ibv_qp *qp, int how)
{
	return mlx4dv_qp_set_bf_post(qp, how);
}

int hv_post_write(struct ibv_qp *qp, const struct hv_write *w)
{
	struct ibv_sge sge = {
		.addr = w->laddr,
		.length = w->len,
		.lkey = w->lkey,
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED |
			      (w->inline_data ? IBV_SEND_INLINE : 0),
		.wr.rdma = {
			.remote_addr = w->raddr,
			.rkey = w->rkey,
		},
	};
	struct ibv_send_wr *bad;

	return ibv_post_send(qp, &wr, &bad);
}

int hv_post_recv(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr,
		 uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = {
		.addr = addr,
		.length = len,
		.lkey = lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = len ? 1 : 0,
	};
	struct ibv_recv_wr *bad;

	return ibv_post_recv(qp, &wr, &bad);
}
