// SPDX-License-Identifier: GPL-2.0
/*
 * QPs whose send queue user space owns (MLX4_BF_QP_F_USER_SEND, ABI 4), as
 * rdma-core posts on mlx4: the WQE into the mapped send queue, then to the
 * context's BlueFlame page (mmap at MLX4_BF_MMAP_BF_PAGE) or the doorbell in
 * its UAR page (MLX4_BF_MMAP_UAR_PAGE). On x86 by stores to the mappings; on
 * s390, which has no user-space MMIO without MIO, by the
 * s390_pci_mmio_write() system call on them. A context posts one way only,
 * and only a context that posts from user space maps the pages. What the
 * adapter executed is checked in the analyzer and in the target memory.
 */
#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "mlx4_bf_queue.h"
#include "mlx4_bf_model.h"

#define SEND_DOORBELL	0x14
/* A send completion's owner_sr_opcode: IS_SEND and the WQE's opcode. */
#define SEND_CQE_MASK		(MLX4_BF_CQE_IS_SEND | MLX4_BF_CQE_OPCODE_MASK)
#define SEND_CQE_RDMA_WRITE	(MLX4_BF_CQE_IS_SEND | OP_RDMA_WRITE)
#define SEND_CQE_RDMA_READ	(MLX4_BF_CQE_IS_SEND | OP_RDMA_READ)
#define SEND_CQE_ERROR		(MLX4_BF_CQE_IS_SEND | MLX4_BF_CQE_OPCODE_ERROR)

static int create_user_qp(int fd, struct mlx4_bf_qp_info *qp, struct mlx4_bf_qp_send_info *sq)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_CREATE_QP);
	call_inline_u32(&c, MLX4_BF_ATTR_QP_FLAGS, MLX4_BF_QP_F_USER_SEND);
	call_attr(&c, MLX4_BF_ATTR_QP_INFO, sizeof(*qp), (uintptr_t)qp);
	if (sq)
		call_attr(&c, MLX4_BF_ATTR_QP_SEND_INFO, sizeof(*sq), (uintptr_t)sq);
	return call_do(fd, &c);
}

static void *map_at(int fd, __u64 offset, size_t len, int prot, int flags)
{
	void *p = mmap(NULL, len, prot, flags, fd, offset);

	return p == MAP_FAILED ? NULL : p;
}

/* @len bytes to a mapped BAR page: 8-byte stores, or one syscall on s390. */
static int bar_write(uint8_t *dst, const uint8_t *src, size_t len)
{
#ifdef __s390x__
	return syscall(__NR_s390_pci_mmio_write, (unsigned long)dst, src, len) ? -errno : 0;
#else
	if (len == 4) {
		uint32_t v;

		memcpy(&v, src, 4);
		__atomic_store_n((uint32_t *)dst, v, __ATOMIC_RELAXED);
	} else {
		for (size_t i = 0; i < len; i += 8) {
			uint64_t v;

			memcpy(&v, src + i, 8);
			__atomic_store_n((uint64_t *)(dst + i), v, __ATOMIC_RELAXED);
		}
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return 0;
#endif
}

/* A context with one user-posted QP, its queues and pages mapped. */
FIXTURE(user)
{
	struct model m;
	int have_model;
	int fd;
	struct mlx4_bf_device_info dev;
	struct mlx4_bf_qp_info qp;
	struct mlx4_bf_qp_send_info sq;
	uint8_t *sqbuf, *bf, *uar;
	/* Its CQ (no receive buffers), polled with ep_wait()/ep_consume(). */
	struct endpoint ep;
	struct sink sink;
	uint32_t head;
};

FIXTURE_SETUP(user)
{
	self->fd = open(DEV_PATH, O_RDWR);
	if (self->fd < 0)
		SKIP(return, NO_DEVICE);
	self->have_model = !model_open(&self->m);
	ASSERT_EQ(0, query_device(self->fd, &self->dev));
	ASSERT_EQ(0, create_user_qp(self->fd, &self->qp, &self->sq));
	self->sqbuf = map_at(self->fd, self->sq.sq_offset, self->sq.sq_entries * self->sq.sq_stride,
			     PROT_READ | PROT_WRITE, MAP_SHARED);
	ASSERT_NE(NULL, self->sqbuf);
	self->ep.qp = self->qp;
	self->ep.cq = map_at(self->fd, self->qp.cq_offset, self->qp.cq_entries * self->qp.cqe_size,
			     PROT_READ, MAP_SHARED);
	ASSERT_NE(NULL, self->ep.cq);
	self->ep.db = map_at(self->fd, self->qp.cq_db_offset, PAGE, PROT_READ | PROT_WRITE,
			     MAP_SHARED);
	ASSERT_NE(NULL, self->ep.db);
	self->bf = map_at(self->fd, MLX4_BF_MMAP_BF_PAGE, PAGE, PROT_WRITE, MAP_SHARED);
	ASSERT_NE(NULL, self->bf);
	self->uar = map_at(self->fd, MLX4_BF_MMAP_UAR_PAGE, PAGE, PROT_WRITE, MAP_SHARED);
	ASSERT_NE(NULL, self->uar);
	ASSERT_EQ(0, sink_open(self->fd, &self->sink));
}

FIXTURE_TEARDOWN(user)
{
	if (self->fd < 0)
		return;
	if (self->have_model)
		model_close(&self->m);
	close(self->fd);
}

/*
 * Stamps WQE number self->head as the kernel would (expected_bf() for
 * BlueFlame: owner, counter, QPN, padded to its burst; else the owner bit
 * only) into @out and writes it into the send queue, the first word last.
 * Returns the bytes to write to the BlueFlame page. (struct
 * _test_data_user is FIXTURE_DATA(user), spelled so checkpatch sees a type.)
 */
static int put_in_sq(struct _test_data_user *self, uint8_t *wqe, int len, int bf, uint8_t *out)
{
	uint8_t *slot = self->sqbuf + (self->head % self->sq.sq_entries) * self->sq.sq_stride;
	int burst = len;
	uint32_t first;

	stamp_cq_update(wqe);
	if (bf)
		burst = expected_bf(out, wqe, len, self->qp.qpn, self->head, self->sq.sq_entries);
	else
		expected_doorbell_wqe(out, wqe, len, self->head, self->sq.sq_entries);
	memcpy(slot + 4, out + 4, len - 4);
	memcpy(&first, out, 4);
	__atomic_store_n((uint32_t *)slot, first, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return burst;
}

/* Waits for the send CQE of the last WQE and consumes it; its opcode byte. */
static int wait_send_cqe(struct _test_data_user *self)
{
	const struct mlx4_bf_cqe *cqe = ep_wait(&self->ep, 2000);
	int op_own;

	if (!cqe)
		return -1;
	op_own = cqe->owner_sr_opcode;
	ep_consume(&self->ep);
	return op_own;
}

TEST_F(user, create_reports_the_send_queue_it_maps)
{
	EXPECT_EQ(self->dev.sq_entries, self->sq.sq_entries);
	EXPECT_GE(self->sq.sq_stride, self->dev.max_bf_wqe_size);
	EXPECT_EQ(self->dev.bf_buf_size, self->sq.bf_buf_size);
	EXPECT_EQ(0, self->sq.bf_reg_offset);
	/* Every WQE starts invalid for the first pass: owner bit set. */
	for (__u32 i = 0; i < self->sq.sq_entries; i++)
		EXPECT_EQ(1u << 31, get_be32(self->sqbuf + i * self->sq.sq_stride));
}

TEST_F(user, blueflame_post_from_user_space_lands)
{
	uint8_t wqe[MAX_WQE + 64], out[MAX_WQE + 64], want[256], last[256];
	int len = build_rdma_write(wqe, 100, 7, sink_addr(&self->sink), self->sink.mr.rkey);
	uint64_t bf0 = 0, rdma0 = 0, dma0 = 0;
	int burst;

	if (self->have_model) {
		bf0 = model_read(&self->m, MODEL_WQE_BF);
		dma0 = model_read(&self->m, MODEL_WQE_DMA);
		rdma0 = model_read(&self->m, MODEL_RDMA_WRITES);
	}
	burst = put_in_sq(self, wqe, len, 1, out);
	ASSERT_EQ(0, bar_write(self->bf + self->sq.bf_reg_offset, out, burst));
	rdma_write_pattern(want, 100, 7);
	ASSERT_EQ(0, wait_landed(self->sink.buf, want, 100));
	EXPECT_EQ(SEND_CQE_RDMA_WRITE, wait_send_cqe(self) & SEND_CQE_MASK);
	if (!self->have_model)
		return;
	EXPECT_EQ(bf0 + 1, model_read(&self->m, MODEL_WQE_BF));
	EXPECT_EQ(dma0, model_read(&self->m, MODEL_WQE_DMA));
	EXPECT_EQ(rdma0 + 1, model_read(&self->m, MODEL_RDMA_WRITES));
	/* Executed from exactly the bytes written, on this context's page. */
	EXPECT_EQ(self->qp.qpn, (__u32)model_read(&self->m, MODEL_LAST_QPN));
	EXPECT_EQ(MODEL_SOURCE_BF, (__u32)(model_read(&self->m, MODEL_LAST_QPN) >> 32));
	for (int i = 0; i < burst; i += 8) {
		uint64_t v = model_read_raw(&self->m, MODEL_LAST_BYTES + i);

		memcpy(last + i, &v, 8);
	}
	EXPECT_EQ(0, memcmp(last, out, len));
}

TEST_F(user, doorbell_post_from_user_space_lands)
{
	uint8_t wqe[MAX_WQE + 64], out[MAX_WQE + 64], want[256], db[4];
	int len = build_rdma_write(wqe, 60, 3, sink_addr(&self->sink), self->sink.mr.rkey);
	uint64_t dma0 = 0, doorbells0 = 0;

	if (self->have_model) {
		dma0 = model_read(&self->m, MODEL_WQE_DMA);
		doorbells0 = model_read(&self->m, MODEL_DOORBELLS);
	}
	put_in_sq(self, wqe, len, 0, out);
	put_be32(db, self->qp.qpn << 8);
	ASSERT_EQ(0, bar_write(self->uar + SEND_DOORBELL, db, 4));
	rdma_write_pattern(want, 60, 3);
	ASSERT_EQ(0, wait_landed(self->sink.buf, want, 60));
	EXPECT_EQ(SEND_CQE_RDMA_WRITE, wait_send_cqe(self) & SEND_CQE_MASK);
	if (!self->have_model)
		return;
	EXPECT_EQ(dma0 + 1, model_read(&self->m, MODEL_WQE_DMA));
	EXPECT_EQ(doorbells0 + 1, model_read(&self->m, MODEL_DOORBELLS));
}

TEST_F(user, a_full_pass_of_the_send_queue_completes)
{
	uint8_t wqe[MAX_WQE + 64], out[MAX_WQE + 64], want[256];
	__u32 n = 2 * self->sq.sq_entries + 1;

	for (__u32 i = 0; i < n; i++) {
		int len = build_rdma_write(wqe, 32, (uint8_t)i, sink_addr(&self->sink),
					   self->sink.mr.rkey);
		int burst = put_in_sq(self, wqe, len, 1, out);

		/* Alternating between the register's two buffers. */
		ASSERT_EQ(0, bar_write(self->bf + (i & 1) * self->sq.bf_buf_size, out, burst));
		self->head++;
		ASSERT_EQ(SEND_CQE_RDMA_WRITE, wait_send_cqe(self) & SEND_CQE_MASK);
		rdma_write_pattern(want, 32, (uint8_t)i);
		ASSERT_EQ(0, wait_landed(self->sink.buf, want, 32));
	}
}

/*
 * What keeps a user-posted QP safe is the adapter: no rlkey in its context,
 * so a gather naming the reserved lkey (a DMA address, as the kernel's own
 * WQEs use it) is a local protection error, and nothing is read or written.
 */
TEST_F(user, the_adapter_refuses_the_reserved_lkey)
{
	struct sge sg = { .addr = 0x1000, .length = 64, .lkey = RESERVED_LKEY };
	uint8_t wqe[MAX_WQE + 64], out[MAX_WQE + 64], db[4];
	uint64_t faults0, rdma0;
	int len, op;

	if (!self->have_model || model_version(&self->m) < 4)
		SKIP(return, NO_V4);
	faults0 = model_read(&self->m, MODEL_LOCAL_PROT_FAULTS);
	rdma0 = model_read(&self->m, MODEL_RDMA_WRITES);
	memset(self->sink.buf, 0xee, 64);
	len = build_gather(wqe, OP_RDMA_WRITE, sink_addr(&self->sink), self->sink.mr.rkey, &sg, 1);
	put_in_sq(self, wqe, len, 0, out);
	put_be32(db, self->qp.qpn << 8);
	ASSERT_EQ(0, bar_write(self->uar + SEND_DOORBELL, db, 4));
	declare_fault("local");
	op = wait_send_cqe(self);
	EXPECT_EQ(SEND_CQE_ERROR, op & SEND_CQE_MASK);
	EXPECT_EQ(faults0 + 1, model_read(&self->m, MODEL_LOCAL_PROT_FAULTS));
	EXPECT_EQ(rdma0, model_read(&self->m, MODEL_RDMA_WRITES));
	for (int i = 0; i < 64; i++)
		ASSERT_EQ(0xee, self->sink.buf[i]);
}

/*
 * An RDMA write naming a region of another context by its rkey: the
 * responder's protection domain differs, a remote access error.
 */
TEST_F(user, the_adapter_refuses_a_foreign_rkey)
{
	uint8_t wqe[MAX_WQE + 64], out[MAX_WQE + 64], db[4];
	struct sink other = { 0 };
	uint64_t faults0;
	int fd, len;

	if (!self->have_model || model_version(&self->m) < 4)
		SKIP(return, NO_V4);
	fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, sink_open(fd, &other));
	memset(other.buf, 0xee, 64);
	faults0 = model_read(&self->m, MODEL_REMOTE_ACCESS_FAULTS);
	len = build_rdma_write(wqe, 32, 1, sink_addr(&other), other.mr.rkey);
	put_in_sq(self, wqe, len, 0, out);
	put_be32(db, self->qp.qpn << 8);
	ASSERT_EQ(0, bar_write(self->uar + SEND_DOORBELL, db, 4));
	declare_fault("remote");
	EXPECT_EQ(SEND_CQE_ERROR, wait_send_cqe(self) & SEND_CQE_MASK);
	EXPECT_EQ(faults0 + 1, model_read(&self->m, MODEL_REMOTE_ACCESS_FAULTS));
	for (int i = 0; i < 64; i++)
		ASSERT_EQ(0xee, other.buf[i]);
	close(fd);
}

/*
 * An RDMA read posted from user space: the adapter checks both regions (the
 * source allows remote reads, the destination local writes) and the data
 * lands in the destination.
 */
TEST_F(user, an_rdma_read_from_user_space_lands)
{
	uint8_t wqe[MAX_WQE + 64], out[MAX_WQE + 64], db[4], *src;
	struct mlx4_bf_mr_info src_mr;
	struct sge sg;
	uint64_t reads0 = 0;
	int len;

	src = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, src);
	for (int i = 0; i < 96; i++)
		src[i] = (uint8_t)(i * 3 + 1);
	ASSERT_EQ(0, reg_mr(self->fd, (uintptr_t)src, PAGE, MLX4_BF_ACCESS_REMOTE_READ, &src_mr));
	memset(self->sink.buf, 0xee, 128);
	if (self->have_model && model_version(&self->m) >= 8)
		reads0 = model_read(&self->m, MODEL_RDMA_READS);
	sg = (struct sge){ .addr = sink_addr(&self->sink), .length = 96,
			   .lkey = self->sink.mr.lkey };
	len = build_gather(wqe, OP_RDMA_READ, (uintptr_t)src, src_mr.rkey, &sg, 1);
	put_in_sq(self, wqe, len, 0, out);
	put_be32(db, self->qp.qpn << 8);
	ASSERT_EQ(0, bar_write(self->uar + SEND_DOORBELL, db, 4));
	EXPECT_EQ(SEND_CQE_RDMA_READ, wait_send_cqe(self) & SEND_CQE_MASK);
	ASSERT_EQ(0, wait_landed(self->sink.buf, src, 96));
	EXPECT_EQ(0xee, self->sink.buf[96]) TH_LOG("not a byte more");
	if (self->have_model && model_version(&self->m) >= 8)
		EXPECT_EQ(reads0 + 1, model_read(&self->m, MODEL_RDMA_READS));
	munmap(src, PAGE);
}

/*
 * Where an RDMA read lands must allow local writes: a destination region
 * registered for remote reads only is a local protection error, nothing
 * written.
 */
TEST_F(user, the_adapter_refuses_a_read_into_memory_without_local_write)
{
	uint8_t wqe[MAX_WQE + 64], out[MAX_WQE + 64], db[4], *dst;
	struct mlx4_bf_mr_info dst_mr;
	uint64_t faults0;
	struct sge sg;
	int len;

	if (!self->have_model || model_version(&self->m) < 8)
		SKIP(return, NO_ANALYZER " (diag version 8)");
	dst = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, dst);
	memset(dst, 0xee, 64);
	ASSERT_EQ(0, reg_mr(self->fd, (uintptr_t)dst, PAGE, MLX4_BF_ACCESS_REMOTE_READ, &dst_mr));
	/* It reads itself: the source allows remote reads, the landing no writes. */
	faults0 = model_read(&self->m, MODEL_LOCAL_PROT_FAULTS);
	sg = (struct sge){ .addr = (uintptr_t)dst, .length = 64, .lkey = dst_mr.lkey };
	len = build_gather(wqe, OP_RDMA_READ, (uintptr_t)dst, dst_mr.rkey, &sg, 1);
	put_in_sq(self, wqe, len, 0, out);
	put_be32(db, self->qp.qpn << 8);
	ASSERT_EQ(0, bar_write(self->uar + SEND_DOORBELL, db, 4));
	declare_fault("local");
	EXPECT_EQ(SEND_CQE_ERROR, wait_send_cqe(self) & SEND_CQE_MASK);
	EXPECT_EQ(faults0 + 1, model_read(&self->m, MODEL_LOCAL_PROT_FAULTS));
	for (int i = 0; i < 64; i++)
		ASSERT_EQ(0xee, dst[i]);
	munmap(dst, PAGE);
}

TEST_F(user, post_send_on_it_is_einval)
{
	uint8_t wqe[MAX_WQE + 64];
	int len = build_rdma_write(wqe, 8, 0, sink_addr(&self->sink), self->sink.mr.rkey);

	EXPECT_EQ(-EINVAL, post_send(self->fd, self->qp.qp_handle, wqe, len, 0, NULL));
}

TEST_F(user, post_recv_on_it_is_eopnotsupp)
{
	EXPECT_EQ(-EOPNOTSUPP, post_recv(self->fd, self->qp.qp_handle, 1));
}

TEST_F(user, a_kernel_posted_qp_in_the_same_context_is_einval)
{
	struct mlx4_bf_qp_info qp;

	EXPECT_EQ(-EINVAL, create_qp(self->fd, &qp));
}

TEST_F(user, bar_pages_map_one_shared_page)
{
	EXPECT_EQ(NULL, map_at(self->fd, MLX4_BF_MMAP_BF_PAGE, 2 * PAGE, PROT_WRITE, MAP_SHARED));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(NULL, map_at(self->fd, MLX4_BF_MMAP_BF_PAGE, PAGE, PROT_WRITE, MAP_PRIVATE));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(NULL, map_at(self->fd, MLX4_BF_MMAP_BF_PAGE + PAGE, PAGE, PROT_WRITE,
			       MAP_SHARED));
}

/*
 * The UAR page is mapped uncached and the BlueFlame page write-combining, as
 * mlx4_ib maps them, whatever the process asked for: read from the page-table
 * entries once a post through each has faulted it in. x86 encodes UC- as PCD
 * (with PAT and with nopat) and WC as PWT (slot 1 of Linux's PAT); without
 * PAT, write-combining falls back to UC-. With PAT the user page gets the
 * type the kernel's own mapping of it reserved (arch/x86/mm/pat/memtype.c),
 * so the uncached writer's BlueFlame page is UC- too.
 */
TEST_F(user, bar_pages_are_mapped_uncached_and_write_combining)
{
	uint8_t wqe[MAX_WQE + 64], out[MAX_WQE + 64], db[4];
	int pat = !access(PAT_LIST, F_OK), len, burst;
	char bits[32];

	if (access(PAGE_TABLES, R_OK))
		SKIP(return, "no " PAGE_TABLES " (x86, CONFIG_PTDUMP_DEBUGFS)");
	len = build_rdma_write(wqe, 32, 1, sink_addr(&self->sink), self->sink.mr.rkey);
	burst = put_in_sq(self, wqe, len, 1, out);
	ASSERT_EQ(0, bar_write(self->bf, out, burst));
	self->head++;
	ASSERT_EQ(SEND_CQE_RDMA_WRITE, wait_send_cqe(self) & SEND_CQE_MASK);
	len = build_rdma_write(wqe, 32, 2, sink_addr(&self->sink), self->sink.mr.rkey);
	put_in_sq(self, wqe, len, 0, out);
	put_be32(db, self->qp.qpn << 8);
	ASSERT_EQ(0, bar_write(self->uar + SEND_DOORBELL, db, 4));
	self->head++;
	ASSERT_EQ(SEND_CQE_RDMA_WRITE, wait_send_cqe(self) & SEND_CQE_MASK);

	ASSERT_EQ(0, pte_cache_bits(self->uar, bits, sizeof(bits)));
	EXPECT_STREQ("PCD", bits) TH_LOG("the UAR page (PAT %s)", pat ? "on" : "off");
	ASSERT_EQ(0, pte_cache_bits(self->bf, bits, sizeof(bits)));
	EXPECT_STREQ(pat && self->dev.writer == MLX4_BF_WRITER_WRITE_COMBINING ? "PWT" : "PCD",
		     bits)
		TH_LOG("the BlueFlame page (PAT %s, writer %u)", pat ? "on" : "off",
		       self->dev.writer);
}

TEST(kernel_posting_context_cannot_map_its_pages)
{
	struct mlx4_bf_qp_info qp;
	int fd = open(DEV_PATH, O_RDWR);

	if (fd < 0)
		SKIP(return, NO_DEVICE);
	ASSERT_EQ(0, create_qp(fd, &qp));
	EXPECT_EQ(NULL, map_at(fd, MLX4_BF_MMAP_BF_PAGE, PAGE, PROT_WRITE, MAP_SHARED));
	EXPECT_EQ(EPERM, errno);
	EXPECT_EQ(NULL, map_at(fd, MLX4_BF_MMAP_UAR_PAGE, PAGE, PROT_WRITE, MAP_SHARED));
	EXPECT_EQ(EPERM, errno);
	EXPECT_EQ(-EINVAL, create_user_qp(fd, &qp, &(struct mlx4_bf_qp_send_info){ 0 }));
	close(fd);
}

TEST(mapping_a_page_makes_the_context_post_from_user_space)
{
	struct mlx4_bf_qp_info qp;
	struct mlx4_bf_qp_send_info sq;
	int fd = open(DEV_PATH, O_RDWR);
	void *bf;

	if (fd < 0)
		SKIP(return, NO_DEVICE);
	bf = map_at(fd, MLX4_BF_MMAP_BF_PAGE, PAGE, PROT_WRITE, MAP_SHARED);
	ASSERT_NE(NULL, bf);
	EXPECT_EQ(-EINVAL, create_qp(fd, &qp));
	EXPECT_EQ(0, create_user_qp(fd, &qp, &sq));
	munmap(bf, PAGE);
	close(fd);
}

TEST(user_send_needs_the_send_info_output)
{
	struct mlx4_bf_qp_info qp;
	struct call c;
	int fd = open(DEV_PATH, O_RDWR);

	if (fd < 0)
		SKIP(return, NO_DEVICE);
	EXPECT_EQ(-EINVAL, create_user_qp(fd, &qp, NULL));
	call_init(&c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_CREATE_QP);
	call_inline_u32(&c, MLX4_BF_ATTR_QP_FLAGS, 1u << 5);
	call_attr(&c, MLX4_BF_ATTR_QP_INFO, sizeof(qp), (uintptr_t)&qp);
	EXPECT_EQ(-EINVAL, call_do(fd, &c));
	/* Nothing was decided by the refusals: a kernel-posted QP is fine. */
	EXPECT_EQ(0, create_qp(fd, &qp));
	close(fd);
}

TEST_HARNESS_MAIN
