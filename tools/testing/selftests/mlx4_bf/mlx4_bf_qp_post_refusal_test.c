// SPDX-License-Identifier: GPL-2.0
/*
 * What the RDMA device's QP_POST method refuses, and that a refused call
 * reached nothing: the errno it names, the adapter's counters as before
 * (the analyzer, mlx4_bf_model.h) and no completion. A process reaches only
 * its own context's QPs in RTS (or later states), with WQEs that name them,
 * are whole and well formed, and gather only from regions of the QP's PD;
 * the verbs commands the WQEs depend on refuse bad input with clean errnos.
 */
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "mlx4_bf_model.h"
#include "mlx4_bf_verbs.h"

FIXTURE(refusal)
{
	struct verbs v;
	struct model model;
	int have_model;
	uint8_t wqe[MAX_WQE + 64];
};

/* Its helpers spell FIXTURE_DATA(refusal) as struct _test_data_refusal: checkpatch sees a type. */

FIXTURE_SETUP(refusal)
{
	self->have_model = 0;
	self->v.ctx = NULL;
	if (!verbs_device_present())
		SKIP(return, NO_VERBS_DEVICE);
	if (model_open(&self->model))
		SKIP(return, NO_ANALYZER);
	self->have_model = 1;
	ASSERT_EQ(0, verbs_open(&self->v));
}

FIXTURE_TEARDOWN(refusal)
{
	if (self->v.ctx)
		verbs_close(&self->v);
	if (self->have_model)
		model_close(&self->model);
}

/* A good WQE in the QP's next slot (an inline write of 16 bytes): 64 bytes. */
static uint8_t *good_wqe(struct _test_data_refusal *self)
{
	build_rdma_write(self->wqe, 16, 1, verbs_sink_addr(&self->v), self->v.sink_mr->rkey);
	return verbs_put_wqe(&self->v, self->wqe, 64);
}

/*
 * The call @p fails with @want, and nothing of it reached the adapter: no
 * WQE, doorbell or BAR2 write, no completion.
 */
static void expect_refused(struct __test_metadata *_metadata, struct _test_data_refusal *self,
			   const struct qp_post *p, int want)
{
	struct model_posts before, after;
	int err;

	model_posts(&self->model, &before);
	err = qp_post_call(p);
	model_posts(&self->model, &after);
	EXPECT_EQ(want, err) TH_LOG("errno %d (%s), want %d (%s)", err, strerror(err), want,
				    strerror(want));
	EXPECT_EQ(before.wqe_bf, after.wqe_bf);
	EXPECT_EQ(before.wqe_dma, after.wqe_dma);
	EXPECT_EQ(before.doorbells, after.doorbells);
	EXPECT_EQ(before.bar2_writes, after.bar2_writes);
	EXPECT_TRUE(verbs_cq_quiet(self->v.cq));
}

/* The QP still posts after the refusals: one good WQE completes. */
static void expect_still_posts(struct __test_metadata *_metadata, struct _test_data_refusal *self)
{
	ASSERT_EQ(0, verbs_post(&self->v, good_wqe(self), 64, 0, NULL));
	EXPECT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(self->v.cq));
}

/* The QP number the second dword of @wqe names. */
static void name_qpn(uint8_t *wqe, uint32_t qpn)
{
	put_be32(wqe + 4, qpn << 8 | (get_be32(wqe + 4) & 0xff));
}

/* A data segment naming a region of another PD of the same context. */
TEST_F(refusal, region_of_another_pd)
{
	struct ibv_pd *other = ibv_alloc_pd(self->v.ctx);
	uint8_t *src = aligned_alloc(PAGE, PAGE);
	struct ibv_mr *mr = other && src ? ibv_reg_mr(other, src, PAGE, IBV_ACCESS_LOCAL_WRITE)
					  : NULL;
	struct sge sg = { .addr = (uintptr_t)src, .length = 64 };
	struct qp_post p = { .fd = self->v.ctx->cmd_fd };

	ASSERT_NE(NULL, mr);
	sg.lkey = mr->lkey;
	p.len = build_gather(self->wqe, OP_RDMA_WRITE, verbs_sink_addr(&self->v),
			     self->v.sink_mr->rkey, &sg, 1);
	p.wqe = verbs_put_wqe(&self->v, self->wqe, p.len);
	expect_refused(_metadata, self, &p, EACCES);
	expect_still_posts(_metadata, self);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(other);
	free(src);
}

/* WQEs that are not whole, too long, or malformed. */
TEST_F(refusal, malformed_wqes)
{
	uint8_t *slot = good_wqe(self);
	static uint8_t long_wqe[1024];
	struct qp_post p = { .fd = self->v.ctx->cmd_fd, .wqe = slot };

	/* not whole 16-byte units */
	p.len = 40;
	expect_refused(_metadata, self, &p, EINVAL);
	/* longer than the longest WQE: the core checks the attribute */
	memcpy(long_wqe, slot, 64);
	p.wqe = long_wqe;
	p.len = sizeof(long_wqe);
	expect_refused(_metadata, self, &p, EINVAL);
	/* the size field says other than the length */
	p.wqe = slot;
	p.len = 48;
	expect_refused(_metadata, self, &p, EINVAL);
	/* an opcode outside the set the kernel posts */
	p.len = 64;
	put_be32(slot, (get_be32(slot) & ~0x1fu) | 0x1f);
	expect_refused(_metadata, self, &p, EINVAL);
	/* a WQE the kernel cannot read */
	good_wqe(self);
	p.wqe = (void *)16;
	expect_refused(_metadata, self, &p, EFAULT);
	expect_still_posts(_metadata, self);
}

TEST_F(refusal, flags)
{
	struct qp_post p = {
		.fd = self->v.ctx->cmd_fd, .wqe = good_wqe(self), .len = 64, .with_flags = 1,
	};
	struct sge sg = { .addr = verbs_sink_addr(&self->v), .length = 64,
			  .lkey = self->v.sink_mr->lkey };

	p.flags = 1u << 7;
	expect_refused(_metadata, self, &p, EINVAL);
	p.flags = MLX4_BF_POST_F_FORCE_DOORBELL | MLX4_BF_POST_F_REQUIRE_BF;
	expect_refused(_metadata, self, &p, EINVAL);
	/* REQUIRE_BF of a WQE whose data is gathered: only the doorbell fits */
	p.flags = MLX4_BF_POST_F_REQUIRE_BF;
	p.len = build_gather(self->wqe, OP_RDMA_WRITE, verbs_sink_addr(&self->v),
			     self->v.sink_mr->rkey, &sg, 1);
	p.wqe = verbs_put_wqe(&self->v, self->wqe, p.len);
	expect_refused(_metadata, self, &p, EINVAL);
	expect_still_posts(_metadata, self);
}

/* A result the kernel cannot write: reported before the write, so no post. */
TEST_F(refusal, unwritable_result)
{
	struct mlx4_bf_post_result *ro = mmap(NULL, PAGE, PROT_READ,
					      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct qp_post p = {
		.fd = self->v.ctx->cmd_fd, .wqe = good_wqe(self), .len = 64, .result = ro,
	};

	ASSERT_NE(MAP_FAILED, ro);
	expect_refused(_metadata, self, &p, EFAULT);
	munmap(ro, PAGE);
	expect_still_posts(_metadata, self);
}

/* The WQE names the QP: none, or a number that is none of this context's. */
TEST_F(refusal, qp_numbers_not_the_contexts)
{
	struct qp_post p = { .fd = self->v.ctx->cmd_fd, .len = 64 };

	p.wqe = good_wqe(self);
	name_qpn((uint8_t *)p.wqe, 0);
	expect_refused(_metadata, self, &p, EINVAL);
	p.wqe = good_wqe(self);
	name_qpn((uint8_t *)p.wqe, verbs_qpn(&self->v) ^ 1);
	expect_refused(_metadata, self, &p, ENOENT);
	expect_still_posts(_metadata, self);
}

/*
 * Another context's QP, named by a WQE posted through this one, and this
 * context's QP posted through the other: neither context reaches the
 * other's QPs.
 */
TEST_F(refusal, another_contexts_qp)
{
	struct qp_post p = { .fd = self->v.ctx->cmd_fd, .len = 64 };
	struct verbs other;

	ASSERT_EQ(0, verbs_open(&other));
	p.wqe = good_wqe(self);
	name_qpn((uint8_t *)p.wqe, verbs_qpn(&other));
	expect_refused(_metadata, self, &p, ENOENT);
	p.wqe = good_wqe(self);
	p.fd = other.ctx->cmd_fd;
	expect_refused(_metadata, self, &p, ENOENT);
	EXPECT_TRUE(verbs_cq_quiet(other.cq));
	verbs_close(&other);
	expect_still_posts(_metadata, self);
}

/*
 * Another process, with a context of its own, posts a WQE naming this
 * process's QP: not found there. The child says what it got by its exit
 * status (the errno, 255 if it could not try).
 */
TEST_F(refusal, another_process)
{
	struct model_posts before, after;
	int status;
	pid_t pid;

	good_wqe(self);
	model_posts(&self->model, &before);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct ibv_context *ctx = verbs_open_device();
		struct qp_post p = { .wqe = self->wqe, .len = 64 };

		if (!ctx)
			_exit(255);
		p.fd = ctx->cmd_fd;
		_exit(qp_post_call(&p));
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(ENOENT, WEXITSTATUS(status));
	model_posts(&self->model, &after);
	EXPECT_EQ(0, memcmp(&before, &after, sizeof(after)));
	EXPECT_TRUE(verbs_cq_quiet(self->v.cq));
	expect_still_posts(_metadata, self);
}

/* A QP posts in RTS only: not in RESET or RTR, not once destroyed. */
TEST_F(refusal, qp_states)
{
	struct qp_post p = { .fd = self->v.ctx->cmd_fd, .len = 64 };
	struct ibv_qp *qp = verbs_rc_qp(self->v.pd, self->v.cq);
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	struct ibv_port_attr port;

	ASSERT_NE(NULL, qp);
	p.wqe = good_wqe(self);
	name_qpn((uint8_t *)p.wqe, qp->qp_num);
	expect_refused(_metadata, self, &p, EINVAL);
	ASSERT_EQ(0, ibv_query_port(self->v.ctx, 1, &port));
	ASSERT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS));
	expect_refused(_metadata, self, &p, EINVAL);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = port.lid;
	a.ah_attr.port_num = 1;
	ASSERT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				   IBV_QP_MIN_RNR_TIMER));
	expect_refused(_metadata, self, &p, EINVAL);
	ASSERT_EQ(0, ibv_destroy_qp(qp));
	expect_refused(_metadata, self, &p, ENOENT);
	expect_still_posts(_metadata, self);
}

TEST_F(refusal, closed_command_file)
{
	struct qp_post p = { .wqe = good_wqe(self), .len = 64 };

	p.fd = dup(self->v.ctx->cmd_fd);
	ASSERT_LE(0, p.fd);
	close(p.fd);
	expect_refused(_metadata, self, &p, EBADF);
	expect_still_posts(_metadata, self);
}

/* The verbs commands a post depends on refuse bad input with clean errnos. */
TEST_F(refusal, verbs_commands)
{
	struct ibv_qp_init_attr big = {
		.send_cq = self->v.cq,
		.recv_cq = self->v.cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1u << 20, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS };
	void *hole = mmap(NULL, 4 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_qp *qp;

	ASSERT_NE(MAP_FAILED, hole);
	/* more WRs than the device has */
	errno = 0;
	EXPECT_EQ(NULL, ibv_create_qp(self->v.pd, &big));
	EXPECT_EQ(EINVAL, errno);
	/* a region over memory that is not there */
	munmap(hole, 4 * PAGE);
	errno = 0;
	EXPECT_EQ(NULL, ibv_reg_mr(self->v.pd, hole, 4 * PAGE, IBV_ACCESS_LOCAL_WRITE));
	EXPECT_EQ(EFAULT, errno);
	/* RESET to RTS in one step */
	qp = verbs_rc_qp(self->v.pd, self->v.cq);
	ASSERT_NE(NULL, qp);
	EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &rts, IBV_QP_STATE));
	EXPECT_EQ(0, ibv_destroy_qp(qp));
	expect_still_posts(_metadata, self);
}

TEST_HARNESS_MAIN
