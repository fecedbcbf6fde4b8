// SPDX-License-Identifier: GPL-2.0
/*
 * Completion events: an armed receive CQ raises one interrupt for its next
 * completion, which wakes poll() and epoll on the device file; a CQ that is
 * not armed raises none. Interrupts are counted by the analyzer, not taken
 * from the driver.
 */
#include <sys/epoll.h>

#include "kselftest_harness.h"
#include "mlx4_bf_queue.h"
#include "mlx4_bf_model.h"

FIXTURE(events) {
	struct endpoint a, b;
	struct model m;
	int on_model;
	uint8_t wqe[MAX_WQE + 64];
};

FIXTURE_SETUP(events)
{
	self->a.fd = self->b.fd = -1;
	if (access(DEV_PATH, F_OK))
		SKIP(return, NO_DEVICE);
	ASSERT_EQ(0, ep_open(&self->a));
	ASSERT_EQ(0, ep_open(&self->b));
	ASSERT_EQ(0, ep_pair(&self->a, &self->b, self->a.qp.rq_entries));
	self->on_model = !model_open(&self->m);
}

FIXTURE_TEARDOWN(events)
{
	ep_close(&self->a);
	ep_close(&self->b);
	if (self->on_model)
		model_close(&self->m);
}

static int send_to_b(struct endpoint *a, uint8_t *wqe, uint32_t solicited)
{
	int len = build_send(wqe, 16, 9, 0, 0);

	if (solicited)
		put_be32(wqe + 8, 1u << 1);	/* SE */
	return post_send(a->fd, a->qp.qp_handle, wqe, len, 0, NULL);
}

static short poll_b(struct endpoint *b, int ms)
{
	struct pollfd p = { .fd = b->fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 ? p.revents : 0;
}

TEST_F(events, poll_times_out_without_a_completion)
{
	EXPECT_EQ(0, poll_b(&self->b, 100));
}

TEST_F(events, armed_cq_wakes_poll)
{
	uint64_t irqs = 0;

	if (self->on_model)
		irqs = model_read(&self->m, MODEL_IRQS);
	ASSERT_EQ(0, arm_cq(self->b.fd, self->b.qp.qp_handle, 0));
	ASSERT_EQ(0, send_to_b(&self->a, self->wqe, 0));
	EXPECT_EQ(POLLIN, poll_b(&self->b, 5000) & (POLLIN | POLLERR | POLLHUP));
	ASSERT_NE(NULL, ep_peek(&self->b));
	if (self->on_model)
		EXPECT_EQ(irqs + 1, model_read(&self->m, MODEL_IRQS));
}

TEST_F(events, poll_stays_readable_until_the_cqe_is_consumed)
{
	ASSERT_EQ(0, send_to_b(&self->a, self->wqe, 0));
	ASSERT_NE(NULL, ep_wait(&self->b, 2000));
	EXPECT_EQ(POLLIN, poll_b(&self->b, 0));
	ep_consume(&self->b);
	EXPECT_EQ(0, poll_b(&self->b, 0));
}

TEST_F(events, unarmed_cq_raises_no_interrupt)
{
	uint64_t irqs;

	if (!self->on_model)
		SKIP(return, NO_ANALYZER);
	irqs = model_read(&self->m, MODEL_IRQS);
	ASSERT_EQ(0, send_to_b(&self->a, self->wqe, 0));
	ASSERT_NE(NULL, ep_wait(&self->b, 2000));
	usleep(20000);
	EXPECT_EQ(irqs, model_read(&self->m, MODEL_IRQS));
}

TEST_F(events, one_arm_one_interrupt)
{
	uint64_t irqs;

	if (!self->on_model)
		SKIP(return, NO_ANALYZER);
	irqs = model_read(&self->m, MODEL_IRQS);
	ASSERT_EQ(0, arm_cq(self->b.fd, self->b.qp.qp_handle, 0));
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(0, send_to_b(&self->a, self->wqe, 0));
		ASSERT_NE(NULL, ep_wait(&self->b, 2000));
		ep_consume(&self->b);
		ASSERT_EQ(0, post_recv(self->b.fd, self->b.qp.qp_handle, 1));
	}
	usleep(20000);
	EXPECT_EQ(irqs + 1, model_read(&self->m, MODEL_IRQS)) TH_LOG("no interrupt storm");
}

TEST_F(events, arming_behind_an_unconsumed_cqe_fires_at_once)
{
	ASSERT_EQ(0, send_to_b(&self->a, self->wqe, 0));
	ASSERT_NE(NULL, ep_wait(&self->b, 2000));
	/* not consumed: the CQE is past the published consumer index */
	ASSERT_EQ(0, arm_cq(self->b.fd, self->b.qp.qp_handle, 0));
	EXPECT_EQ(POLLIN, poll_b(&self->b, 1000));
}

TEST_F(events, solicited_arm_ignores_an_unsolicited_send)
{
	uint64_t irqs;

	if (!self->on_model)
		SKIP(return, NO_ANALYZER);
	irqs = model_read(&self->m, MODEL_IRQS);
	ASSERT_EQ(0, arm_cq(self->b.fd, self->b.qp.qp_handle, MLX4_BF_ARM_F_SOLICITED));
	ASSERT_EQ(0, send_to_b(&self->a, self->wqe, 0));
	ASSERT_NE(NULL, ep_wait(&self->b, 2000));
	ep_consume(&self->b);
	usleep(20000);
	EXPECT_EQ(irqs, model_read(&self->m, MODEL_IRQS));
	ASSERT_EQ(0, send_to_b(&self->a, self->wqe, 1));
	EXPECT_EQ(POLLIN, poll_b(&self->b, 5000));
	EXPECT_EQ(irqs + 1, model_read(&self->m, MODEL_IRQS));
}

TEST_F(events, epoll_wakes_on_a_completion)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	int ep = epoll_create1(0);

	ASSERT_GE(ep, 0);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, self->b.fd, &ev));
	EXPECT_EQ(0, epoll_wait(ep, &out, 1, 100));
	ASSERT_EQ(0, arm_cq(self->b.fd, self->b.qp.qp_handle, 0));
	ASSERT_EQ(0, send_to_b(&self->a, self->wqe, 0));
	ASSERT_EQ(1, epoll_wait(ep, &out, 1, 5000));
	EXPECT_TRUE(out.events & EPOLLIN);
	close(ep);
}

TEST_F(events, arm_checks_its_arguments)
{
	EXPECT_EQ(-EINVAL, arm_cq(self->b.fd, self->b.qp.qp_handle, 2));
	EXPECT_EQ(-ENOENT, arm_cq(self->b.fd, self->b.qp.qp_handle ^ 0x100, 0));
}

TEST_HARNESS_MAIN
