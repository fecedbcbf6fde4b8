// SPDX-License-Identifier: GPL-2.0
/*
 * Invalid WQEs and ABI misuse: each gets its documented errno and leaves the
 * device untouched: the device model's analyzer must have seen no BAR2
 * write and executed no WQE. Without the model the fixture's tests SKIP.
 */
#include <sys/resource.h>

#include "kselftest_harness.h"
#include "mlx4_bf_model.h"

FIXTURE(bad)
{
	int fd;
	struct mlx4_bf_qp_info qp;
	struct sink sink;
	struct model model;
	struct model_posts before;
	uint8_t wqe[MAX_WQE + 64];
	int len;
};

/*
 * A valid RDMA write of @payload bytes into the context's @sink: each test
 * breaks one thing of it, so that only that one thing can be refused.
 */
static int valid_write(uint8_t *wqe, const struct sink *sink, int payload)
{
	return build_rdma_write(wqe, payload, 7, sink_addr(sink), sink->mr.rkey);
}

FIXTURE_SETUP(bad)
{
	const char *why;

	self->fd = open_on_model(&self->model, &why);
	if (self->fd < 0)
		SKIP(return, "%s", why);
	ASSERT_EQ(0, create_qp(self->fd, &self->qp));
	ASSERT_EQ(0, sink_open(self->fd, &self->sink));
	model_posts(&self->model, &self->before);
	self->len = valid_write(self->wqe, &self->sink, 40);
}

FIXTURE_TEARDOWN(bad)
{
	struct model_posts after;

	if (self->fd < 0)
		return;
	/* whatever the test did, the device must not have seen any of it */
	model_posts(&self->model, &after);
	EXPECT_EQ(self->before.bar2_writes, after.bar2_writes)
		TH_LOG("analyzer saw %llu BAR2 write(s)",
		       (unsigned long long)(after.bar2_writes - self->before.bar2_writes));
	EXPECT_EQ(self->before.wqe_bf + self->before.wqe_dma, after.wqe_bf + after.wqe_dma)
		TH_LOG("analyzer executed %llu WQE(s) from BlueFlame, %llu by DMA",
		       (unsigned long long)(after.wqe_bf - self->before.wqe_bf),
		       (unsigned long long)(after.wqe_dma - self->before.wqe_dma));
	model_close(&self->model);
	close(self->fd);
}

static int post(int fd, const struct mlx4_bf_qp_info *qp, const uint8_t *wqe, int len)
{
	return post_send(fd, qp->qp_handle, wqe, len, 0, NULL);
}

TEST_F(bad, length_not_a_multiple_of_16)
{
	EXPECT_EQ(-EINVAL, post(self->fd, &self->qp, self->wqe, self->len - 4));
}

TEST_F(bad, length_zero)
{
	EXPECT_EQ(-EINVAL, post(self->fd, &self->qp, self->wqe, 0));
}

TEST_F(bad, length_above_the_largest_wqe)
{
	EXPECT_EQ(-EINVAL, post(self->fd, &self->qp, self->wqe, MAX_WQE + 16));
}

TEST_F(bad, length_at_the_limit_of_the_attribute)
{
	/* the largest length the ABI can carry, far past the buffer */
	EXPECT_EQ(-EINVAL, post(self->fd, &self->qp, self->wqe, 0xfff0));
}

TEST_F(bad, size_field_differs_from_length)
{
	put_be32(self->wqe + 4, self->len / 16 + 1);
	EXPECT_EQ(-EINVAL, post(self->fd, &self->qp, self->wqe, self->len));
}

TEST_F(bad, unknown_opcode)
{
	put_be32(self->wqe, 0x1f);
	EXPECT_EQ(-EINVAL, post(self->fd, &self->qp, self->wqe, self->len));
}

TEST_F(bad, owner_bit_is_the_kernels)
{
	put_be32(self->wqe, get_be32(self->wqe) | 1u << 31);
	EXPECT_EQ(-EINVAL, post(self->fd, &self->qp, self->wqe, self->len));
}

TEST_F(bad, qpn_field_is_the_kernels)
{
	put_be32(self->wqe + 4, get_be32(self->wqe + 4) | 0x4200);
	EXPECT_EQ(-EINVAL, post(self->fd, &self->qp, self->wqe, self->len));
}

TEST_F(bad, inline_segment_crossing_64_bytes)
{
	/* first segment at 32 claims 29 bytes: it would end at 65 */
	put_be32(self->wqe + 32, INLINE_SEG | 29);
	EXPECT_EQ(-EINVAL, post(self->fd, &self->qp, self->wqe, self->len));
}

TEST_F(bad, inline_byte_count_past_the_wqe)
{
	self->len = valid_write(self->wqe, &self->sink, 10);
	put_be32(self->wqe + 32, INLINE_SEG | 28);
	EXPECT_EQ(-EINVAL, post(self->fd, &self->qp, self->wqe, self->len));
}

TEST_F(bad, gather_segment_where_bf_is_required)
{
	/* a gather the context may make (its own MR), but only by doorbell */
	struct sge sg = { sink_addr(&self->sink), 64, self->sink.mr.lkey };
	int len = build_gather(self->wqe, OP_RDMA_WRITE, sink_addr(&self->sink) + 1024,
			       self->sink.mr.rkey, &sg, 1);

	EXPECT_EQ(-EINVAL, post_send(self->fd, self->qp.qp_handle, self->wqe, len,
				     MLX4_BF_POST_F_REQUIRE_BF, NULL));
}

TEST_F(bad, null_wqe_pointer)
{
	EXPECT_EQ(-EFAULT, post_send(self->fd, self->qp.qp_handle, NULL, self->len, 0, NULL));
}

TEST_F(bad, wqe_ending_on_an_unmapped_page)
{
	uint8_t *pages = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT_NE(MAP_FAILED, pages);
	ASSERT_EQ(0, munmap(pages + 4096, 4096));
	memcpy(pages + 4096 - 32, self->wqe, 32);
	EXPECT_EQ(-EFAULT, post_send(self->fd, self->qp.qp_handle, pages + 4096 - 32, self->len, 0,
				     NULL));
	munmap(pages, 4096);
}

TEST_F(bad, unknown_method)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_QP, 99);
	EXPECT_EQ(-EPROTONOSUPPORT, call_do(self->fd, &c));
	call_init(&c, 99, 1);
	EXPECT_EQ(-EPROTONOSUPPORT, call_do(self->fd, &c));
}

TEST_F(bad, unknown_mandatory_attribute)
{
	struct call c;

	post_call(&c, self->qp.qp_handle, self->wqe, self->len, 0, NULL);
	call_attr(&c, 99, 0, 0)->flags = MLX4_BF_ATTR_F_MANDATORY;
	EXPECT_EQ(-EOPNOTSUPP, call_do(self->fd, &c));
}

TEST_F(bad, unknown_optional_attribute_is_ignored)
{
	struct mlx4_bf_context_info info;
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_CONTEXT, MLX4_BF_METHOD_QUERY_CONTEXT);
	call_attr(&c, MLX4_BF_ATTR_CONTEXT_INFO, sizeof(info), (uintptr_t)&info);
	call_attr(&c, 99, 0, 0);
	EXPECT_EQ(0, call_do(self->fd, &c));
	EXPECT_TRUE(c.attrs[0].flags & MLX4_BF_ATTR_F_VALID_OUTPUT);
}

TEST_F(bad, reserved_fields_not_zero)
{
	struct call c;

	post_call(&c, self->qp.qp_handle, self->wqe, self->len, 0, NULL);
	c.hdr.reserved1 = 1;
	EXPECT_EQ(-EINVAL, call_do(self->fd, &c));
	post_call(&c, self->qp.qp_handle, self->wqe, self->len, 0, NULL);
	c.hdr.driver_id = 1;
	EXPECT_EQ(-EINVAL, call_do(self->fd, &c));
	post_call(&c, self->qp.qp_handle, self->wqe, self->len, 0, NULL);
	c.attrs[1].reserved = 1;
	EXPECT_EQ(-EINVAL, call_do(self->fd, &c));
}

TEST_F(bad, header_length_not_matching_attributes)
{
	struct call c;

	post_call(&c, self->qp.qp_handle, self->wqe, self->len, 0, NULL);
	c.hdr.length += 16;
	EXPECT_EQ(-EINVAL, call_do(self->fd, &c));
	post_call(&c, self->qp.qp_handle, self->wqe, self->len, 0, NULL);
	c.hdr.num_attrs = MLX4_BF_MAX_ATTRS + 1;
	c.hdr.length = sizeof(c.hdr) + c.hdr.num_attrs * sizeof(c.attrs[0]);
	EXPECT_EQ(-EINVAL, call_do(self->fd, &c));
}

TEST_F(bad, wrong_output_length)
{
	struct mlx4_bf_device_info info;
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_DEVICE, MLX4_BF_METHOD_QUERY_DEVICE);
	call_attr(&c, MLX4_BF_ATTR_DEVICE_INFO, sizeof(info) - 8, (uintptr_t)&info);
	EXPECT_EQ(-EINVAL, call_do(self->fd, &c));
}

TEST_F(bad, unknown_post_flags)
{
	EXPECT_EQ(-EINVAL, post_send(self->fd, self->qp.qp_handle, self->wqe, self->len, 1u << 7,
				     NULL));
}

TEST_F(bad, another_contexts_qp)
{
	int other = open(DEV_PATH, O_RDWR);

	ASSERT_LE(0, other);
	EXPECT_EQ(-ENOENT, post_send(other, self->qp.qp_handle, self->wqe, self->len, 0, NULL));
	close(other);
}

TEST_F(bad, destroyed_qp)
{
	ASSERT_EQ(0, destroy_qp(self->fd, self->qp.qp_handle));
	EXPECT_EQ(-ENOENT, post(self->fd, &self->qp, self->wqe, self->len));
	EXPECT_EQ(-ENOENT, destroy_qp(self->fd, self->qp.qp_handle));
}

TEST_F(bad, header_at_an_unmapped_address)
{
	EXPECT_EQ(-1, ioctl(self->fd, MLX4_BF_IOCTL, (void *)8));
	EXPECT_EQ(EFAULT, errno);
}

TEST_F(bad, wrong_ioctl_number)
{
	EXPECT_EQ(-1, ioctl(self->fd, _IO(MLX4_BF_IOCTL_MAGIC, 2), 0));
	EXPECT_EQ(ENOTTY, errno);
}

TEST(uars_run_out_cleanly_and_come_back)
{
	struct rlimit rl = { 65536, 65536 };
	struct mlx4_bf_device_info dev;
	struct mlx4_bf_context_info info;
	int fd, *fds, n = 0, lowest;

	fd = open(DEV_PATH, O_RDWR);
	if (fd < 0)
		SKIP(return, DEV_PATH " is missing");
	ASSERT_EQ(0, query_device(fd, &dev));
	close(fd);
	setrlimit(RLIMIT_NOFILE, &rl);
	fds = calloc(dev.num_uars, sizeof(*fds));
	while (n < (int)dev.num_uars && (fds[n] = open(DEV_PATH, O_RDWR)) >= 0)
		n++;
	EXPECT_EQ(EBUSY, errno);
	/*
	 * The kernel keeps the first pages (UAR 0, the firmware's, up to its EQ
	 * doorbell's); every other one was handed out once.
	 */
	lowest = (int)dev.num_uars;
	for (int i = 0; i < n; i++) {
		ASSERT_EQ(0, query_context(fds[i], &info));
		if ((int)info.uar_index < lowest)
			lowest = (int)info.uar_index;
	}
	EXPECT_LE(1, lowest);
	EXPECT_EQ((int)dev.num_uars - lowest, n);
	while (n > 0)
		close(fds[--n]);
	fd = open(DEV_PATH, O_RDWR);
	EXPECT_LE(0, fd);
	close(fd);
	free(fds);
}

/* A fixture only for its timeout: a cycle takes ~10 ms on the KASAN kernel. */
FIXTURE(cycles) {};
FIXTURE_SETUP(cycles) {}
FIXTURE_TEARDOWN(cycles) {}

TEST_F_TIMEOUT(cycles, open_close_cycles_return_every_uar, 180)
{
	struct mlx4_bf_device_info dev;
	struct mlx4_bf_context_info info;
	int first = -1, cycles = 1;

	/*
	 * Three times round the round-robin allocator: a UAR that a close
	 * failed to return makes an open fail on the second round at the
	 * latest. (A fixed 10 000 cycles took over 90 s on the KASAN kernel.)
	 */
	for (int i = 0; i < cycles; i++) {
		int fd = open(DEV_PATH, O_RDWR);

		if (fd < 0 && i == 0)
			SKIP(return, DEV_PATH " is missing");
		ASSERT_LE(0, fd) TH_LOG("cycle %d: %s", i, strerror(errno));
		if (i == 0) {
			ASSERT_EQ(0, query_device(fd, &dev));
			ASSERT_EQ(0, query_context(fd, &info));
			first = info.uar_index;
			cycles = 3 * dev.num_uars;
		}
		close(fd);
	}
	EXPECT_LT(0, first);
}

TEST_HARNESS_MAIN
