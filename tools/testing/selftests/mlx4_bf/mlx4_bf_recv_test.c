// SPDX-License-Identifier: GPL-2.0
/*
 * Delivery between connected QPs: what arrives in the receive buffers and
 * CQEs the process maps, the errors of a SEND that cannot be delivered, and
 * the rules of the receive methods and mappings. Delivery is checked in the
 * receiver's memory and against the analyzer's counters.
 */
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "mlx4_bf_queue.h"
#include "mlx4_bf_model.h"

FIXTURE(pair) {
	struct endpoint a, b;
	struct model m;
	int on_model;
	uint8_t wqe[MAX_WQE + 64];
};

FIXTURE_SETUP(pair)
{
	int ret;

	self->a.fd = self->b.fd = -1;
	if (access(DEV_PATH, F_OK))
		SKIP(return, NO_DEVICE);
	ASSERT_EQ(0, ep_open(&self->a));
	ASSERT_EQ(0, ep_open(&self->b));
	ret = ep_pair(&self->a, &self->b, self->a.qp.rq_entries);
	ASSERT_EQ(0, ret) TH_LOG("connecting two QPs: %s", strerror(-ret));
	self->on_model = !model_open(&self->m) &&
			 model_version(&self->m) >= 3;
}

FIXTURE_TEARDOWN(pair)
{
	ep_close(&self->a);
	ep_close(&self->b);
	if (self->on_model)
		model_close(&self->m);
}

/* Sends @payload bytes from @from to @to and checks what @to received. */
static int deliver(struct __test_metadata *_metadata, uint8_t *wqe, struct endpoint *from,
		   struct endpoint *to, int payload, __u32 flags)
{
	uint8_t want[MAX_WQE];
	const struct mlx4_bf_cqe *cqe;
	int len = build_send(wqe, payload, payload, 0, 0);
	int ret = post_send(from->fd, from->qp.qp_handle, wqe, len, flags, NULL);

	if (ret)
		return ret;
	cqe = ep_wait(to, 2000);
	if (!cqe)
		return -ETIMEDOUT;
	EXPECT_EQ(MLX4_BF_CQE_OPCODE_SEND, cqe_opcode(cqe)) TH_LOG("%d bytes: CQE opcode", payload);
	EXPECT_EQ(0, cqe->owner_sr_opcode & MLX4_BF_CQE_IS_SEND) TH_LOG("a receive CQE has IS_SEND clear");
	EXPECT_EQ((uint32_t)payload, ntohl(cqe->byte_cnt)) TH_LOG("byte_cnt");
	EXPECT_EQ(to->qp.qpn, ntohl(cqe->my_qpn) & 0xffffff) TH_LOG("my_qpn");
	EXPECT_EQ(from->qp.qpn, ntohl(cqe->src_qpn) & 0xffffff) TH_LOG("source QPN");
	expected_payload(want, payload, payload);
	EXPECT_EQ(0, memcmp(want, cqe_buffer(to, cqe), payload))
		TH_LOG("%d bytes: the payload in the receive buffer differs", payload);
	ep_consume(to);
	return post_recv(to->fd, to->qp.qp_handle, 1);
}

TEST_F(pair, delivers_every_inline_size_blueflame_or_doorbell)
{
	for (int size = 1; size <= MAX_INLINE_SEND; size++) {
		int ret = deliver(_metadata, self->wqe, &self->a, &self->b, size, 0);

		ASSERT_EQ(0, ret) TH_LOG("%d bytes: %s", size, strerror(-ret));
	}
}

TEST_F(pair, delivers_every_size_from_the_kernel_send_buffer_up_to_1024_bytes)
{
	uint8_t msg[MLX4_BF_MAX_PAYLOAD];

	for (int n = 1; n <= MLX4_BF_MAX_PAYLOAD; n++) {
		const struct mlx4_bf_cqe *cqe;
		int ret;

		expected_payload(msg, n, n);
		ret = post_send_payload(self->a.fd, self->a.qp.qp_handle, msg, n, 0);
		ASSERT_EQ(0, ret) TH_LOG("%d bytes: %s", n, strerror(-ret));
		cqe = ep_wait(&self->b, 2000);
		ASSERT_NE(NULL, cqe) TH_LOG("%d bytes never arrived", n);
		EXPECT_EQ(MLX4_BF_CQE_OPCODE_SEND, cqe_opcode(cqe));
		EXPECT_EQ((uint32_t)n, ntohl(cqe->byte_cnt));
		EXPECT_EQ(0, memcmp(msg, cqe_buffer(&self->b, cqe), n)) TH_LOG("%d bytes differ", n);
		ep_consume(&self->b);
		ASSERT_EQ(0, post_recv(self->b.fd, self->b.qp.qp_handle, 1));
	}
}

/* POST_SEND of the first @len bytes of the QP's WQE page. */
static int post_staged(int fd, __u32 handle, __u32 len)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_POST_SEND);
	call_inline_u32(&c, MLX4_BF_ATTR_QP_HANDLE, handle);
	call_inline_u32(&c, MLX4_BF_ATTR_WQE_LEN, len);
	return call_do(fd, &c);
}

TEST_F(pair, delivers_wqes_staged_in_the_wqe_page)
{
	uint8_t *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, self->a.fd,
			     self->a.qp.wqe_offset);
	uint8_t want[MAX_WQE];

	ASSERT_NE(MAP_FAILED, page);
	for (int size = 1; size <= MAX_INLINE_SEND; size += 37) {
		int len = build_send(page, size, size, 0, 0);
		const struct mlx4_bf_cqe *cqe;

		ASSERT_EQ(0, post_staged(self->a.fd, self->a.qp.qp_handle, len)) TH_LOG("%d", size);
		/* the kernel copied the WQE: what the page holds now does not matter */
		memset(page, 0xff, len);
		cqe = ep_wait(&self->b, 2000);
		ASSERT_NE(NULL, cqe);
		EXPECT_EQ((uint32_t)size, ntohl(cqe->byte_cnt));
		expected_payload(want, size, size);
		EXPECT_EQ(0, memcmp(want, cqe_buffer(&self->b, cqe), size)) TH_LOG("%d bytes", size);
		ep_consume(&self->b);
		ASSERT_EQ(0, post_recv(self->b.fd, self->b.qp.qp_handle, 1));
	}
	munmap(page, 4096);
}

TEST_F(pair, wqe_page_rules)
{
	uint8_t *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, self->a.fd,
			     self->a.qp.wqe_offset);
	__u32 h = self->a.qp.qp_handle;
	int len = build_send(self->wqe, 20, 1, 0, 0);
	struct call c;

	ASSERT_NE(MAP_FAILED, page);
	memcpy(page, self->wqe, len);
	EXPECT_EQ(-EINVAL, post_staged(self->a.fd, h, len + 8)) TH_LOG("not whole 16 bytes");
	EXPECT_EQ(-EINVAL, post_staged(self->a.fd, h, 0));
	EXPECT_EQ(-EINVAL, post_staged(self->a.fd, h, 4096));
	/* a WQE by pointer and from the page at once is ambiguous */
	post_call(&c, h, self->wqe, len, 0, NULL);
	call_inline_u32(&c, MLX4_BF_ATTR_WQE_LEN, len);
	EXPECT_EQ(-EINVAL, call_do(self->a.fd, &c));
	/* what the page holds is checked like any WQE */
	page[0] = 0x1f;
	EXPECT_EQ(-EINVAL, post_staged(self->a.fd, h, len));
	memcpy(page, self->wqe, len);
	EXPECT_EQ(0, post_staged(self->a.fd, h, len));
	munmap(page, 4096);
}

TEST_F(pair, payload_attribute_rules)
{
	uint8_t msg[MLX4_BF_MAX_PAYLOAD + 1] = { 0 };
	struct call c;
	int len = build_send(self->wqe, 8, 1, 0, 0);
	__u32 h = self->a.qp.qp_handle;

	EXPECT_EQ(-EINVAL, post_send_payload(self->a.fd, h, msg, sizeof(msg), 0));
	EXPECT_EQ(-EINVAL, post_send_payload(self->a.fd, h, msg, 0, 0));
	EXPECT_EQ(-EINVAL, post_send_payload(self->a.fd, h, msg, 8, MLX4_BF_POST_F_REQUIRE_BF))
		TH_LOG("a kernel send buffer is a data segment: never BlueFlame");
	/* a WQE with inline data of its own takes no payload */
	post_call(&c, h, self->wqe, len, 0, NULL);
	call_attr(&c, MLX4_BF_ATTR_PAYLOAD, 8, (uintptr_t)msg);
	EXPECT_EQ(-EINVAL, call_do(self->a.fd, &c));
	EXPECT_EQ(-EFAULT, post_send_payload(self->a.fd, h, (void *)16, 8, 0));
	EXPECT_EQ(0, post_send_payload(self->a.fd, h, msg, 8, 0)) TH_LOG("the QP still works");
}

TEST_F(pair, delivers_through_the_doorbell)
{
	for (int size = 1; size <= 240; size += 13) {
		int ret = deliver(_metadata, self->wqe, &self->b, &self->a, size,
				  MLX4_BF_POST_F_FORCE_DOORBELL);

		ASSERT_EQ(0, ret) TH_LOG("%d bytes: %s", size, strerror(-ret));
	}
}

TEST_F(pair, ping_pong_both_ways)
{
	for (int i = 0; i < 200; i++) {
		ASSERT_EQ(0, deliver(_metadata, self->wqe, &self->a, &self->b, 1 + i % 64, 0));
		ASSERT_EQ(0, deliver(_metadata, self->wqe, &self->b, &self->a, 1 + i % 64, 0));
	}
}

TEST_F(pair, analyzer_counts_each_delivery_and_its_bytes)
{
	uint64_t recvs, bytes;

	if (!self->on_model)
		SKIP(return, NO_ANALYZER " (version 3)");
	recvs = model_read(&self->m, MODEL_RECV_WQES);
	bytes = model_read(&self->m, MODEL_PAYLOAD_BYTES);
	ASSERT_EQ(0, deliver(_metadata, self->wqe, &self->a, &self->b, 100, 0));
	ASSERT_EQ(0, deliver(_metadata, self->wqe, &self->a, &self->b, 28, 0));
	EXPECT_EQ(recvs + 2, model_read(&self->m, MODEL_RECV_WQES));
	EXPECT_EQ(bytes + 128, model_read(&self->m, MODEL_PAYLOAD_BYTES));
}

TEST_F(pair, send_imm_carries_the_immediate)
{
	int len = build_send(self->wqe, 12, 3, 1, 0xdeadbeef);
	const struct mlx4_bf_cqe *cqe;

	ASSERT_EQ(0, post_send(self->a.fd, self->a.qp.qp_handle, self->wqe, len, 0, NULL));
	cqe = ep_wait(&self->b, 2000);
	ASSERT_NE(NULL, cqe);
	EXPECT_EQ(MLX4_BF_CQE_OPCODE_SEND_IMM, cqe_opcode(cqe));
	EXPECT_EQ(0xdeadbeef, ntohl(cqe->immed));
	EXPECT_EQ(12, ntohl(cqe->byte_cnt));
}

TEST_F(pair, receive_buffers_are_used_in_order)
{
	for (uint32_t i = 0; i < 2 * self->b.qp.rq_entries; i++) {
		int len = build_send(self->wqe, 8, i, 0, 0);
		const struct mlx4_bf_cqe *cqe;

		ASSERT_EQ(0, post_send(self->a.fd, self->a.qp.qp_handle, self->wqe, len, 0, NULL));
		cqe = ep_wait(&self->b, 2000);
		ASSERT_NE(NULL, cqe);
		EXPECT_EQ(i & 0xffff, (uint32_t)ntohs(cqe->wqe_index)) TH_LOG("RQ index");
		ep_consume(&self->b);
		ASSERT_EQ(0, post_recv(self->b.fd, self->b.qp.qp_handle, 1));
	}
}

/* An error CQE reaches the sender asynchronously: its next post fails. */
static int post_until_error(struct endpoint *e, uint8_t *wqe)
{
	int len = build_send(wqe, 4, 1, 0, 0);
	int ret = 0;

	for (int i = 0; i < 200 && !ret; i++) {
		ret = post_send(e->fd, e->qp.qp_handle, wqe, len, 0, NULL);
		usleep(5000);
	}
	return ret;
}

TEST_F(pair, send_without_a_receive_wqe_fails_with_eio)
{
	struct endpoint c;
	uint64_t rnr = 0;

	ASSERT_EQ(0, ep_open(&c));
	/* a fresh a names c and c names a, but c posts no receive */
	ep_close(&self->a);
	ASSERT_EQ(0, ep_open(&self->a));
	ASSERT_EQ(0, connect_qp(c.fd, c.qp.qp_handle, self->a.qp.qpn));
	ASSERT_EQ(0, connect_qp(self->a.fd, self->a.qp.qp_handle, c.qp.qpn));
	if (self->on_model)
		rnr = model_read(&self->m, MODEL_RNR_ERRORS);
	EXPECT_EQ(-EIO, post_until_error(&self->a, self->wqe));
	if (self->on_model)
		EXPECT_EQ(rnr + 1, model_read(&self->m, MODEL_RNR_ERRORS));
	EXPECT_EQ(NULL, ep_peek(&c));
	ep_close(&c);
}

TEST_F(pair, send_to_a_peer_that_names_another_qp_fails_with_eio)
{
	struct endpoint c;
	uint64_t peer = 0;

	ASSERT_EQ(0, ep_open(&c));
	/* a now names c, but c is connected to itself */
	ASSERT_EQ(0, post_recv(c.fd, c.qp.qp_handle, 1));
	ASSERT_EQ(-EBUSY, connect_qp(self->a.fd, self->a.qp.qp_handle, c.qp.qpn))
		TH_LOG("a has receives posted: RESET would drop them");
	ep_close(&self->a);
	ASSERT_EQ(0, ep_open(&self->a));
	ASSERT_EQ(0, connect_qp(self->a.fd, self->a.qp.qp_handle, c.qp.qpn));
	if (self->on_model)
		peer = model_read(&self->m, MODEL_PEER_ERRORS);
	EXPECT_EQ(-EIO, post_until_error(&self->a, self->wqe));
	if (self->on_model)
		EXPECT_EQ(peer + 1, model_read(&self->m, MODEL_PEER_ERRORS));
	EXPECT_EQ(NULL, ep_peek(&c)) TH_LOG("c must receive nothing");
	ep_close(&c);
}

TEST_F(pair, send_to_a_closed_peer_fails_with_eio)
{
	ep_close(&self->b);
	EXPECT_EQ(-EIO, post_until_error(&self->a, self->wqe));
}

TEST_F(pair, a_failed_qp_refuses_receives_too)
{
	ep_close(&self->b);
	ASSERT_EQ(-EIO, post_until_error(&self->a, self->wqe));
	EXPECT_EQ(-EIO, post_recv(self->a.fd, self->a.qp.qp_handle, 1));
}

TEST_F(pair, delivers_to_another_process)
{
	int to_child[2], to_parent[2], status, len;
	pid_t pid;
	__u32 qpn;

	ASSERT_EQ(0, pipe(to_child));
	ASSERT_EQ(0, pipe(to_parent));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		struct endpoint c;
		const struct mlx4_bf_cqe *cqe;
		uint8_t want[64];
		int ok;

		if (ep_open(&c) || read(to_child[0], &qpn, 4) != 4 ||
		    connect_qp(c.fd, c.qp.qp_handle, qpn) || post_recv(c.fd, c.qp.qp_handle, 1) ||
		    write(to_parent[1], &c.qp.qpn, 4) != 4)
			_exit(2);
		cqe = ep_wait(&c, 5000);
		expected_payload(want, 64, 64);
		ok = cqe && ntohl(cqe->byte_cnt) == 64 && !memcmp(want, cqe_buffer(&c, cqe), 64);
		_exit(ok ? 0 : 1);
	}
	ep_close(&self->b);
	ASSERT_EQ(0, ep_open(&self->b));
	ASSERT_EQ(4, write(to_child[1], &self->b.qp.qpn, 4));
	ASSERT_EQ(4, read(to_parent[0], &qpn, 4));
	ASSERT_EQ(0, connect_qp(self->b.fd, self->b.qp.qp_handle, qpn));
	len = build_send(self->wqe, 64, 64, 0, 0);
	ASSERT_EQ(0, post_send(self->b.fd, self->b.qp.qp_handle, self->wqe, len, 0, NULL));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("the other process did not receive the 64 bytes intact");
}

TEST_F(pair, post_recv_checks_its_count_and_the_queue)
{
	__u32 h = self->a.qp.qp_handle;

	EXPECT_EQ(-EINVAL, post_recv(self->a.fd, h, self->a.qp.rq_entries + 1));
	/* the fixture filled the receive queue */
	EXPECT_EQ(-ENOSPC, post_recv(self->a.fd, h, 1));
	EXPECT_EQ(-ENOENT, post_recv(self->a.fd, h ^ 0x100, 1));
}

TEST_F(pair, post_recv_refills_only_what_was_consumed)
{
	ASSERT_EQ(0, deliver(_metadata, self->wqe, &self->a, &self->b, 10, 0));
	/* deliver() reposted the one buffer it consumed: full again */
	EXPECT_EQ(-ENOSPC, post_recv(self->b.fd, self->b.qp.qp_handle, 1));
}

TEST_F(pair, connect_checks_its_arguments)
{
	EXPECT_EQ(-EINVAL, connect_qp(self->a.fd, self->a.qp.qp_handle, 1u << 24));
	EXPECT_EQ(-ENOENT, connect_qp(self->a.fd, self->a.qp.qp_handle ^ 0x100, 5));
}

TEST_F(pair, gather_with_the_reserved_lkey_is_refused)
{
	struct mlx4_bf_stats before, after;
	uint8_t *w = self->wqe;

	/* ctrl + one data segment naming lkey 8, the model's reserved lkey */
	memset(w, 0, 32);
	put_be32(w, OP_SEND);
	put_be32(w + 4, 2);
	put_be32(w + 16, 64);
	put_be32(w + 20, 8);
	put_be32(w + 28, 0x1000);
	ASSERT_EQ(0, query_stats(self->a.fd, NULL, &before));
	/* ABI 3: a key that is not one of the context's MRs is an access error */
	EXPECT_EQ(-EACCES, post_send(self->a.fd, self->a.qp.qp_handle, w, 32, 0, NULL));
	ASSERT_EQ(0, query_stats(self->a.fd, NULL, &after));
	EXPECT_EQ(before.rejects[MLX4_BF_REJECT_LKEY] + 1, after.rejects[MLX4_BF_REJECT_LKEY]);
}

TEST_F(pair, receive_side_mappings_are_read_only)
{
	struct mlx4_bf_qp_info *q = &self->a.qp;
	void *p;

	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, self->a.fd, q->cq_offset);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EPERM, errno);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, self->a.fd, q->recv_offset);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(0, mprotect((void *)self->a.cq, 4096, PROT_READ));
	EXPECT_EQ(-1, mprotect((void *)self->a.cq, 4096, PROT_READ | PROT_WRITE))
		TH_LOG("a read-only mapping may not become writable");
}

TEST_F(pair, mmap_refuses_offsets_outside_the_regions)
{
	struct mlx4_bf_qp_info *q = &self->a.qp;
	void *p;

	/* half way into the receive buffers, past the CQ, and no QP there */
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, self->a.fd, q->recv_offset + 4096);
	EXPECT_EQ(MAP_FAILED, p);
	p = mmap(NULL, 8192, PROT_READ, MAP_SHARED, self->a.fd, q->cq_offset);
	EXPECT_EQ(MAP_FAILED, p);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, self->a.fd, q->cq_offset + (1 << 20));
	EXPECT_EQ(MAP_FAILED, p);
}

TEST(mmap_before_any_qp_fails)
{
	int fd = open(DEV_PATH, O_RDWR);
	void *p;

	if (fd < 0)
		SKIP(return, NO_DEVICE);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	close(fd);
}

TEST_HARNESS_MAIN
