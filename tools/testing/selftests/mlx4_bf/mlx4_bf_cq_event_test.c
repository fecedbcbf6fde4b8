// SPDX-License-Identifier: GPL-2.0
/*
 * Completion events on the RDMA device, through a completion channel
 * (ibv_create_comp_channel, ibv_req_notify_cq, ibv_get_cq_event,
 * ibv_ack_cq_events): b's CQ, armed by libmlx4 through its UAR, raises
 * exactly one interrupt for its next completion, and the event makes the
 * channel's fd readable (poll and epoll) until it is read; an unarmed CQ
 * raises none; an arm for solicited completions only ignores an unsolicited
 * SEND and fires on a solicited one; arming behind a CQE not yet polled
 * fires at once; each arm, one event. Interrupts are counted by the
 * analyzer (mlx4_bf_model.h), not taken from the driver. The SENDs come
 * from another context's QP through QP_POST (mlx4_bf_verbs.h).
 *
 * The rules of mlx4_bf_event_test (the misc device, /dev/mlx4_bf0) are all
 * here but one: arm_checks_its_arguments (ARM_CQ's flags and QP handle).
 * ibv_req_notify_cq() is libmlx4's store to its UAR, no call of the kernel;
 * the model checks the doorbell's command. poll_stays_readable_until_the_
 * cqe_is_consumed becomes: readable until the event is read, whether the
 * CQE was polled or not (a channel's fd carries events, not CQEs).
 */
#include <sys/epoll.h>
#include <poll.h>

#include "kselftest_harness.h"
#include "mlx4_bf_model.h"
#include "mlx4_bf_verbs.h"

#define RQ_DEPTH	16
#define RECV_LEN	64
#define RECV_BYTES	(RQ_DEPTH * RECV_LEN)
/* SE in srcrb_flags: the receive CQE is solicited */
#define WQE_SOLICITED	(1u << 1)
/* how long a completion may take to raise its interrupt, at most */
#define QUIET_US	20000

/*
 * a sends to b, whose CQ has a completion channel (nonblocking: a read
 * with no event fails rather than waits) and RQ_DEPTH receives posted.
 * (Its helpers spell FIXTURE_DATA(events) as struct _test_data_events, so
 * checkpatch sees a type.)
 */
FIXTURE(events)
{
	struct verbs a, b;
	struct model m;
	int have_model;
	uint8_t *bbuf;
	struct ibv_mr *bmr;
	uint32_t recvs;
	uint8_t wqe[MAX_WQE + 64];
};

/* b posts its next receive, into the slot of its number. */
static int post_recv(struct _test_data_events *self)
{
	uint32_t i = self->recvs++;

	return verbs_post_recv(self->b.qp, self->bmr, self->bbuf + (i % RQ_DEPTH) * RECV_LEN,
			       RECV_LEN, i);
}

FIXTURE_SETUP(events)
{
	int flags;

	self->have_model = 0;
	self->a.ctx = self->b.ctx = NULL;
	self->bmr = NULL;
	self->bbuf = NULL;
	self->recvs = 0;
	if (!verbs_device_present())
		SKIP(return, NO_VERBS_DEVICE);
	if (model_open(&self->m))
		SKIP(return, NO_ANALYZER);
	self->have_model = 1;
	ASSERT_EQ(0, verbs_open_pair(&self->a, &self->b, IBV_ACCESS_REMOTE_WRITE, RQ_DEPTH, 1));
	flags = fcntl(self->b.channel->fd, F_GETFL);
	ASSERT_EQ(0, fcntl(self->b.channel->fd, F_SETFL, flags | O_NONBLOCK));
	self->bbuf = aligned_alloc(PAGE, RECV_BYTES);
	ASSERT_NE(NULL, self->bbuf);
	self->bmr = ibv_reg_mr(self->b.pd, self->bbuf, RECV_BYTES, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, self->bmr);
	for (int i = 0; i < RQ_DEPTH; i++)
		ASSERT_EQ(0, post_recv(self));
}

FIXTURE_TEARDOWN(events)
{
	if (self->bmr)
		ibv_dereg_mr(self->bmr);
	free(self->bbuf);
	if (self->a.ctx)
		verbs_close(&self->a);
	if (self->b.ctx)
		verbs_close(&self->b);
	if (self->have_model)
		model_close(&self->m);
}

static uint64_t irqs(struct _test_data_events *self)
{
	return model_read(&self->m, MODEL_IRQS);
}

/* a SENDs 16 bytes to b (solicited if @solicited); its send completes. */
static void send_to_b(struct __test_metadata *_metadata, struct _test_data_events *self,
		      int solicited)
{
	int len = build_send(self->wqe, 16, 9, 0, 0);

	if (solicited)
		put_be32(self->wqe + 8, WQE_SOLICITED);
	ASSERT_EQ(0, verbs_send_wqe(&self->a, self->wqe, len));
	ASSERT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(self->a.cq));
}

/* b polls the receive's completion and posts a receive in its place. */
static void consume(struct __test_metadata *_metadata, struct _test_data_events *self)
{
	struct ibv_wc wc;

	ASSERT_EQ(0, verbs_wait_wc(self->b.cq, &wc)) TH_LOG("b received nothing");
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
	EXPECT_EQ(IBV_WC_RECV, wc.opcode);
	ASSERT_EQ(0, post_recv(self));
}

/* What poll() says of the channel's fd within @ms: its revents, 0 if none. */
static short channel_poll(struct _test_data_events *self, int ms)
{
	struct pollfd p = { .fd = self->b.channel->fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 ? p.revents : 0;
}

/* The channel holds an event: b's CQ with its context; read and acked. */
static void expect_event(struct __test_metadata *_metadata, struct _test_data_events *self)
{
	struct ibv_cq *cq = NULL;
	void *ctx = NULL;

	ASSERT_EQ(0, ibv_get_cq_event(self->b.channel, &cq, &ctx)) TH_LOG("no event");
	EXPECT_EQ(self->b.cq, cq);
	EXPECT_EQ(&self->b, ctx);
	ibv_ack_cq_events(cq, 1);
}

/* The channel holds no event: a read finds none, poll() nothing. */
static void expect_no_event(struct __test_metadata *_metadata, struct _test_data_events *self)
{
	struct ibv_cq *cq;
	void *ctx;
	int err;

	EXPECT_EQ(0, channel_poll(self, 0));
	err = ibv_get_cq_event(self->b.channel, &cq, &ctx) ? errno : 0;
	if (!err)
		ibv_ack_cq_events(cq, 1);
	EXPECT_EQ(EAGAIN, err) TH_LOG("%s", err ? strerror(err) : "an event nobody asked for");
}

TEST_F(events, poll_times_out_without_a_completion)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	int ep = epoll_create1(0);

	EXPECT_EQ(0, channel_poll(self, 100));
	ASSERT_LE(0, ep);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, self->b.channel->fd, &ev));
	EXPECT_EQ(0, epoll_wait(ep, &out, 1, 100));
	close(ep);
	/* armed, but nothing completes */
	ASSERT_EQ(0, ibv_req_notify_cq(self->b.cq, 0));
	EXPECT_EQ(0, channel_poll(self, 100));
	expect_no_event(_metadata, self);
}

TEST_F(events, armed_cq_raises_one_interrupt_and_wakes_poll)
{
	uint64_t before = irqs(self);

	ASSERT_EQ(0, ibv_req_notify_cq(self->b.cq, 0));
	send_to_b(_metadata, self, 0);
	EXPECT_EQ(POLLIN, channel_poll(self, 5000) & (POLLIN | POLLERR | POLLHUP));
	expect_event(_metadata, self);
	EXPECT_EQ(before + 1, irqs(self));
	consume(_metadata, self);
}

TEST_F(events, unarmed_cq_raises_no_interrupt)
{
	uint64_t before = irqs(self);

	send_to_b(_metadata, self, 0);
	consume(_metadata, self);
	usleep(QUIET_US);
	EXPECT_EQ(before, irqs(self));
	expect_no_event(_metadata, self);
}

/* One arm, three completions: one interrupt, one event, no storm. */
TEST_F(events, one_arm_one_interrupt)
{
	uint64_t before = irqs(self);

	ASSERT_EQ(0, ibv_req_notify_cq(self->b.cq, 0));
	for (int i = 0; i < 3; i++) {
		send_to_b(_metadata, self, 0);
		consume(_metadata, self);
	}
	usleep(QUIET_US);
	EXPECT_EQ(before + 1, irqs(self)) TH_LOG("no interrupt storm");
	expect_event(_metadata, self);
	expect_no_event(_metadata, self);
}

/* The usual loop: arm, completion, event, ack, arm again. */
TEST_F(events, each_arm_one_event)
{
	uint64_t before = irqs(self);

	for (int i = 1; i <= 3; i++) {
		ASSERT_EQ(0, ibv_req_notify_cq(self->b.cq, 0));
		send_to_b(_metadata, self, 0);
		EXPECT_EQ(POLLIN, channel_poll(self, 5000)) TH_LOG("arm %d", i);
		expect_event(_metadata, self);
		EXPECT_EQ(before + i, irqs(self)) TH_LOG("arm %d", i);
		consume(_metadata, self);
	}
	expect_no_event(_metadata, self);
}

/*
 * A CQE the model wrote (a's send completes after b's receive CQE) but b
 * has not polled: libmlx4 arms with its consumer index behind it, and the
 * event fires at once.
 */
TEST_F(events, arming_behind_an_unpolled_cqe_fires_at_once)
{
	uint64_t before;

	send_to_b(_metadata, self, 0);
	before = irqs(self);
	ASSERT_EQ(0, ibv_req_notify_cq(self->b.cq, 0));
	EXPECT_EQ(POLLIN, channel_poll(self, 1000));
	expect_event(_metadata, self);
	EXPECT_EQ(before + 1, irqs(self));
	consume(_metadata, self);
}

/* The model supports solicited events: SE in srcrb_flags, arm command 1. */
TEST_F(events, solicited_arm_ignores_an_unsolicited_send)
{
	uint64_t before = irqs(self);

	ASSERT_EQ(0, ibv_req_notify_cq(self->b.cq, 1));
	send_to_b(_metadata, self, 0);
	consume(_metadata, self);
	usleep(QUIET_US);
	EXPECT_EQ(before, irqs(self));
	expect_no_event(_metadata, self);
	send_to_b(_metadata, self, 1);
	EXPECT_EQ(POLLIN, channel_poll(self, 5000));
	expect_event(_metadata, self);
	EXPECT_EQ(before + 1, irqs(self));
	consume(_metadata, self);
}

TEST_F(events, epoll_wakes_on_a_completion)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	int ep = epoll_create1(0);

	ASSERT_LE(0, ep);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, self->b.channel->fd, &ev));
	ASSERT_EQ(0, ibv_req_notify_cq(self->b.cq, 0));
	send_to_b(_metadata, self, 0);
	ASSERT_EQ(1, epoll_wait(ep, &out, 1, 5000));
	EXPECT_TRUE(out.events & EPOLLIN);
	expect_event(_metadata, self);
	EXPECT_EQ(0, epoll_wait(ep, &out, 1, 0)) TH_LOG("still readable after the event was read");
	close(ep);
	consume(_metadata, self);
}

/*
 * The fd is readable while an event waits to be read, whether its CQE was
 * polled or not; reading the event, not polling the CQE, clears it.
 */
TEST_F(events, channel_stays_readable_until_the_event_is_read)
{
	ASSERT_EQ(0, ibv_req_notify_cq(self->b.cq, 0));
	send_to_b(_metadata, self, 0);
	EXPECT_EQ(POLLIN, channel_poll(self, 5000));
	EXPECT_EQ(POLLIN, channel_poll(self, 0)) TH_LOG("poll consumed the event");
	consume(_metadata, self);
	EXPECT_EQ(POLLIN, channel_poll(self, 0)) TH_LOG("polling the CQE consumed the event");
	expect_event(_metadata, self);
	expect_no_event(_metadata, self);
}

TEST_HARNESS_MAIN
