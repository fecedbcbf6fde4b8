// SPDX-License-Identifier: GPL-2.0
/*
 * What the RDMA device's QP_POST method refuses, and that a refused call
 * reached nothing: the errno it names, the adapter's counters as before
 * (the analyzer, mlx4_bf_model.h) and no completion. A process reaches only
 * its own context's QPs in RTS (or later states), with WQEs that name them,
 * are whole and well formed, and gather only from regions of the QP's PD;
 * the verbs commands the WQEs depend on refuse bad input with clean errnos.
 * A context takes a UAR of its own: when none is left the next is refused
 * cleanly, and each comes back at close.
 *
 * Ported from the misc device's mlx4_bf_abi_test (and the refusal in
 * mlx4_bf_analyzer_test), every rule a post through the method still has.
 * Dropped:
 * - the owner bit and the QPN field as the kernel's alone
 *   (owner_bit_is_the_kernels, qpn_field_is_the_kernels): libmlx4 stamps
 *   its WQEs, and the QPN is how the method finds the QP
 *   (qp_numbers_not_the_contexts here);
 * - the misc ioctl's framing (unknown method, unknown mandatory or
 *   optional attribute, reserved fields, header length, output length,
 *   header at an unmapped address, ioctl number) and the largest length
 *   its attribute carried: RDMA_VERBS_IOCTL is the RDMA core's to parse
 *   (ib_uverbs_ioctl()), the WQE's length checked against the method's
 *   description (malformed_wqes), its attributes fuzzed by
 *   mlx4_bf_qp_post_fuzz;
 * - open/close cycles round the UAR allocator: run_out_cleanly_and_come_back
 *   opens every UAR twice over instead.
 */
#include <sys/resource.h>
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
	/* no WQE at all: the core checks the attribute's least length */
	p.len = 0;
	expect_refused(_metadata, self, &p, EINVAL);
	/* an inline segment crossing 64 bytes: at 32, 29 bytes would end at 65 */
	slot = good_wqe(self);
	put_be32(slot + 32, INLINE_SEG | 29);
	p.wqe = slot;
	p.len = 64;
	expect_refused(_metadata, self, &p, EINVAL);
	/* an inline byte count past the WQE's end: 28 bytes in a WQE of 48 */
	build_rdma_write(self->wqe, 10, 1, verbs_sink_addr(&self->v), self->v.sink_mr->rkey);
	slot = verbs_put_wqe(&self->v, self->wqe, 48);
	put_be32(slot + 32, INLINE_SEG | 28);
	p.wqe = slot;
	p.len = 48;
	expect_refused(_metadata, self, &p, EINVAL);
	/* a WQE the kernel cannot read */
	good_wqe(self);
	p.wqe = (void *)16;
	p.len = 64;
	expect_refused(_metadata, self, &p, EFAULT);
	expect_still_posts(_metadata, self);
}

/* A whole WQE whose last bytes lie on an unmapped page: none of it is posted. */
TEST_F(refusal, wqe_ending_on_an_unmapped_page)
{
	uint8_t *pages = map_pages(2, PROT_READ | PROT_WRITE);
	struct qp_post p = { .fd = self->v.ctx->cmd_fd, .len = 64 };

	ASSERT_NE(NULL, pages);
	/* its first 32 bytes at the end of the first page, the rest unmapped */
	memcpy(pages + PAGE - 32, good_wqe(self), 32);
	ASSERT_EQ(0, munmap(pages + PAGE, PAGE));
	p.wqe = pages + PAGE - 32;
	expect_refused(_metadata, self, &p, EFAULT);
	munmap(pages, PAGE);
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

/*
 * A QP posts in RTS only: not in RESET, INIT or RTR, not once destroyed. The
 * WQE is a good one in that QP's own send queue: moved on to RTS, the QP
 * posts it (the state alone refused it), and once the QP is destroyed its
 * number is gone. (libmlx4 stamps the whole send queue afresh when the QP
 * goes from RESET to INIT: the WQE is put in its slot again before each
 * call.)
 */
TEST_F(refusal, qp_states)
{
	struct qp_post p = { .fd = self->v.ctx->cmd_fd, .len = 64 };
	struct verbs w = { .ctx = self->v.ctx, .pd = self->v.pd, .cq = self->v.cq };
	uint8_t want[16];

	w.qp = verbs_rc_qp(self->v.pd, self->v.cq);
	ASSERT_NE(NULL, w.qp);
	ASSERT_EQ(0, verbs_qp_queue(w.qp, &w.dv));
	build_rdma_write(self->wqe, 16, 9, verbs_sink_addr(&self->v), self->v.sink_mr->rkey);
	/* stamped for w's QP, its first slot; the bytes stay in self->wqe */
	p.wqe = verbs_put_wqe(&w, self->wqe, 64);
	expect_refused(_metadata, self, &p, EINVAL);
	ASSERT_EQ(0, verbs_to_init(w.qp, IBV_ACCESS_REMOTE_WRITE));
	memcpy(verbs_slot(&w, 0), self->wqe, 64);
	expect_refused(_metadata, self, &p, EINVAL);
	ASSERT_EQ(0, verbs_to_rtr(w.qp, w.qp->qp_num));
	memcpy(verbs_slot(&w, 0), self->wqe, 64);
	expect_refused(_metadata, self, &p, EINVAL);
	ASSERT_EQ(0, verbs_to_rts(w.qp));
	/* the very WQE the other states refused */
	memcpy(verbs_slot(&w, 0), self->wqe, 64);
	memset(self->v.sink, 0, sizeof(want));
	ASSERT_EQ(0, qp_post_call(&p)) TH_LOG("the same WQE in RTS");
	ASSERT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(self->v.cq));
	rdma_write_pattern(want, sizeof(want), 9);
	EXPECT_EQ(0, memcmp(self->v.sink, want, sizeof(want)));
	ASSERT_EQ(0, ibv_destroy_qp(w.qp));
	/* libmlx4 freed the queue with the QP: the same bytes from here */
	p.wqe = self->wqe;
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

/* The most contexts a test opens: past the model's 1024 UARs. */
#define MAX_CONTEXTS	4096

/*
 * Opens contexts on @dev until one fails, into @ctxs; how many opened. The
 * failed open's errno stays in errno.
 */
static int open_until_refused(struct ibv_device *dev, struct ibv_context **ctxs)
{
	int n = 0;

	errno = 0;
	while (n < MAX_CONTEXTS && (ctxs[n] = ibv_open_device(dev)))
		n++;
	return n;
}

static void close_all(struct ibv_context **ctxs, int n)
{
	while (n > 0)
		ibv_close_device(ctxs[--n]);
}

/*
 * Each verbs context takes a UAR of its own (its doorbell and BlueFlame
 * pages): once none is left, a new one is refused with EBUSY and nothing
 * else; closed, every one comes back, so the same number opens again and
 * then a context posts.
 */
/* A fixture only for its timeout: two thousand contexts under TCG. */
FIXTURE(contexts) {};
FIXTURE_SETUP(contexts) {}
FIXTURE_TEARDOWN(contexts) {}

TEST_F_TIMEOUT(contexts, run_out_cleanly_and_come_back, 180)
{
	struct rlimit rl = { 65536, 65536 };
	struct ibv_context **ctxs = calloc(MAX_CONTEXTS, sizeof(*ctxs));
	struct ibv_device **list;
	struct ibv_device *dev = NULL;
	uint8_t wqe[MAX_WQE + 64];
	struct verbs v;
	int first, again, err;

	if (!verbs_device_present())
		SKIP(return, NO_VERBS_DEVICE);
	ASSERT_NE(NULL, ctxs);
	/* a context holds two files, its command and its async events */
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &rl));
	list = ibv_get_device_list(NULL);
	ASSERT_NE(NULL, list);
	for (int i = 0; list[i] && !dev; i++)
		if (!strncmp(ibv_get_device_name(list[i]), VERBS_DEV_PREFIX,
			     strlen(VERBS_DEV_PREFIX)))
			dev = list[i];
	ASSERT_NE(NULL, dev);

	first = open_until_refused(dev, ctxs);
	err = errno;
	close_all(ctxs, first);
	ASSERT_GT(MAX_CONTEXTS, first) TH_LOG("%d contexts and no refusal", first);
	EXPECT_EQ(EBUSY, err) TH_LOG("context %d refused with %s", first + 1, strerror(err));
	EXPECT_LT(1, first);
	again = open_until_refused(dev, ctxs);
	err = errno;
	close_all(ctxs, again);
	EXPECT_EQ(first, again) TH_LOG("UARs not given back at close");
	EXPECT_EQ(EBUSY, err);
	printf("# %d contexts at once\n", first);
	ibv_free_device_list(list);
	free(ctxs);
	ASSERT_EQ(0, verbs_open(&v));
	build_rdma_write(wqe, 16, 1, verbs_sink_addr(&v), v.sink_mr->rkey);
	EXPECT_EQ(0, verbs_send_wqe(&v, wqe, 64));
	EXPECT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(v.cq));
	EXPECT_EQ(0, verbs_close(&v));
}

TEST_HARNESS_MAIN
