// SPDX-License-Identifier: GPL-2.0
/*
 * RDMA atomics on the RDMA device (mlx4_bf<N>): compare-and-swap and
 * fetch-and-add between two contexts' RC QPs, as a ConnectX-3 executes
 * them: on a big-endian 64-bit operand in the responder's memory (rdma-core's
 * own tests read it so), the old value returned into the requester's one
 * 8-byte data segment. Proves:
 * - the device says it has them (IBV_ATOMIC_HCA: the adapter's flag);
 * - through unmodified libibverbs and libmlx4 (which ring the doorbell for
 *   them: an atomic gathers): a swap where the operand matches and none
 *   where it does not, each returning the old value; an add whose carry
 *   crosses bytes as a big-endian integer's does, and one that wraps;
 * - the responder refuses, touching nothing: an operand not 8-byte aligned
 *   (IB's Invalid Request), a region without remote atomics, a QP that
 *   does not enable them (Remote Access);
 * - through QP_POST, the WQE as libmlx4 builds it posts on the doorbell
 *   path and adds; one whose old value would land in a region the adapter
 *   may not write, or whose data segment is not the operand's 8 bytes, is
 *   refused by the driver (EACCES, EINVAL) with nothing posted.
 * The post counts need the model's diagnostic block; without it the
 * QP_POST tests SKIP.
 */
#include <endian.h>

#include "kselftest_harness.h"
#include "mlx4_bf_model.h"
#include "mlx4_bf_verbs.h"

/* The responder's operands: a cache line, so that +4 is still inside. */
#define OPERAND_BYTES	64
/* What the requester's result holds before an atomic returns into it. */
#define POISON		0xa5a5a5a5a5a5a5a5ull
#define ATOMIC_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_ATOMIC)

FIXTURE(atomic)
{
	/* a asks, b answers */
	struct verbs a, b;
	uint64_t *operand;
	struct ibv_mr *operand_mr;
	uint64_t *result;
	struct ibv_mr *result_mr;
	struct model model;
	int have_model;
};

/* Its helpers spell FIXTURE_DATA(atomic) as struct _test_data_atomic: checkpatch sees a type. */

/*
 * The two contexts, their QPs connected enabling @access for each other,
 * b's operands (remote atomics allowed) and a's result; 0 or an errno.
 */
static int open_players(struct _test_data_atomic *self, unsigned int access)
{
	int err = verbs_open_pair(&self->a, &self->b, access, 1, 0);

	if (err)
		return err;
	self->operand = aligned_alloc(PAGE, PAGE);
	self->result = aligned_alloc(PAGE, PAGE);
	/* aligned_alloc() says ENOMEM in errno */
	if (!self->operand || !self->result)
		return errno;
	memset(self->operand, 0, PAGE);
	*self->result = POISON;
	self->operand_mr = ibv_reg_mr(self->b.pd, self->operand, OPERAND_BYTES,
				      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	self->result_mr = ibv_reg_mr(self->a.pd, self->result, PAGE, IBV_ACCESS_LOCAL_WRITE);
	return self->operand_mr && self->result_mr ? 0 : errno;
}

FIXTURE_SETUP(atomic)
{
	memset(self, 0, sizeof(*self));
	if (!verbs_device_present())
		SKIP(return, NO_VERBS_DEVICE);
	self->have_model = !model_open(&self->model);
}

FIXTURE_TEARDOWN(atomic)
{
	if (self->operand_mr)
		ibv_dereg_mr(self->operand_mr);
	if (self->result_mr)
		ibv_dereg_mr(self->result_mr);
	if (self->b.ctx)
		verbs_close(&self->b);
	if (self->a.ctx)
		verbs_close(&self->a);
	free(self->operand);
	free(self->result);
	if (self->have_model)
		model_close(&self->model);
}

/*
 * a's atomic @op on b's operand at @raddr (@rkey) through ibv_post_send(),
 * signaled; its completion into @wc. 0, or -1 if it was not posted or
 * did not complete.
 */
static int atomic_wc(struct _test_data_atomic *self, enum ibv_wr_opcode op, uint64_t raddr,
		     uint32_t rkey, uint64_t compare_add, uint64_t swap, struct ibv_wc *wc)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)self->result, .length = 8, .lkey = self->result_mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.atomic = { .remote_addr = raddr, .compare_add = compare_add,
			       .swap = swap, .rkey = rkey },
	}, *bad;

	*self->result = POISON;
	if (ibv_post_send(self->a.qp, &wr, &bad))
		return -1;
	return verbs_wait_wc(self->a.cq, wc);
}

/*
 * The remote access faults the adapter counted since @before (the model's
 * counter), declared as the test's own (mlx4_bf_invariants subtracts
 * them); nothing without the model.
 */
static void declare_remote_faults(struct _test_data_atomic *self, uint64_t before)
{
	if (!self->have_model)
		return;
	for (uint64_t n = model_read(&self->model, MODEL_REMOTE_ACCESS_FAULTS) - before; n; n--)
		declare_fault("remote");
}

/* The model's remote access faults so far, 0 without it. */
static uint64_t remote_faults(struct _test_data_atomic *self)
{
	return self->have_model ? model_read(&self->model, MODEL_REMOTE_ACCESS_FAULTS) : 0;
}

/* An atomic on b's first operand; its completion into @wc, as atomic_wc(). */
static int on_operand(struct _test_data_atomic *self, enum ibv_wr_opcode op,
		      uint64_t compare_add, uint64_t swap, struct ibv_wc *wc)
{
	return atomic_wc(self, op, (uintptr_t)self->operand, self->operand_mr->rkey,
			 compare_add, swap, wc);
}

TEST_F(atomic, the_device_has_them)
{
	struct ibv_device_attr attr;

	ASSERT_EQ(0, open_players(self, ATOMIC_ACCESS));
	ASSERT_EQ(0, ibv_query_device(self->a.ctx, &attr));
	EXPECT_EQ(IBV_ATOMIC_HCA, attr.atomic_cap);
	EXPECT_LE(1, attr.max_qp_rd_atom);
}

TEST_F(atomic, compare_and_swap_swaps_only_a_match)
{
	const uint64_t old = 0x0102030405060708ull, swap = 0x1122334455667788ull;
	struct ibv_wc wc;

	ASSERT_EQ(0, open_players(self, ATOMIC_ACCESS));
	*self->operand = htobe64(old);
	ASSERT_EQ(0, on_operand(self, IBV_WR_ATOMIC_CMP_AND_SWP, old, swap, &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
	EXPECT_EQ(IBV_WC_COMP_SWAP, wc.opcode);
	EXPECT_EQ(8, wc.byte_len);
	EXPECT_EQ(7, wc.wr_id);
	EXPECT_EQ(htobe64(old), *self->result);
	EXPECT_EQ(htobe64(swap), *self->operand);
	/* the same again: the operand no longer matches, stays, and is returned */
	ASSERT_EQ(0, on_operand(self, IBV_WR_ATOMIC_CMP_AND_SWP, old, 0, &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(htobe64(swap), *self->result);
	EXPECT_EQ(htobe64(swap), *self->operand);
}

TEST_F(atomic, fetch_and_add_adds_a_big_endian_integer)
{
	struct ibv_wc wc;

	ASSERT_EQ(0, open_players(self, ATOMIC_ACCESS));
	/* the carry crosses four bytes of a big-endian integer */
	*self->operand = htobe64(0xffffffffull);
	ASSERT_EQ(0, on_operand(self, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0, &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
	EXPECT_EQ(IBV_WC_FETCH_ADD, wc.opcode);
	EXPECT_EQ(8, wc.byte_len);
	EXPECT_EQ(htobe64(0xffffffffull), *self->result);
	EXPECT_EQ(htobe64(0x100000000ull), *self->operand);
	/* and it wraps at 2^64 */
	*self->operand = htobe64(~0ull);
	ASSERT_EQ(0, on_operand(self, IBV_WR_ATOMIC_FETCH_AND_ADD, 2, 0, &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(htobe64(~0ull), *self->result);
	EXPECT_EQ(htobe64(1), *self->operand);
}

TEST_F(atomic, a_misaligned_operand_is_an_invalid_request)
{
	uint8_t before[OPERAND_BYTES];
	struct ibv_wc wc;
	uint64_t faults;

	ASSERT_EQ(0, open_players(self, ATOMIC_ACCESS));
	memset(self->operand, 0x5a, OPERAND_BYTES);
	memcpy(before, self->operand, OPERAND_BYTES);
	faults = remote_faults(self);
	ASSERT_EQ(0, atomic_wc(self, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)self->operand + 4,
			       self->operand_mr->rkey, 1, 0, &wc));
	declare_remote_faults(self, faults);
	EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
	EXPECT_EQ(0, memcmp(before, self->operand, OPERAND_BYTES));
	EXPECT_EQ(POISON, *self->result);
}

TEST_F(atomic, a_region_without_remote_atomics_is_refused)
{
	struct ibv_wc wc;
	uint64_t faults;

	ASSERT_EQ(0, open_players(self, ATOMIC_ACCESS));
	/* b's sink takes remote writes, not atomics */
	memset(self->b.sink, 0x5a, 8);
	faults = remote_faults(self);
	ASSERT_EQ(0, atomic_wc(self, IBV_WR_ATOMIC_FETCH_AND_ADD, verbs_sink_addr(&self->b),
			       self->b.sink_mr->rkey, 1, 0, &wc));
	declare_remote_faults(self, faults);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
	EXPECT_EQ(0x5a5a5a5a5a5a5a5aull, *(uint64_t *)self->b.sink);
	EXPECT_EQ(POISON, *self->result);
}

TEST_F(atomic, a_qp_without_remote_atomics_refuses_them)
{
	struct ibv_wc wc;
	uint64_t faults;

	ASSERT_EQ(0, open_players(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
	*self->operand = htobe64(41);
	faults = remote_faults(self);
	ASSERT_EQ(0, on_operand(self, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0, &wc));
	declare_remote_faults(self, faults);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
	EXPECT_EQ(htobe64(41), *self->operand);
	EXPECT_EQ(POISON, *self->result);
}

/* libmlx4's fetch-and-add of @add on b's first operand, into a's result. */
static int build_fetch_add(struct _test_data_atomic *self, uint8_t *wqe, uint64_t add,
			   const struct ibv_mr *into)
{
	struct sge result = { .addr = (uintptr_t)self->result, .length = 8, .lkey = into->lkey };

	return build_atomic(wqe, OP_ATOMIC_FA, (uintptr_t)self->operand, self->operand_mr->rkey,
			    add, 0, &result);
}

TEST_F(atomic, qp_post_rings_the_doorbell_for_one)
{
	struct model_posts before, after;
	uint8_t wqe[MAX_WQE + 64];
	int len;

	if (!self->have_model)
		SKIP(return, NO_ANALYZER);
	ASSERT_EQ(0, open_players(self, ATOMIC_ACCESS));
	*self->operand = htobe64(0x00ff);
	len = build_fetch_add(self, wqe, 1, self->result_mr);
	model_posts(&self->model, &before);
	ASSERT_EQ(0, verbs_send_wqe(&self->a, wqe, len));
	ASSERT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(self->a.cq));
	model_posts(&self->model, &after);
	EXPECT_EQ(htobe64(0x0100), *self->operand);
	EXPECT_EQ(htobe64(0x00ff), *self->result);
	/* it gathers: fetched by DMA after a doorbell, never BlueFlame */
	EXPECT_EQ(before.wqe_bf, after.wqe_bf);
	EXPECT_EQ(before.wqe_dma + 1, after.wqe_dma);
	EXPECT_EQ(before.doorbells + 1, after.doorbells);
}

TEST_F(atomic, qp_post_refuses_what_the_adapter_could_not_do)
{
	struct model_posts before, after;
	uint8_t wqe[MAX_WQE + 64];
	struct ibv_mr *read_only;
	struct qp_post p = { .wqe = wqe };

	if (!self->have_model)
		SKIP(return, NO_ANALYZER);
	ASSERT_EQ(0, open_players(self, ATOMIC_ACCESS));
	p.fd = self->a.ctx->cmd_fd;
	*self->operand = htobe64(5);
	read_only = ibv_reg_mr(self->a.pd, self->result, PAGE, 0);
	ASSERT_NE(NULL, read_only);
	model_posts(&self->model, &before);
	/* the old value would land where the adapter may not write */
	p.len = build_fetch_add(self, wqe, 1, read_only);
	p.wqe = verbs_put_wqe(&self->a, wqe, p.len);
	EXPECT_EQ(EACCES, qp_post_call(&p));
	/* a data segment of 16 bytes: not the operand's 8 */
	p.len = build_fetch_add(self, wqe, 1, self->result_mr);
	put_be32(wqe + 48, 16);
	p.wqe = verbs_put_wqe(&self->a, wqe, p.len);
	EXPECT_EQ(EINVAL, qp_post_call(&p));
	model_posts(&self->model, &after);
	EXPECT_EQ(0, memcmp(&before, &after, sizeof(after)));
	EXPECT_TRUE(verbs_cq_quiet(self->a.cq));
	EXPECT_EQ(htobe64(5), *self->operand);
	EXPECT_EQ(0, ibv_dereg_mr(read_only));
}

TEST_HARNESS_MAIN
