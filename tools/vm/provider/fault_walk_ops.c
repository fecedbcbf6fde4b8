// SPDX-License-Identifier: GPL-2.0
/*
 * The operations ibv_fault_walk fails (see fault_walk.h), each with what
 * it needs made first, without faults: a verbs context on mlx4_bf0 through
 * libibverbs and libmlx4, a PD, a CQ (made, and resized), a memory region
 * (made, and re-registered), two RC QPs connected to each other (the
 * peer's QPN and the port's LID, what ibv_rc_pingpong exchanges), a WQE
 * posted through the driver's QP_POST method, a shared receive queue and a
 * QP on it, and the adapter bound and unbound through sysfs.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/mlx4dv.h>
#include <rdma/rdma_user_ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "../../../uapi/mlx4_bf.h"
#include "../upstream/verbs_util.h"
#include "fault_walk.h"

#define POST_LEN	16
#define POLL_TRIES	2000000

/* The QP QP_POST posts on, and its next send-queue slot. */
static struct mlx4dv_qp dv;
static uint32_t head;

/* The setups: what each operation needs. */
static int setup_cq(struct world *w)
{
	return make_ctx(w) ?: make_cq(w);
}

static int setup_pd_cq(struct world *w)
{
	return make_pd(w) ?: make_cq(w);
}

static int setup_srq(struct world *w)
{
	return make_pd(w) ?: make_srq(w);
}

static int setup_pd_cq_srq(struct world *w)
{
	return setup_pd_cq(w) ?: make_srq(w);
}

static int setup_reset(struct world *w)
{
	return make_qps(w, IBV_QPS_RESET);
}

static int setup_init(struct world *w)
{
	return make_qps(w, IBV_QPS_INIT);
}

static int setup_rtr(struct world *w)
{
	return make_qps(w, IBV_QPS_RTR);
}

/* Both QPs in RTS and a region on their PD: all objects there are. */
static int setup_rts(struct world *w)
{
	struct mlx4dv_obj obj = { .qp = { .out = &dv } };
	int err = make_qps(w, IBV_QPS_RTS);

	if (!err)
		err = alloc_buf(w);
	if (err)
		return err;
	w->mr = ibv_reg_mr(w->pd, w->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE);
	if (!w->mr)
		return failed();
	obj.qp.in = w->qp[0];
	head = 0;
	return mlx4dv_init_obj(&obj, MLX4DV_OBJ_QP) ? failed() : 0;
}

static int open_sysfs(struct world *w, const char *file)
{
	char path[128];

	snprintf(path, sizeof(path), DRV "/%s", file);
	w->fd = open(path, O_WRONLY);
	return w->fd < 0 ? errno : 0;
}

static int setup_bind(struct world *w)
{
	return unbind_now() ?: open_sysfs(w, "bind");
}

static int setup_unbind(struct world *w)
{
	return bind_now() ?: open_sysfs(w, "unbind");
}

/* The operations: 0 or the error. */
static int run_open(struct world *w)
{
	errno = 0;
	w->ctx = ibv_open_device(w->dev);
	return w->ctx ? 0 : failed();
}

static int run_alloc_pd(struct world *w)
{
	errno = 0;
	w->pd = ibv_alloc_pd(w->ctx);
	return w->pd ? 0 : failed();
}

static int run_reg_mr(struct world *w)
{
	errno = 0;
	w->mr = ibv_reg_mr(w->pd, w->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE);
	return w->mr ? 0 : failed();
}

/* Half of the buffer, new rights: new pages and MTT, the MPT swapped. */
static int run_rereg_mr(struct world *w)
{
	errno = 0;
	if (ibv_rereg_mr(w->mr, IBV_REREG_MR_CHANGE_TRANSLATION |
			 IBV_REREG_MR_CHANGE_ACCESS, NULL, w->buf,
			 BUF_SIZE / 2, IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_READ))
		return failed();
	return 0;
}

static int run_create_cq(struct world *w)
{
	errno = 0;
	return make_cq(w);
}

static int run_create_qp(struct world *w)
{
	errno = 0;
	w->qp[0] = new_qp(w);
	return w->qp[0] ? 0 : failed();
}

static int run_create_srq(struct world *w)
{
	struct ibv_srq_init_attr a = { .attr = { .max_wr = 4, .max_sge = 1 } };

	errno = 0;
	w->srq = ibv_create_srq(w->pd, &a);
	return w->srq ? 0 : failed();
}

/* Four WQEs are posted: armed at 1, no event. */
static int run_arm_srq(struct world *w)
{
	struct ibv_srq_attr a = { .srq_limit = 1 };

	return ibv_modify_srq(w->srq, &a, IBV_SRQ_LIMIT);
}

static int run_destroy_srq(struct world *w)
{
	int err = ibv_destroy_srq(w->srq);

	if (!err)
		w->srq = NULL;
	return err;
}

static int run_init(struct world *w)
{
	return to_init(w->qp[0]);
}

static int run_rtr(struct world *w)
{
	return to_rtr(w->qp[0], w->qp[1], w->lid);
}

static int run_rts(struct world *w)
{
	return to_rts(w->qp[0]);
}

static void put32(uint8_t *at, uint32_t v)
{
	v = htobe32(v);
	memcpy(at, &v, 4);
}

/*
 * QP_POST (as tools/testing/selftests/mlx4_bf/mlx4_bf_verbs.h calls it): an
 * RDMA write of POST_LEN bytes inline into the region, to the peer, built
 * in the QP's next send-queue slot as libmlx4 builds it, signaled.
 */
static int run_qp_post(struct world *w)
{
	uint8_t *wqe = (uint8_t *)dv.buf.buf + dv.sq.offset +
		       ((head & (dv.sq.wqe_cnt - 1)) << dv.sq.wqe_shift);
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[1];
	} cmd = {
		.hdr = {
			.length = sizeof(cmd),
			.object_id = UVERBS_OBJECT_DEVICE,
			.method_id = MLX4_BF_IB_METHOD_QP_POST,
			.num_attrs = 1,
			.driver_id = RDMA_DRIVER_MLX4,
		},
		.attrs = {
			/* The QP is the one the control segment names. */
			{ .attr_id = MLX4_BF_IB_ATTR_QP_POST_WQE, .len = 64,
			  .data = (uintptr_t)wqe },
		},
	};

	memset(wqe, 0, 64);
	*(uint64_t *)(wqe + 16) = htobe64((uintptr_t)w->buf + BUF_SIZE / 2);
	put32(wqe + 24, w->mr->rkey);
	put32(wqe + 32, 1u << 31 | POST_LEN);
	memset(wqe + 36, 0x5a, POST_LEN);
	put32(wqe + 8, 3 << 2);	/* CQ_UPDATE */
	put32(wqe + 4, be32toh(dv.doorbell_qpn) | 4);
	put32(wqe, 0x08 | (head & 0xffff) << 8 |
	      (head & dv.sq.wqe_cnt ? 1u << 31 : 0));
	return ioctl(w->ctx->cmd_fd, RDMA_VERBS_IOCTL, &cmd) ? errno : 0;
}

/* A post that succeeded completes once, one that failed never. */
static int settle_qp_post(struct world *w, int result)
{
	struct ibv_wc wc;
	long i, tries = result ? 1000 : POLL_TRIES;
	int n = 0;

	for (i = 0; i < tries && !n; i++)
		n = ibv_poll_cq(w->cq, 1, &wc);
	if (result)
		return n ? ERR_COMPLETED : result;
	head++;
	if (n == 1 && wc.status == IBV_WC_SUCCESS)
		return 0;
	printf("# QP_POST: %s\n", n == 1 ? ibv_wc_status_str(wc.status) :
	       "no completion");
	return ERR_NO_COMPLETION;
}

static int run_dereg_mr(struct world *w)
{
	int err = ibv_dereg_mr(w->mr);

	if (!err)
		w->mr = NULL;
	return err;
}

static int run_destroy_qp(struct world *w)
{
	int err = ibv_destroy_qp(w->qp[0]);

	if (!err)
		w->qp[0] = NULL;
	return err;
}

/* From make_cq's 16 entries (a ring of 32) to a ring of 128. */
static int run_resize_cq(struct world *w)
{
	return ibv_resize_cq(w->cq, 64);
}

static int run_destroy_cq(struct world *w)
{
	int err = ibv_destroy_cq(w->cq);

	if (!err)
		w->cq = NULL;
	return err;
}

static int run_dealloc_pd(struct world *w)
{
	int err = ibv_dealloc_pd(w->pd);

	if (!err)
		w->pd = NULL;
	return err;
}

/* The context and whatever it has: the kernel destroys what is left. */
static int run_close(struct world *w)
{
	int err = ibv_close_device(w->ctx);

	w->ctx = NULL;
	w->pd = NULL;
	w->cq = NULL;
	w->mr = NULL;
	w->qp[0] = w->qp[1] = NULL;
	return err;
}

static int run_write_bdf(struct world *w)
{
	return write(w->fd, bdf, strlen(bdf)) < 0 ? errno : 0;
}

/* A bind without its RDMA device failed; the driver still serves. */
static int settle_bind(struct world *w, int result)
{
	(void)w;
	if (result || ibdev_present())
		return result;
	if (unbind_now())
		printf("# the unbind after it failed\n");
	return ERR_NO_IBDEV;
}

/* Undoing a success. */
static void undo_ctx(struct world *w)
{
	ibv_close_device(w->ctx);
	w->ctx = NULL;
}

static void undo_pd(struct world *w)
{
	ibv_dealloc_pd(w->pd);
	w->pd = NULL;
}

static void undo_mr(struct world *w)
{
	ibv_dereg_mr(w->mr);
	w->mr = NULL;
}

static void undo_cq(struct world *w)
{
	ibv_destroy_cq(w->cq);
	w->cq = NULL;
}

static void undo_srq(struct world *w)
{
	ibv_destroy_srq(w->srq);
	w->srq = NULL;
}

static void undo_qp(struct world *w)
{
	ibv_destroy_qp(w->qp[0]);
	w->qp[0] = NULL;
}

static void undo_unbind(struct world *w)
{
	(void)w;
	bind_now();
}

#define NULL_ERRNO	"NULL, errno set"
#define RET_ERRNO	"the errno returned"
#define WRITE_ERRNO	"write() -1, errno set"

const struct op ops[] = {
	{ "alloc_ucontext", find_device, run_open, NULL, undo_ctx,
	  NULL_ERRNO, 0, 0, NULL },
	{ "alloc_pd", make_ctx, run_alloc_pd, NULL, undo_pd, NULL_ERRNO, 0, 0, NULL },
	{ "reg_mr", make_buf, run_reg_mr, NULL, undo_mr, NULL_ERRNO, 0, 0, NULL },
	{ "rereg_mr", make_mr, run_rereg_mr, NULL, NULL,
	  "non-zero, errno set", 0, 0, NULL },
	{ "create_cq", make_ctx, run_create_cq, NULL, undo_cq, NULL_ERRNO, 0, 0, NULL },
	{ "resize_cq", setup_cq, run_resize_cq, NULL, NULL, RET_ERRNO, 0, 0, NULL },
	{ "create_qp", setup_pd_cq, run_create_qp, NULL, undo_qp, NULL_ERRNO,
	  0, 0, NULL },
	{ "create_srq", make_pd, run_create_srq, NULL, undo_srq, NULL_ERRNO,
	  0, 0, NULL },
	{ "modify_srq_limit", setup_srq, run_arm_srq, NULL, NULL, RET_ERRNO,
	  0, 0, NULL },
	{ "create_qp_on_srq", setup_pd_cq_srq, run_create_qp, NULL, undo_qp,
	  NULL_ERRNO, 0, 0, NULL },
	{ "modify_qp_reset_to_init", setup_reset, run_init, NULL, NULL,
	  RET_ERRNO, 0, 0, NULL },
	{ "modify_qp_init_to_rtr", setup_init, run_rtr, NULL, NULL, RET_ERRNO,
	  0, 0, NULL },
	{ "modify_qp_rtr_to_rts", setup_rtr, run_rts, NULL, NULL, RET_ERRNO,
	  0, 0, NULL },
	{ "qp_post", setup_rts, run_qp_post, settle_qp_post, NULL,
	  "ioctl() -1, errno set", 0, 0, NULL },
	{ "dereg_mr", make_mr, run_dereg_mr, NULL, NULL, RET_ERRNO, 1, 0, NULL },
	{ "destroy_qp", setup_rts, run_destroy_qp, NULL, NULL, RET_ERRNO, 1, 0, NULL },
	{ "destroy_srq", setup_srq, run_destroy_srq, NULL, NULL, RET_ERRNO, 1, 0,
	  NULL },
	{ "destroy_cq", setup_cq, run_destroy_cq, NULL, NULL, RET_ERRNO, 1, 0, NULL },
	{ "dealloc_pd", make_pd, run_dealloc_pd, NULL, NULL, RET_ERRNO, 0, 0, NULL },
	{ "close_context", make_ctx, run_close, NULL, NULL, RET_ERRNO, 0, 0, NULL },
	{ "close_context_with_objects", setup_rts, run_close, NULL, NULL,
	  RET_ERRNO, 1, 0, NULL },
	{ "unbind", setup_unbind, run_write_bdf, NULL, undo_unbind,
	  WRITE_ERRNO, 0, DEV_UNBIND, NULL },
	/* Last: a failure in its DMA mappings may turn dma-debug off. */
	{ "bind", setup_bind, run_write_bdf, settle_bind, NULL, WRITE_ERRNO, 0,
	  DEV_BIND, "register_irq_proc" },
};

const int nr_ops = ARRAY_SIZE(ops);
