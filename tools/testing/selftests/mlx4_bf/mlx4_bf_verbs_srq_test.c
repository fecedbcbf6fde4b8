// SPDX-License-Identifier: GPL-2.0
/*
 * Shared receive queues on the RDMA device (mlx4_bf<N>), as
 * ibv_srq_pingpong and MPI libraries use them: one SRQ, two RC QPs
 * receiving from it (b and c), each connected to a sender of its own (a
 * to b, d to c), through unmodified libibverbs and libmlx4.
 * Proves:
 * - SENDs to either QP take the SRQ's WQEs in the order they were posted,
 *   each completion naming the QP it arrived on and the WQE's wr_id, the
 *   bytes in that WQE's buffer;
 * - round after round, the WQEs libmlx4 relinks as it frees them are
 *   taken again (the adapter follows each WQE's next index);
 * - an armed limit raises IBV_EVENT_SRQ_LIMIT_REACHED once, when fewer
 *   WQEs than the limit are left, and is then disarmed (query reads 0);
 * - ibv_query_qp of a QP on an SRQ reports no receive queue of its own.
 */
#include <fcntl.h>
#include <poll.h>

#include "kselftest_harness.h"
#include "mlx4_bf_verbs.h"

#define SRQ_WRS		8	/* libmlx4 makes 16 entries: 15 postable */
#define MSG		64
#define SLOTS		16
#define WR_ID		1000

FIXTURE(srq)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	/* a sends to b, d to c; b and c receive from the SRQ */
	struct ibv_qp *a, *b, *c, *d;
	uint8_t *buf;
	struct ibv_mr *mr;
	uint64_t next_wr_id;
};

/* Its helpers spell FIXTURE_DATA(srq) as struct _test_data_srq: checkpatch sees a type. */

/* An RC QP on the fixture's SRQ, in RESET. */
static struct ibv_qp *srq_qp(struct _test_data_srq *self)
{
	struct ibv_qp_init_attr init = {
		.send_cq = self->cq,
		.recv_cq = self->cq,
		.srq = self->srq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = VERBS_SQ_WRS, .max_send_sge = 1,
			 .max_inline_data = MSG },
	};

	return ibv_create_qp(self->pd, &init);
}

FIXTURE_SETUP(srq)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = SRQ_WRS, .max_sge = 1 } };

	memset(self, 0, sizeof(*self));
	if (!verbs_device_present())
		SKIP(return, NO_VERBS_DEVICE);
	self->ctx = verbs_open_device();
	ASSERT_NE(NULL, self->ctx);
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	self->cq = ibv_create_cq(self->ctx, VERBS_CQ_ENTRIES, NULL, NULL, 0);
	ASSERT_NE(NULL, self->cq);
	self->srq = ibv_create_srq(self->pd, &sa);
	ASSERT_NE(NULL, self->srq) TH_LOG("ibv_create_srq: %s", strerror(errno));
	ASSERT_EQ(15, sa.attr.max_wr);
	self->buf = aligned_alloc(PAGE, PAGE);
	ASSERT_NE(NULL, self->buf);
	memset(self->buf, 0, PAGE);
	self->mr = ibv_reg_mr(self->pd, self->buf, PAGE, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, self->mr);
	self->a = verbs_rc_qp(self->pd, self->cq);
	self->d = verbs_rc_qp(self->pd, self->cq);
	self->b = srq_qp(self);
	self->c = srq_qp(self);
	ASSERT_NE(NULL, self->a);
	ASSERT_NE(NULL, self->b);
	ASSERT_NE(NULL, self->c);
	ASSERT_NE(NULL, self->d);
	ASSERT_EQ(0, verbs_connect(self->a, self->b->qp_num, 0));
	ASSERT_EQ(0, verbs_connect(self->b, self->a->qp_num, 0));
	ASSERT_EQ(0, verbs_connect(self->d, self->c->qp_num, 0));
	ASSERT_EQ(0, verbs_connect(self->c, self->d->qp_num, 0));
	self->next_wr_id = WR_ID;
}

FIXTURE_TEARDOWN(srq)
{
	struct ibv_qp *qps[] = { self->d, self->c, self->b, self->a };

	for (int i = 0; i < 4; i++)
		if (qps[i])
			ibv_destroy_qp(qps[i]);
	if (self->srq)
		ibv_destroy_srq(self->srq);
	if (self->mr)
		ibv_dereg_mr(self->mr);
	if (self->cq)
		ibv_destroy_cq(self->cq);
	if (self->pd)
		ibv_dealloc_pd(self->pd);
	if (self->ctx)
		ibv_close_device(self->ctx);
	free(self->buf);
}

/* @n receives on the SRQ, wr_ids from next_wr_id on, each its own slot. */
static int post_srq(struct _test_data_srq *self, int n)
{
	for (int i = 0; i < n; i++) {
		uint64_t id = self->next_wr_id++;
		struct ibv_sge sge = {
			.addr = (uintptr_t)(self->buf + (id % SLOTS) * MSG),
			.length = MSG,
			.lkey = self->mr->lkey,
		};
		struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
		int err = ibv_post_srq_recv(self->srq, &wr, &bad);

		if (err)
			return err;
	}
	return 0;
}

/* @from sends MSG bytes of @fill inline, signaled; 0 or an errno. */
static int send_from(struct ibv_qp *from, uint8_t fill)
{
	uint8_t msg[MSG];
	struct ibv_sge sge = { .addr = (uintptr_t)msg, .length = MSG };
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
	}, *bad;

	memset(msg, fill, sizeof(msg));
	return ibv_post_send(from, &wr, &bad);
}

/*
 * The receive completion of one SEND from @from (its send completion
 * consumed too) into @wc; 0 or -1.
 */
static int one_send(struct _test_data_srq *self, struct ibv_qp *from, uint8_t fill,
		    struct ibv_wc *wc)
{
	struct ibv_wc w;
	int got_recv = 0;

	if (send_from(from, fill))
		return -1;
	for (int n = 0; n < 2; n++) {
		if (verbs_wait_wc(self->cq, &w) || w.status != IBV_WC_SUCCESS)
			return -1;
		if (w.qp_num != from->qp_num) {
			*wc = w;
			got_recv = 1;
		}
	}
	return got_recv ? 0 : -1;
}

TEST_F(srq, sends_to_either_qp_take_its_wqes_in_order)
{
	uint8_t want[MSG];
	struct ibv_wc wc;

	ASSERT_EQ(0, post_srq(self, 4));
	ASSERT_EQ(0, one_send(self, self->a, 0xaa, &wc));
	EXPECT_EQ(self->b->qp_num, wc.qp_num);
	EXPECT_EQ(IBV_WC_RECV, wc.opcode);
	EXPECT_EQ(MSG, wc.byte_len);
	EXPECT_EQ(WR_ID, wc.wr_id);
	ASSERT_EQ(0, one_send(self, self->d, 0xdd, &wc));
	EXPECT_EQ(self->c->qp_num, wc.qp_num);
	EXPECT_EQ(WR_ID + 1, wc.wr_id) TH_LOG("the SRQ's next WQE, whichever QP takes it");
	memset(want, 0xaa, MSG);
	EXPECT_EQ(0, memcmp(self->buf + (WR_ID % SLOTS) * MSG, want, MSG));
	memset(want, 0xdd, MSG);
	EXPECT_EQ(0, memcmp(self->buf + ((WR_ID + 1) % SLOTS) * MSG, want, MSG));
	EXPECT_TRUE(verbs_cq_quiet(self->cq));
}

TEST_F(srq, freed_wqes_are_taken_again_round_after_round)
{
	struct ibv_wc wc;
	uint64_t expect = WR_ID;

	/* Three rounds over all 15 entries: libmlx4 relinks each as it frees it. */
	for (int round = 0; round < 3; round++) {
		ASSERT_EQ(0, post_srq(self, 15));
		for (int i = 0; i < 15; i++) {
			struct ibv_qp *from = i % 2 ? self->d : self->a;

			ASSERT_EQ(0, one_send(self, from, (uint8_t)i, &wc))
				TH_LOG("round %d, send %d", round, i);
			ASSERT_EQ(expect, wc.wr_id) TH_LOG("round %d, send %d", round, i);
			expect++;
		}
	}
}

/* The next async event of the context within 5 s: its type, or -1. */
static int next_async_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	int flags = fcntl(ctx->async_fd, F_GETFL);

	if (flags < 0 || fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK))
		return -1;
	if (poll(&p, 1, 5000) != 1 || ibv_get_async_event(ctx, ev))
		return -1;
	ibv_ack_async_event(ev);
	return ev->event_type;
}

TEST_F(srq, the_armed_limit_fires_once_below_it)
{
	struct ibv_srq_attr attr = { .srq_limit = 3 };
	struct ibv_async_event ev;
	struct ibv_wc wc;

	ASSERT_EQ(0, post_srq(self, 4));
	ASSERT_EQ(0, ibv_modify_srq(self->srq, &attr, IBV_SRQ_LIMIT));
	memset(&attr, 0, sizeof(attr));
	ASSERT_EQ(0, ibv_query_srq(self->srq, &attr));
	EXPECT_EQ(3, attr.srq_limit);
	/* 3 left: not below the limit */
	ASSERT_EQ(0, one_send(self, self->a, 1, &wc));
	ASSERT_EQ(0, ibv_query_srq(self->srq, &attr));
	EXPECT_EQ(3, attr.srq_limit) TH_LOG("still armed");
	/* 2 left: below it */
	ASSERT_EQ(0, one_send(self, self->d, 2, &wc));
	ASSERT_EQ(IBV_EVENT_SRQ_LIMIT_REACHED, next_async_event(self->ctx, &ev));
	EXPECT_EQ(self->srq, ev.element.srq);
	ASSERT_EQ(0, ibv_query_srq(self->srq, &attr));
	EXPECT_EQ(0, attr.srq_limit) TH_LOG("disarmed by the event");
	/* Disarmed: the next consumption raises nothing. */
	ASSERT_EQ(0, one_send(self, self->a, 3, &wc));
	EXPECT_EQ(-1, next_async_event(self->ctx, &ev));
}

TEST_F(srq, a_qp_on_it_has_no_receive_queue)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;

	ASSERT_EQ(0, ibv_query_qp(self->b, &attr, IBV_QP_STATE | IBV_QP_CAP, &init));
	EXPECT_EQ(IBV_QPS_RTS, attr.qp_state);
	EXPECT_EQ(0, attr.cap.max_recv_wr);
	EXPECT_EQ(0, attr.cap.max_recv_sge);
}

TEST_HARNESS_MAIN
