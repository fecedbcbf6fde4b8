// SPDX-License-Identifier: GPL-2.0
/*
 * UD QPs on the RDMA device (mlx4_bf<N>), as ibv_ud_pingpong uses them:
 * created, moved to RTS with a Q_Key (port, P_Key index, Q_Key; the state
 * alone; the send PSN), address handles made by libmlx4 in user space.
 * Proves:
 * - ibv_query_qp() reads the Q_Key and the state back;
 * - a SEND through unmodified libibverbs lands in the receiver's buffer
 *   after the 40-byte GRH slot (left as it was: no GRH asked for), its
 *   completion counting the slot, naming the sender's QPN and LID;
 * - a datagram whose Q_Key is not the receiver's is dropped: the sender
 *   completes, the receiver sees nothing; a controlled Q_Key (bit 31)
 *   sends with the sender's own;
 * - through QP_POST, the datagram WQE as libmlx4 builds it goes by
 *   BlueFlame and is delivered; one whose address vector names another PD
 *   than its QP's is refused (EACCES) with nothing posted.
 * The post counts need the model's diagnostic block; without it the
 * QP_POST tests SKIP.
 */
#include "kselftest_harness.h"
#include "mlx4_bf_model.h"
#include "mlx4_bf_verbs.h"

#define QKEY		0x11111111u
#define GRH_BYTES	40
#define PAYLOAD		64
#define RECV_BYTES	(GRH_BYTES + PAYLOAD)
#define POISON		0xa5

FIXTURE(ud)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	/* a sends through libibverbs, c through QP_POST, b receives */
	struct ibv_qp *a, *b, *c;
	struct ibv_ah *ah;
	uint8_t *buf;
	struct ibv_mr *mr;
	uint16_t lid;
	struct model model;
	int have_model;
};

/* Its helpers spell FIXTURE_DATA(ud) as struct _test_data_ud: checkpatch sees a type. */

static struct ibv_qp *ud_qp(struct _test_data_ud *self)
{
	struct ibv_qp_init_attr init = {
		.send_cq = self->cq,
		.recv_cq = self->cq,
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = VERBS_SQ_WRS, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = PAYLOAD },
	};

	return ibv_create_qp(self->pd, &init);
}

/* ibv_ud_pingpong's transitions to RTS; 0 or an errno. */
static int ud_to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = QKEY,
	};
	int err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				IBV_QP_QKEY);

	if (!err) {
		a.qp_state = IBV_QPS_RTR;
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	}
	if (!err) {
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0x123;
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	return err;
}

FIXTURE_SETUP(ud)
{
	struct ibv_port_attr port;
	struct ibv_ah_attr ah = { .port_num = 1 };

	memset(self, 0, sizeof(*self));
	if (!verbs_device_present())
		SKIP(return, NO_VERBS_DEVICE);
	self->have_model = !model_open(&self->model);
	self->ctx = verbs_open_device();
	ASSERT_NE(NULL, self->ctx);
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	self->cq = ibv_create_cq(self->ctx, VERBS_CQ_ENTRIES, NULL, NULL, 0);
	ASSERT_NE(NULL, self->cq);
	self->buf = aligned_alloc(PAGE, PAGE);
	ASSERT_NE(NULL, self->buf);
	memset(self->buf, POISON, PAGE);
	self->mr = ibv_reg_mr(self->pd, self->buf, PAGE, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, self->mr);
	self->a = ud_qp(self);
	self->b = ud_qp(self);
	self->c = ud_qp(self);
	ASSERT_NE(NULL, self->a);
	ASSERT_NE(NULL, self->b);
	ASSERT_NE(NULL, self->c);
	ASSERT_EQ(0, ud_to_rts(self->a));
	ASSERT_EQ(0, ud_to_rts(self->b));
	ASSERT_EQ(0, ud_to_rts(self->c));
	ASSERT_EQ(0, ibv_query_port(self->ctx, 1, &port));
	self->lid = port.lid;
	ah.dlid = port.lid;
	self->ah = ibv_create_ah(self->pd, &ah);
	ASSERT_NE(NULL, self->ah);
}

FIXTURE_TEARDOWN(ud)
{
	if (self->ah)
		ibv_destroy_ah(self->ah);
	if (self->c)
		ibv_destroy_qp(self->c);
	if (self->b)
		ibv_destroy_qp(self->b);
	if (self->a)
		ibv_destroy_qp(self->a);
	if (self->mr)
		ibv_dereg_mr(self->mr);
	if (self->cq)
		ibv_destroy_cq(self->cq);
	if (self->pd)
		ibv_dealloc_pd(self->pd);
	if (self->ctx)
		ibv_close_device(self->ctx);
	free(self->buf);
	if (self->have_model)
		model_close(&self->model);
}

/* One receive on b into the first RECV_BYTES of the buffer. */
static int post_recv_b(struct _test_data_ud *self)
{
	return verbs_post_recv(self->b, self->mr, self->buf, RECV_BYTES, 2);
}

/* a sends PAYLOAD bytes (pattern 0x30 + i) inline to b with @qkey, signaled. */
static int send_a(struct _test_data_ud *self, uint32_t qkey)
{
	uint8_t msg[PAYLOAD];
	struct ibv_sge sge = { .addr = (uintptr_t)msg, .length = PAYLOAD };
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
		.wr.ud = { .ah = self->ah, .remote_qpn = self->b->qp_num, .remote_qkey = qkey },
	}, *bad;

	for (int i = 0; i < PAYLOAD; i++)
		msg[i] = (uint8_t)(0x30 + i);
	return ibv_post_send(self->a, &wr, &bad);
}

/* The next completion, which must be @qp's, into @wc; 0 or -1. */
static int wc_of(struct _test_data_ud *self, struct ibv_qp *qp, struct ibv_wc *wc)
{
	if (verbs_wait_wc(self->cq, wc))
		return -1;
	return wc->qp_num == qp->qp_num ? 0 : -1;
}

TEST_F(ud, query_reads_the_q_key_back)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;

	memset(&attr, POISON, sizeof(attr));
	ASSERT_EQ(0, ibv_query_qp(self->b, &attr, IBV_QP_STATE | IBV_QP_QKEY | IBV_QP_PORT |
				  IBV_QP_SQ_PSN, &init));
	EXPECT_EQ(IBV_QPS_RTS, attr.qp_state);
	EXPECT_EQ(QKEY, attr.qkey);
	EXPECT_EQ(1, attr.port_num);
	EXPECT_EQ(0x123, attr.sq_psn);
	EXPECT_EQ(IBV_QPT_UD, init.qp_type);
}

TEST_F(ud, a_send_lands_after_the_grh_slot)
{
	uint8_t want[PAYLOAD], slot[GRH_BYTES];
	struct ibv_wc wc;

	memset(slot, POISON, sizeof(slot));
	for (int i = 0; i < PAYLOAD; i++)
		want[i] = (uint8_t)(0x30 + i);
	ASSERT_EQ(0, post_recv_b(self));
	ASSERT_EQ(0, send_a(self, QKEY));
	/* the sender's and the receiver's completions, in either order */
	for (int n = 0; n < 2; n++) {
		ASSERT_EQ(0, verbs_wait_wc(self->cq, &wc));
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
		if (wc.qp_num == self->a->qp_num) {
			EXPECT_EQ(IBV_WC_SEND, wc.opcode);
			continue;
		}
		ASSERT_EQ(self->b->qp_num, wc.qp_num);
		EXPECT_EQ(IBV_WC_RECV, wc.opcode);
		EXPECT_EQ(RECV_BYTES, wc.byte_len);
		EXPECT_EQ(self->a->qp_num, wc.src_qp);
		EXPECT_EQ(self->lid, wc.slid);
		EXPECT_EQ(0, wc.wc_flags & IBV_WC_GRH);
	}
	EXPECT_EQ(0, memcmp(self->buf + GRH_BYTES, want, PAYLOAD));
	EXPECT_EQ(0, memcmp(self->buf, slot, GRH_BYTES)) TH_LOG("no GRH: the slot stays");
}

TEST_F(ud, a_wrong_q_key_is_dropped)
{
	struct ibv_wc wc;

	ASSERT_EQ(0, post_recv_b(self));
	ASSERT_EQ(0, send_a(self, QKEY + 1));
	ASSERT_EQ(0, wc_of(self, self->a, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("UD: the sender never knows");
	EXPECT_TRUE(verbs_cq_quiet(self->cq));
	EXPECT_EQ(POISON, self->buf[GRH_BYTES]);
}

TEST_F(ud, a_controlled_q_key_is_the_senders_own)
{
	struct ibv_wc wc;
	int received = 0;

	ASSERT_EQ(0, post_recv_b(self));
	ASSERT_EQ(0, send_a(self, 0x80000000u));
	for (int n = 0; n < 2; n++) {
		ASSERT_EQ(0, verbs_wait_wc(self->cq, &wc));
		EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
		received += wc.qp_num == self->b->qp_num;
	}
	EXPECT_EQ(1, received);
	EXPECT_EQ(0x30, self->buf[GRH_BYTES]);
}

/*
 * c's send queue as `struct verbs` holds one, for verbs_send_wqe(); the
 * port and PD number of the address vector libmlx4 built into a's first
 * slot by one send, into @to.
 */
static void qp_post_setup(struct _test_data_ud *self, struct verbs *w, struct ud_dest *to)
{
	struct mlx4dv_qp a_dv;
	struct ibv_wc wc;
	uint8_t *a_slot;

	memset(w, 0, sizeof(*w));
	w->ctx = self->ctx;
	w->pd = self->pd;
	w->cq = self->cq;
	w->qp = self->c;
	/* SKIP in the callers keeps these from failing their tests */
	if (verbs_qp_queue(self->c, &w->dv) || verbs_qp_queue(self->a, &a_dv))
		return;
	if (send_a(self, QKEY + 1) || wc_of(self, self->a, &wc))
		return;
	a_slot = (uint8_t *)a_dv.buf.buf + a_dv.sq.offset;
	to->port_pd = get_be32(a_slot + 16);
	to->dlid = self->lid;
	to->dqpn = self->b->qp_num;
	to->qkey = QKEY;
}

TEST_F(ud, qp_post_sends_a_datagram_by_blueflame)
{
	struct model_posts before, after;
	uint8_t wqe[MAX_WQE + 64], want[PAYLOAD];
	struct ud_dest to = { 0 };
	struct verbs w;
	struct ibv_wc wc;
	int len;

	if (!self->have_model)
		SKIP(return, NO_ANALYZER);
	qp_post_setup(self, &w, &to);
	ASSERT_NE(0, to.port_pd);
	EXPECT_EQ(1, to.port_pd >> 24) TH_LOG("libmlx4's AV: port 1");
	ASSERT_EQ(0, post_recv_b(self));
	len = build_ud_send(wqe, &to, PAYLOAD, 5);
	model_posts(&self->model, &before);
	ASSERT_EQ(0, verbs_send_wqe(&w, wqe, len));
	for (int n = 0; n < 2; n++) {
		ASSERT_EQ(0, verbs_wait_wc(self->cq, &wc));
		EXPECT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
		if (wc.qp_num == self->b->qp_num)
			EXPECT_EQ(self->c->qp_num, wc.src_qp);
	}
	model_posts(&self->model, &after);
	EXPECT_EQ(before.wqe_bf + 1, after.wqe_bf);
	EXPECT_EQ(before.wqe_dma, after.wqe_dma);
	expected_payload(want, PAYLOAD, 5);
	EXPECT_EQ(0, memcmp(self->buf + GRH_BYTES, want, PAYLOAD));
}

TEST_F(ud, qp_post_refuses_an_address_vector_of_another_pd)
{
	struct model_posts before, after;
	uint8_t wqe[MAX_WQE + 64];
	struct ud_dest to = { 0 };
	struct verbs w;
	struct qp_post p = { .fd = self->ctx->cmd_fd };

	if (!self->have_model)
		SKIP(return, NO_ANALYZER);
	qp_post_setup(self, &w, &to);
	ASSERT_NE(0, to.port_pd);
	/* the next PD number: not the QP's */
	to.port_pd = (to.port_pd & 0xff000000) | (((to.port_pd & 0xffffff) + 1) & 0xffffff);
	ASSERT_EQ(0, post_recv_b(self));
	p.len = build_ud_send(wqe, &to, PAYLOAD, 5);
	p.wqe = verbs_put_wqe(&w, wqe, p.len);
	model_posts(&self->model, &before);
	EXPECT_EQ(EACCES, qp_post_call(&p));
	model_posts(&self->model, &after);
	EXPECT_EQ(0, memcmp(&before, &after, sizeof(after)));
	EXPECT_TRUE(verbs_cq_quiet(self->cq));
}

TEST_HARNESS_MAIN
