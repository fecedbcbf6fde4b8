// SPDX-License-Identifier: GPL-2.0
/*
 * POST_SEND as the adapter saw it: the ConnectX-3 device model executes
 * what the driver sends and counts how (from the BlueFlame bytes, or fetched
 * from the send queue by DMA after a doorbell or a BlueFlame fallback), and
 * these tests assert on its counters, not on what the driver reports. On an
 * adapter without the model's diagnostic block every test SKIPs.
 */
#include "kselftest_harness.h"
#include "mlx4_bf_model.h"

FIXTURE(adapter)
{
	int fd;
	struct mlx4_bf_device_info dev;
	struct mlx4_bf_context_info info;
	struct mlx4_bf_qp_info qp;
	struct sink sink;
	struct model model;
	struct model_counts before, after;
	uint8_t wqe[MAX_WQE + 64];
};

FIXTURE_SETUP(adapter)
{
	const char *why;

	self->fd = open_on_model(&self->model, &why);
	if (self->fd < 0)
		SKIP(return, "%s", why);
	ASSERT_EQ(0, query_device(self->fd, &self->dev));
	ASSERT_EQ(0, query_context(self->fd, &self->info));
	ASSERT_EQ(0, create_qp(self->fd, &self->qp));
	ASSERT_EQ(0, sink_open(self->fd, &self->sink));
	model_counts(&self->model, self->qp.qpn, &self->before);
}

FIXTURE_TEARDOWN(adapter)
{
	if (self->fd >= 0) {
		model_write(&self->model, MODEL_FALLBACK_EVERY, 0);
		model_close(&self->model);
		close(self->fd);
	}
}

/*
 * Posts an inline RDMA write of @payload bytes on @qp, into @sink of its own
 * context (the QP is connected to itself); returns the path.
 */
static int post_payload(struct __test_metadata *_metadata, int fd,
			const struct mlx4_bf_qp_info *qp, const struct sink *sink, int payload,
			uint32_t flags)
{
	struct mlx4_bf_post_result res = {};
	uint8_t wqe[MAX_WQE + 64];
	int len = build_rdma_write(wqe, payload, payload, sink_addr(sink), sink->mr.rkey);
	int ret = post_send(fd, qp->qp_handle, wqe, len, flags, &res);

	EXPECT_EQ(0, ret) TH_LOG("payload %d: %s", payload, strerror(-ret));
	return res.path;
}

#define DELTA(field) (self->after.field - self->before.field)
#define SAW() model_delta_str(&self->before, &self->after)

TEST_F(adapter, blueflame_post_runs_from_the_bf_bytes_without_dma)
{
	post_payload(_metadata, self->fd, &self->qp, &self->sink, 64, 0);
	model_counts(&self->model, self->qp.qpn, &self->after);
	EXPECT_EQ(1, DELTA(wqe_bf)) TH_LOG("%s", SAW());
	EXPECT_EQ(0, DELTA(wqe_dma)) TH_LOG("%s", SAW());
	EXPECT_EQ(0, DELTA(sq_dma_reads)) TH_LOG("%s", SAW());
	EXPECT_EQ(0, DELTA(fb_page) + DELTA(fb_stamp) + DELTA(fb_order) + DELTA(fb_forced))
		TH_LOG("%s", SAW());
}

TEST_F(adapter, doorbell_post_is_fetched_once_by_dma)
{
	post_payload(_metadata, self->fd, &self->qp, &self->sink, 64, MLX4_BF_POST_F_FORCE_DOORBELL);
	model_counts(&self->model, self->qp.qpn, &self->after);
	EXPECT_EQ(1, DELTA(doorbells)) TH_LOG("%s", SAW());
	EXPECT_EQ(1, DELTA(wqe_dma)) TH_LOG("%s", SAW());
	/* the WQE, and the next slot the adapter looks at and finds not ready */
	EXPECT_LE(2, DELTA(sq_dma_reads)) TH_LOG("%s", SAW());
	EXPECT_EQ(0, DELTA(wqe_bf)) TH_LOG("%s", SAW());
}

TEST_F(adapter, every_post_completes)
{
	for (int i = 0; i < 40; i++)
		post_payload(_metadata, self->fd, &self->qp, &self->sink, 8 + i,
			     i % 3 ? 0 : MLX4_BF_POST_F_FORCE_DOORBELL);
	model_counts(&self->model, self->qp.qpn, &self->after);
	EXPECT_EQ(40, DELTA(cqes)) TH_LOG("%s", SAW());
	EXPECT_EQ(40, DELTA(wqe_bf) + DELTA(wqe_dma)) TH_LOG("%s", SAW());
}

TEST_F(adapter, blueflame_up_to_208_bytes_then_doorbell)
{
	for (int payload = 1; payload <= 256; payload++)
		post_payload(_metadata, self->fd, &self->qp, &self->sink, payload, 0);
	model_counts(&self->model, self->qp.qpn, &self->after);
	/* 1..208 fit a 256-byte BlueFlame buffer with the 32-byte header */
	EXPECT_EQ(208, DELTA(wqe_bf)) TH_LOG("%s", SAW());
	EXPECT_EQ(48, DELTA(wqe_dma)) TH_LOG("%s", SAW());
	EXPECT_EQ(48, DELTA(doorbells)) TH_LOG("%s", SAW());
	EXPECT_EQ(0, DELTA(fb_page) + DELTA(fb_stamp) + DELTA(fb_order)) TH_LOG("%s", SAW());
	EXPECT_EQ(256, DELTA(cqes)) TH_LOG("%s", SAW());
}

TEST_F(adapter, fallback_finds_the_whole_wqe_in_the_send_queue)
{
	if (writes_posted())
		SKIP(return, "needs non-posted writes (MLX4_BF_WRITES=nonposted)");
	/* the adapter may always fetch instead: the send queue must hold it */
	model_write(&self->model, MODEL_FALLBACK_EVERY, 2);
	for (int i = 0; i < 8; i++)
		post_payload(_metadata, self->fd, &self->qp, &self->sink, 100, 0);
	model_counts(&self->model, self->qp.qpn, &self->after);
	EXPECT_EQ(4, DELTA(fb_forced)) TH_LOG("%s", SAW());
	EXPECT_EQ(4, DELTA(wqe_bf)) TH_LOG("%s", SAW());
	EXPECT_EQ(4, DELTA(wqe_dma)) TH_LOG("%s", SAW());
	EXPECT_EQ(8, DELTA(cqes)) TH_LOG("%s", SAW());
	EXPECT_EQ(0, DELTA(errors)) TH_LOG("%s", SAW());
}

TEST_F(adapter, two_contexts_use_their_own_bf_pages)
{
	struct mlx4_bf_qp_info qp2;
	struct model_counts b2, a2;
	struct sink sink2 = {};
	int fd2 = open(DEV_PATH, O_RDWR);

	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, create_qp(fd2, &qp2));
	ASSERT_EQ(0, sink_open(fd2, &sink2));
	model_counts(&self->model, qp2.qpn, &b2);
	for (int i = 0; i < 4; i++) {
		post_payload(_metadata, self->fd, &self->qp, &self->sink, 20, 0);
		post_payload(_metadata, fd2, &qp2, &sink2, 20, 0);
	}
	model_counts(&self->model, self->qp.qpn, &self->after);
	model_counts(&self->model, qp2.qpn, &a2);
	EXPECT_EQ(4, DELTA(wqe_bf)) TH_LOG("first context: %s", SAW());
	EXPECT_EQ(0, DELTA(fb_page)) TH_LOG("first context: %s", SAW());
	EXPECT_EQ(4, a2.wqe_bf - b2.wqe_bf) TH_LOG("second context: %s", model_delta_str(&b2, &a2));
	EXPECT_EQ(0, a2.fb_page - b2.fb_page) TH_LOG("second context: %s",
						     model_delta_str(&b2, &a2));
	close(fd2);
}

TEST_F(adapter, rejected_post_reaches_nothing)
{
	struct mlx4_bf_post_result res;
	int len = build_rdma_write(self->wqe, 64, 0, sink_addr(&self->sink), self->sink.mr.rkey);

	self->wqe[0] = 0x80;	/* the owner bit is the kernel's */
	EXPECT_EQ(-EINVAL, post_send(self->fd, self->qp.qp_handle, self->wqe, len, 0, &res));
	model_counts(&self->model, self->qp.qpn, &self->after);
	EXPECT_EQ(0, DELTA(wqe_bf) + DELTA(wqe_dma) + DELTA(doorbells)) TH_LOG("%s", SAW());
}

TEST_F(adapter, no_unexpected_protocol_error)
{
	post_payload(_metadata, self->fd, &self->qp, &self->sink, 16, 0);
	post_payload(_metadata, self->fd, &self->qp, &self->sink, 16,
		     MLX4_BF_POST_F_FORCE_DOORBELL);
	model_counts(&self->model, self->qp.qpn, &self->after);
	EXPECT_EQ(0, self->after.unexpected) TH_LOG("%s", SAW());
}

TEST_HARNESS_MAIN
