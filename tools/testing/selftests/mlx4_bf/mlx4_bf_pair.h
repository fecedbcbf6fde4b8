/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The fixture of the selftests that post naming registered memory
 * (mlx4_bf_mr_post_test): two connected contexts with memory regions, and
 * what a refused post, a received SEND and a landed RDMA write must look
 * like. Include it after kselftest_harness.h.
 */
#ifndef MLX4_BF_PAIR_H
#define MLX4_BF_PAIR_H

#include "mlx4_bf_queue.h"
#include "mlx4_bf_model.h"

/*
 * Two contexts whose QPs are connected to each other, receives posted; a's
 * pages registered (the gather source), b's remote-writable (where a's RDMA
 * writes land).
 */
struct pair {
	struct endpoint a, b;
	int v4;
	struct model m;
	struct mlx4_bf_device_info dev;
	uint8_t *abuf, *bbuf;
	struct mlx4_bf_mr_info amr, bmr;
	uint8_t wqe[MAX_WQE + 64];
};

FIXTURE(pair) {
	struct pair p;
};

FIXTURE_SETUP(pair)
{
	struct pair *p = &self->p;
	int ret;

	p->a.fd = p->b.fd = -1;
	p->abuf = p->bbuf = NULL;
	if (access(DEV_PATH, F_OK))
		SKIP(return, NO_DEVICE);
	p->v4 = analyzer_v4(&p->m);
	ASSERT_EQ(0, ep_open(&p->a));
	ASSERT_EQ(0, ep_open(&p->b));
	ret = ep_pair(&p->a, &p->b, p->a.qp.rq_entries);
	ASSERT_EQ(0, ret) TH_LOG("connecting two QPs: %s", strerror(-ret));
	ASSERT_EQ(0, query_device(p->a.fd, &p->dev));
	p->abuf = map_pages(BUF_PAGES, PROT_READ | PROT_WRITE);
	p->bbuf = map_pages(BUF_PAGES, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, p->abuf);
	ASSERT_NE(NULL, p->bbuf);
	for (int i = 0; i < BUF_BYTES; i++)
		p->abuf[i] = (uint8_t)(i * 7 + i / 251);
	ASSERT_EQ(0, reg_mr(p->a.fd, (uintptr_t)p->abuf, BUF_BYTES,
			    MLX4_BF_ACCESS_LOCAL_WRITE, &p->amr));
	ASSERT_EQ(0, reg_mr(p->b.fd, (uintptr_t)p->bbuf, BUF_BYTES, ACCESS_RDMA,
			    &p->bmr));
}

FIXTURE_TEARDOWN(pair)
{
	struct pair *p = &self->p;

	ep_close(&p->a);
	ep_close(&p->b);
	if (p->abuf)
		munmap(p->abuf, BUF_BYTES);
	if (p->bbuf)
		munmap(p->bbuf, BUF_BYTES);
	if (p->v4)
		model_close(&p->m);
}

static const char *const reject_names[MLX4_BF_REJECT_MAX] = {
	"length", "size field", "opcode", "ctrl", "inline", "gather", "fault", "qp",
	"lkey", "range", "rkey",
};

static __u64 rejects(const struct mlx4_bf_stats *s)
{
	__u64 sum = 0;

	for (int i = 0; i < MLX4_BF_REJECT_MAX; i++)
		sum += s->rejects[i];
	return sum;
}

/*
 * a posts its WQE (@len bytes, @flags): refused with -EACCES for @reason,
 * and nothing of it reached the adapter (the analyzer's WQE, doorbell and
 * BAR2 write counters did not move) or b.
 */
static void expect_refused(struct __test_metadata *_metadata, struct pair *p,
			   int len, __u32 flags, int reason)
{
	struct mlx4_bf_stats before, after;
	struct model_posts mb = {}, ma;

	ASSERT_EQ(0, query_stats(p->a.fd, NULL, &before));
	if (p->v4)
		model_posts(&p->m, &mb);
	EXPECT_EQ(-EACCES, post_send(p->a.fd, p->a.qp.qp_handle, p->wqe, len, flags,
				     NULL)) TH_LOG("expected a refusal for %s", reject_names[reason]);
	ASSERT_EQ(0, query_stats(p->a.fd, NULL, &after));
	EXPECT_EQ(before.rejects[reason] + 1, after.rejects[reason])
		TH_LOG("not refused for %s", reject_names[reason]);
	EXPECT_EQ(rejects(&before) + 1, rejects(&after)) TH_LOG("one refusal, one reason");
	EXPECT_EQ(before.bf_posts + before.db_posts, after.bf_posts + after.db_posts);
	if (p->v4) {
		model_posts(&p->m, &ma);
		EXPECT_EQ(mb.wqe_bf + mb.wqe_dma, ma.wqe_bf + ma.wqe_dma)
			TH_LOG("the adapter executed %llu WQE(s)",
			       (unsigned long long)(ma.wqe_bf + ma.wqe_dma - mb.wqe_bf - mb.wqe_dma));
		EXPECT_EQ(mb.doorbells, ma.doorbells);
		EXPECT_EQ(mb.bar2_writes, ma.bar2_writes);
	}
	EXPECT_EQ(NULL, ep_peek(&p->b)) TH_LOG("b received something");
}

/* a SENDs what @n segments gather. */
static int send_gather(struct pair *p, const struct sge *sg, int n)
{
	int len = build_gather(p->wqe, OP_SEND, 0, 0, sg, n);

	return post_send(p->a.fd, p->a.qp.qp_handle, p->wqe, len, 0, NULL);
}

/* b received exactly @want (@len bytes) from a in its next CQE. */
static void expect_received(struct __test_metadata *_metadata, struct pair *p,
			    const uint8_t *want, __u32 len)
{
	const struct mlx4_bf_cqe *cqe = ep_wait(&p->b, 2000);
	long diff;

	ASSERT_NE(NULL, cqe) TH_LOG("b received nothing");
	EXPECT_EQ(MLX4_BF_CQE_OPCODE_SEND, cqe_opcode(cqe));
	EXPECT_EQ(len, ntohl(cqe->byte_cnt)) TH_LOG("byte_cnt");
	EXPECT_EQ(p->a.qp.qpn, ntohl(cqe->src_qpn) & 0xffffff) TH_LOG("source QPN");
	diff = first_difference(cqe_buffer(&p->b, cqe), want, len);
	EXPECT_EQ(-1, diff) TH_LOG("received byte %ld differs", diff);
	ep_consume(&p->b);
	ASSERT_EQ(0, post_recv(p->b.fd, p->b.qp.qp_handle, 1));
}

/*
 * a RDMA-writes the WQE in p->wqe (@len bytes, @flags) of @n bytes to
 * @dst in b's memory: they land there exactly, the bytes around them stay,
 * and the analyzer counts one RDMA write of @n bytes.
 */
static void expect_landed(struct __test_metadata *_metadata, struct pair *p,
			  int len, __u32 flags, uint8_t *dst, const uint8_t *want, __u32 n)
{
	uint64_t writes = 0, bytes = 0;
	long diff;

	ASSERT_EQ(0, dst[-1]);
	ASSERT_EQ(0, dst[n]);
	if (p->v4) {
		writes = model_read(&p->m, MODEL_RDMA_WRITES);
		bytes = model_read(&p->m, MODEL_RDMA_WRITE_BYTES);
	}
	ASSERT_EQ(0, post_send(p->a.fd, p->a.qp.qp_handle, p->wqe, len, flags, NULL));
	if (p->v4) {
		/* the read waits for the post's writes; the model ran the WQE */
		EXPECT_EQ(writes + 1, model_read(&p->m, MODEL_RDMA_WRITES));
		EXPECT_EQ(bytes + n, model_read(&p->m, MODEL_RDMA_WRITE_BYTES));
	}
	if (wait_landed(dst, want, n)) {
		diff = first_difference(dst, want, n);
		EXPECT_EQ(-1, diff) TH_LOG("byte %ld of %u is %#04x, expected %#04x", diff, n,
					   dst[diff], want[diff]);
	}
	EXPECT_EQ(0, dst[-1]) TH_LOG("the byte before the target was written");
	EXPECT_EQ(0, dst[n]) TH_LOG("the byte after the target was written");
}

/* b's region readable by a (REMOTE_READ only), holding a pattern at @src. */
static void readable_source(struct __test_metadata *_metadata, struct pair *p,
			    struct mlx4_bf_mr_info *mr, uint8_t *src, int n)
{
	for (int i = 0; i < n; i++)
		src[i] = (uint8_t)(i * 13 + 5);
	ASSERT_EQ(0, reg_mr(p->b.fd, (uintptr_t)p->bbuf, BUF_BYTES,
			    MLX4_BF_ACCESS_REMOTE_READ, mr));
}

#endif /* MLX4_BF_PAIR_H */
