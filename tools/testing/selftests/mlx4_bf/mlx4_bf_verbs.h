/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The selftests' side of the driver's RDMA device (mlx4_bf<N>): a verbs
 * context through libibverbs and libmlx4, a PD, a CQ (its completion events
 * on a channel, if asked for), a region the QP's RDMA writes land in, an RC
 * QP connected to itself or to another context's (its receives posted by
 * libmlx4), its send queue through mlx4dv, WQEs put in it as libmlx4 puts
 * them (owner bit, WQE counter and QP number are the process's to stamp),
 * and the QP_POST method called on them as the patched libmlx4 calls it:
 * RDMA_VERBS_IOCTL on the context's command file, no object handle, the WQE
 * naming its QP.
 *
 * The WQE bytes come from mlx4_bf_lib.h's builder, written independently of
 * the driver; what the adapter saw, from the analyzer (mlx4_bf_model.h).
 */
#ifndef MLX4_BF_VERBS_H
#define MLX4_BF_VERBS_H

#include <infiniband/mlx4dv.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_user_ioctl.h>
#include <sys/ioctl.h>
#include <time.h>

#include <mlx4_bf.h>

#include "mlx4_bf_lib.h"

#define VERBS_DEV_PREFIX	"mlx4_bf"
#define NO_VERBS_DEVICE	"no RDMA device " VERBS_DEV_PREFIX "<N>: mlx4_bf not loaded or not bound"
#define VERBS_CQ_ENTRIES	64
#define VERBS_SQ_WRS		16
#define VERBS_MAX_INLINE	512
/* How long a completion may take: the model runs on a loaded host under TCG. */
#define VERBS_CQE_WAIT_S	10

/* One context and its objects: see the top of this file. */
struct verbs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	/* where the CQ's completion events go, if it has any */
	struct ibv_comp_channel *channel;
	struct ibv_qp *qp;
	uint8_t *sink;
	struct ibv_mr *sink_mr;
	struct mlx4dv_qp dv;
	/* The QP's send-queue index: the WQEs put so far. */
	uint32_t head;
};

/* A new context on the first mlx4_bf<N> RDMA device, or NULL. */
static inline struct ibv_context *verbs_open_device(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	if (!list)
		return NULL;
	for (int i = 0; list[i] && !ctx; i++)
		if (!strncmp(ibv_get_device_name(list[i]), VERBS_DEV_PREFIX,
			     strlen(VERBS_DEV_PREFIX)))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

/* Whether there is an mlx4_bf<N> RDMA device at all. */
static inline int verbs_device_present(void)
{
	struct ibv_context *ctx = verbs_open_device();

	if (ctx)
		ibv_close_device(ctx);
	return !!ctx;
}

/*
 * An RC QP of @pd whose sends and receives complete on @cq, with room for
 * @recv_wrs receives, in RESET; NULL on failure.
 */
static inline struct ibv_qp *verbs_rc_qp_rq(struct ibv_pd *pd, struct ibv_cq *cq,
					    uint32_t recv_wrs)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = VERBS_SQ_WRS,
			.max_recv_wr = recv_wrs,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = VERBS_MAX_INLINE,
		},
	};

	return ibv_create_qp(pd, &a);
}

/* An RC QP of @pd whose sends complete on @cq, in RESET; NULL on failure. */
static inline struct ibv_qp *verbs_rc_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	return verbs_rc_qp_rq(pd, cq, 1);
}

/*
 * RESET to INIT on port 1, the peer's RDMA into this QP's PD allowed as
 * @access says (IBV_ACCESS_REMOTE_WRITE, _READ); 0 or an errno.
 */
static inline int verbs_to_init(struct ibv_qp *qp, unsigned int access)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = access,
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS);
}

/*
 * INIT to RTR, the peer QP @dest_qpn behind port 1 (this adapter's only
 * port, so its LID); 0 or an errno.
 */
static inline int verbs_to_rtr(struct ibv_qp *qp, uint32_t dest_qpn)
{
	struct ibv_port_attr port;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = dest_qpn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = { .port_num = 1 },
	};
	int err = ibv_query_port(qp->context, 1, &port);

	if (err)
		return err;
	a.ah_attr.dlid = port.lid;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			     IBV_QP_MIN_RNR_TIMER);
}

/* RTR to RTS, as ibv_rc_pingpong sets it; 0 or an errno. */
static inline int verbs_to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = 1,
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/*
 * RESET to RTS, the QP's peer QP @dest_qpn behind port 1, the peer's RDMA
 * into this QP's PD allowed as @access says; 0 or an errno.
 */
static inline int verbs_connect(struct ibv_qp *qp, uint32_t dest_qpn, unsigned int access)
{
	int err = verbs_to_init(qp, access);

	if (!err)
		err = verbs_to_rtr(qp, dest_qpn);
	return err ? err : verbs_to_rts(qp);
}

/* RESET to RTS, the QP's peer itself, which may RDMA-write it; 0 or an errno. */
static inline int verbs_connect_to_self(struct ibv_qp *qp)
{
	return verbs_connect(qp, qp->qp_num, IBV_ACCESS_REMOTE_WRITE);
}

/* The send queue of @qp as libmlx4 laid it out, into @dv; 0 or an errno. */
static inline int verbs_qp_queue(struct ibv_qp *qp, struct mlx4dv_qp *dv)
{
	struct mlx4dv_obj obj = { .qp = { .in = qp, .out = dv } };

	return mlx4dv_init_obj(&obj, MLX4DV_OBJ_QP) ? errno : 0;
}

/* @err if set, else @e: the first error of a series of calls, each made. */
static inline int first_err(int err, int e)
{
	return err ? err : e;
}

/*
 * Destroys what verbs_open() made, all of it whatever fails; 0, or the
 * first error a destroy returned (after an unbind the core has destroyed
 * the objects, and libibverbs still reports each destroy done).
 */
static inline int verbs_close(struct verbs *v)
{
	int err = 0;

	if (v->qp)
		err = ibv_destroy_qp(v->qp);
	if (v->sink_mr)
		err = first_err(err, ibv_dereg_mr(v->sink_mr));
	if (v->cq)
		err = first_err(err, ibv_destroy_cq(v->cq));
	if (v->channel)
		err = first_err(err, ibv_destroy_comp_channel(v->channel));
	if (v->pd)
		err = first_err(err, ibv_dealloc_pd(v->pd));
	if (v->ctx)
		err = first_err(err, ibv_close_device(v->ctx));
	free(v->sink);
	memset(v, 0, sizeof(*v));
	return err;
}

/*
 * Opens a context with its PD, CQ (its completion events on a channel of
 * its own if @events), sink (SINK_BYTES, remotely writable) and a QP in
 * RESET with room for @recv_wrs receives; 0, or an errno with nothing left
 * open.
 */
static inline int verbs_open_unconnected(struct verbs *v, uint32_t recv_wrs, int events)
{
	/* positive errnos, as libibverbs returns them */
	int err = ENODEV;

	memset(v, 0, sizeof(*v));
	v->ctx = verbs_open_device();
	if (!v->ctx)
		return err;
	err = ENOMEM;
	v->pd = ibv_alloc_pd(v->ctx);
	if (events)
		v->channel = ibv_create_comp_channel(v->ctx);
	if (!events || v->channel)
		v->cq = ibv_create_cq(v->ctx, VERBS_CQ_ENTRIES, v, v->channel, 0);
	v->sink = aligned_alloc(PAGE, SINK_BYTES);
	if (v->pd && v->cq && v->sink) {
		memset(v->sink, 0, SINK_BYTES);
		v->sink_mr = ibv_reg_mr(v->pd, v->sink, SINK_BYTES,
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		v->qp = v->sink_mr ? verbs_rc_qp_rq(v->pd, v->cq, recv_wrs) : NULL;
		err = v->qp ? verbs_qp_queue(v->qp, &v->dv) : errno;
	}
	if (err)
		verbs_close(v);
	return err;
}

/*
 * Opens a context with its PD, CQ, sink (SINK_BYTES, remotely writable) and
 * a QP connected to itself; 0, or an errno with nothing left open.
 */
static inline int verbs_open(struct verbs *v)
{
	int err = verbs_open_unconnected(v, 1, 0);

	if (!err) {
		err = verbs_connect_to_self(v->qp);
		if (err)
			verbs_close(v);
	}
	return err;
}

/*
 * Two contexts (as two processes would have them) whose QPs, each with room
 * for @recv_wrs receives, are connected to each other (RC), each letting
 * the other RDMA into its PD as @access says (IBV_ACCESS_REMOTE_WRITE,
 * _READ); @b's CQ raises its completion events on a channel if @b_events.
 * No receive is posted. 0, or an errno with nothing left open.
 */
static inline int verbs_open_pair(struct verbs *a, struct verbs *b, unsigned int access,
				  uint32_t recv_wrs, int b_events)
{
	int err;

	memset(b, 0, sizeof(*b));
	err = verbs_open_unconnected(a, recv_wrs, 0);
	if (err)
		return err;
	err = verbs_open_unconnected(b, recv_wrs, b_events);
	if (!err)
		err = verbs_connect(a->qp, b->qp->qp_num, access);
	if (!err)
		err = verbs_connect(b->qp, a->qp->qp_num, access);
	if (err) {
		if (b->ctx)
			verbs_close(b);
		verbs_close(a);
	}
	return err;
}

static inline uint32_t verbs_qpn(const struct verbs *v)
{
	return v->qp->qp_num;
}

static inline uint64_t verbs_sink_addr(const struct verbs *v)
{
	return (uintptr_t)v->sink;
}

/* The send-queue slot of index @index. */
static inline uint8_t *verbs_slot(const struct verbs *v, uint32_t index)
{
	return (uint8_t *)v->dv.buf.buf + v->dv.sq.offset +
	       ((index & (v->dv.sq.wqe_cnt - 1)) << v->dv.sq.wqe_shift);
}

/*
 * Stamps @wqe (@len bytes) as libmlx4's BlueFlame post does for the QP's
 * next index, signaled, and puts it in that slot of the send queue, which
 * the adapter reads after a doorbell: the owner bit of the queue's lap and
 * the WQE counter in the first dword, the QP number in the second,
 * CQ_UPDATE. The stamped bytes stay in @wqe. Returns the slot.
 */
static inline uint8_t *verbs_put_wqe(struct verbs *v, uint8_t *wqe, int len)
{
	uint8_t *slot = verbs_slot(v, v->head);

	put_be32(wqe, get_be32(wqe) | (v->head & v->dv.sq.wqe_cnt ? 1u << 31 : 0) |
		 (v->head & 0xffff) << 8);
	put_be32(wqe + 4, get_be32(wqe + 4) | verbs_qpn(v) << 8);
	stamp_cq_update(wqe);
	memcpy(slot, wqe, len);
	return slot;
}

/* One call of the method: the WQE, flags if @with_flags, the result if given. */
struct qp_post {
	int fd;
	const void *wqe;
	uint32_t len;
	int with_flags;
	uint32_t flags;
	struct mlx4_bf_post_result *result;
};

/* Calls MLX4_BF_IB_METHOD_QP_POST; 0 or the errno. */
static inline int qp_post_call(const struct qp_post *p)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[3];
	} cmd;
	struct ib_uverbs_attr *a = cmd.attrs;

	memset(&cmd, 0, sizeof(cmd));
	a->attr_id = MLX4_BF_IB_ATTR_QP_POST_WQE;
	a->len = p->len;
	a->data = (uintptr_t)p->wqe;
	a++;
	if (p->with_flags) {
		a->attr_id = MLX4_BF_IB_ATTR_QP_POST_FLAGS;
		/*
		 * 8 bytes, as uverbs_get_flags32() wants them from new user
		 * space: of 4 it reads the first 4 bytes of data, which on a
		 * big-endian host are not where data = flags puts them.
		 */
		a->len = sizeof(uint64_t);
		a->data = p->flags;
		a++;
	}
	if (p->result) {
		a->attr_id = MLX4_BF_IB_ATTR_QP_POST_RESULT;
		a->len = sizeof(*p->result);
		a->data = (uintptr_t)p->result;
		a++;
	}
	cmd.hdr.num_attrs = a - cmd.attrs;
	cmd.hdr.length = sizeof(cmd.hdr) + cmd.hdr.num_attrs * sizeof(*a);
	cmd.hdr.object_id = UVERBS_OBJECT_DEVICE;
	cmd.hdr.method_id = MLX4_BF_IB_METHOD_QP_POST;
	cmd.hdr.driver_id = RDMA_DRIVER_MLX4;
	return ioctl(p->fd, RDMA_VERBS_IOCTL, &cmd) ? errno : 0;
}

/*
 * Posts the WQE in the QP's next slot through the method (@flags, the
 * result into @res) and moves the head if it was taken; 0 or the errno.
 */
static inline int verbs_post(struct verbs *v, const uint8_t *slot, int len, uint32_t flags,
			     struct mlx4_bf_post_result *res)
{
	struct qp_post p = {
		.fd = v->ctx->cmd_fd, .wqe = slot, .len = len,
		.with_flags = !!flags, .flags = flags, .result = res,
	};
	int err = qp_post_call(&p);

	if (!err)
		v->head++;
	return err;
}

/* The next completion on @cq into @wc: 0, or -1 if none came in time. */
static inline int verbs_wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			return -1;
		if (n == 1)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > VERBS_CQE_WAIT_S)
			return -1;
	}
}

/* The status of the next completion on @cq, or -1 if none came in time. */
static inline int verbs_wait_cqe(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	return verbs_wait_wc(cq, &wc) ? -1 : (int)wc.status;
}

/*
 * Puts the WQE @wqe (@len bytes, as built) in the QP's next slot and posts
 * it through the method; 0 or the errno.
 */
static inline int verbs_send_wqe(struct verbs *v, uint8_t *wqe, int len)
{
	return verbs_post(v, verbs_put_wqe(v, wqe, len), len, 0, NULL);
}

/* One receive of @len bytes at @addr of region @mr, as libmlx4 posts it. */
static inline int verbs_post_recv(struct ibv_qp *qp, struct ibv_mr *mr, void *addr,
				  uint32_t len, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/* Whether @cq stays empty over a thousand polls: a refused WQE ran nowhere. */
static inline int verbs_cq_quiet(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	for (int i = 0; i < 1000; i++)
		if (ibv_poll_cq(cq, 1, &wc) != 0)
			return 0;
	return 1;
}

/* mlx4_ib's mmap offsets of a context's pages, which libmlx4 maps. */
#define UAR_PGOFF	0
#define BF_PGOFF	1

/*
 * Where this process mapped the page at @offset of a uverbs device's file
 * (/proc/self/maps), or NULL: libmlx4 does not say where its BlueFlame page
 * is.
 */
static inline void *uverbs_mapping(unsigned long offset)
{
	unsigned long start, off;
	char line[512];
	void *at = NULL;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return NULL;
	while (!at && fgets(line, sizeof(line), f))
		if (strstr(line, "/dev/infiniband/uverbs") &&
		    sscanf(line, "%lx-%*x %*s %lx", &start, &off) == 2 && off == offset)
			at = (void *)start;
	fclose(f);
	return at;
}

#endif /* MLX4_BF_VERBS_H */
