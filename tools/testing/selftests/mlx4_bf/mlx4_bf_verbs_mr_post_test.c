// SPDX-License-Identifier: GPL-2.0
/*
 * Registered memory on the RDMA device (mlx4_bf<N>) named by posts: two
 * contexts whose RC QPs are connected to each other (mlx4_bf_verbs.h
 * verbs_open_pair()), a posting its WQEs through QP_POST, b receiving
 * through libmlx4's ibv_post_recv(). What arrives is checked in the
 * receiver's memory, what the adapter did on the analyzer (mlx4_bf_model.h,
 * diagnostic block version 4, 8 for RDMA reads); without it every test
 * SKIPs.
 *
 * Two checkers, as for every RC QP of this provider (ib/post.rs):
 * - the kernel, on QP_POST, checks what the WQE gathers (or, for an RDMA
 *   READ, where its data lands): each data segment's lkey must name a region
 *   of the QP's PD holding the range, local-writable for a READ's
 *   (region::check_gathers()); else EACCES and nothing reaches the adapter;
 * - what an RDMA names remotely (rkey, remote address) is the responder's
 *   to check, the adapter's: the requester gets an error completion
 *   (REM_ACCESS_ERR, its QP in error) and the model counts a remote access
 *   fault, which the test declares (declare_fault()). A local protection
 *   fault never happens for a WQE the kernel accepted: the last test
 *   compares the model's counters over the whole program.
 *
 * libmlx4's own posts (ibv_post_send()) never reach the kernel: the
 * adapter alone refuses their gathers and landings, the reserved lkey
 * among them, as local protection errors (declared).
 *
 * Ported from the misc device's mlx4_bf_mr_post_test, every rule with a
 * verbs counterpart. Changed: every rkey rule (without REMOTE_WRITE or
 * REMOTE_READ, a context that is not the peer's, stale, past the end) was a
 * kernel refusal there and is the responder's here. Dropped:
 * - the per-reason reject counters of the misc context's stats
 *   (QUERY_STATS): the verbs device has no such query; the errno, the
 *   analyzer and the empty CQs show the refusal;
 * - its receive rings (mlx4_bf_queue.h): receives are libmlx4's;
 * - DEREG_MR's EBUSY while sends that gather from the region are
 *   outstanding: the provider deregisters at once (ib/mr.rs: HW2SW_MPT,
 *   then unpin); see dereg_with_sends_outstanding_succeeds_at_once;
 * - the debugfs pinned_pages check of fork: the misc device's regions
 *   only; VmPin (ib_umem's pinned_vm) stands for it.
 *
 * From the misc device's mlx4_bf_user_send_test (QPs whose send queue user
 * space owned, posting as libmlx4 does) come the adapter's own refusals of
 * such posts: the reserved lkey, and an RDMA read into memory without
 * LOCAL_WRITE; its foreign rkey is
 * rkey_of_a_context_that_is_not_the_peer_is_a_remote_access_error.
 */
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "mlx4_bf_model.h"
#include "mlx4_bf_verbs.h"

/*
 * The model's fault counters and the faults declared when the program
 * started: the last test compares. Read before the harness forks its
 * tests; the tests' processes inherit them.
 */
static struct {
	int v4;
	uint64_t local, remote;
	long declared_local, declared_remote;
} at_start;

/* The faults of @kind ("local", "remote") declared in DECLARED_FAULTS so far. */
static long declared(const char *kind)
{
	FILE *f = fopen(DECLARED_FAULTS, "r");
	char line[32];
	long n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += !strncmp(line, kind, strlen(kind));
	fclose(f);
	return n;
}

static void __attribute__((constructor)) read_faults_at_start(void)
{
	struct model m;

	if (!analyzer_v4(&m))
		return;
	at_start.v4 = 1;
	at_start.local = model_read(&m, MODEL_LOCAL_PROT_FAULTS);
	at_start.remote = model_read(&m, MODEL_REMOTE_ACCESS_FAULTS);
	at_start.declared_local = declared("local");
	at_start.declared_remote = declared("remote");
	model_close(&m);
}

#define PAIR_ACCESS	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define LOCAL_WRITE	IBV_ACCESS_LOCAL_WRITE
#define RDMA_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

/*
 * a and b connected; a's pages registered local-writable (a gather source,
 * an RDMA read's target), b's remote-writable (where a's writes and sends
 * land), not remote-readable.
 */
struct pair {
	struct verbs a, b;
	struct model m;
	int have_model;
	uint8_t *abuf, *bbuf;
	struct ibv_mr *amr, *bmr;
	uint8_t wqe[MAX_WQE + 64];
};

FIXTURE(pair)
{
	struct pair p;
};

FIXTURE_SETUP(pair)
{
	struct pair *p = &self->p;

	p->have_model = 0;
	p->a.ctx = NULL;
	p->b.ctx = NULL;
	p->abuf = NULL;
	p->bbuf = NULL;
	if (!verbs_device_present())
		SKIP(return, NO_VERBS_DEVICE);
	if (!analyzer_v4(&p->m))
		SKIP(return, NO_V4);
	p->have_model = 1;
	ASSERT_EQ(0, verbs_open_pair(&p->a, &p->b, PAIR_ACCESS, 1, 0));
	p->abuf = map_pages(BUF_PAGES, PROT_READ | PROT_WRITE);
	p->bbuf = map_pages(BUF_PAGES, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, p->abuf);
	ASSERT_NE(NULL, p->bbuf);
	for (int i = 0; i < BUF_BYTES; i++)
		p->abuf[i] = (uint8_t)(i * 7 + i / 251);
	p->amr = ibv_reg_mr(p->a.pd, p->abuf, BUF_BYTES, LOCAL_WRITE);
	p->bmr = ibv_reg_mr(p->b.pd, p->bbuf, BUF_BYTES, RDMA_ACCESS);
	ASSERT_NE(NULL, p->amr);
	ASSERT_NE(NULL, p->bmr);
}

/* Regions a test left registered go with their context. */
FIXTURE_TEARDOWN(pair)
{
	struct pair *p = &self->p;

	if (p->a.ctx)
		verbs_close(&p->a);
	if (p->b.ctx)
		verbs_close(&p->b);
	if (p->abuf)
		munmap(p->abuf, BUF_BYTES);
	if (p->bbuf)
		munmap(p->bbuf, BUF_BYTES);
	if (p->have_model)
		model_close(&p->m);
}

/* a posts the WQE in p->wqe (@len bytes) with @flags: 0 or the errno. */
static int post(struct pair *p, int len, uint32_t flags)
{
	return verbs_post(&p->a, verbs_put_wqe(&p->a, p->wqe, len), len, flags, NULL);
}

/* a SENDs what @n segments gather: 0 or the errno. */
static int send_gather(struct pair *p, const struct sge *sg, int n)
{
	return post(p, build_gather(p->wqe, OP_SEND, 0, 0, sg, n), 0);
}

/* b posts a receive of @len bytes at @at of its region; 0 or the errno. */
static int b_recv(struct pair *p, uint8_t *at, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)at, .length = len, .lkey = p->bmr->lkey };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(p->b.qp, &wr, &bad);
}

/* a's next completion: its status is @want, for @opcode. */
static void expect_a_cqe(struct __test_metadata *_metadata, struct pair *p,
			 int want, int opcode)
{
	struct ibv_wc wc;

	ASSERT_EQ(0, verbs_wait_wc(p->a.cq, &wc)) TH_LOG("a got no completion");
	EXPECT_EQ(want, wc.status) TH_LOG("a's completion: %s", ibv_wc_status_str(wc.status));
	EXPECT_EQ(verbs_qpn(&p->a), wc.qp_num);
	if (wc.status == IBV_WC_SUCCESS)
		EXPECT_EQ(opcode, wc.opcode);
}

/*
 * a's WQE (@len bytes, @flags) is refused with @want and nothing of it
 * reached the adapter (no WQE, doorbell or BAR2 write) or either CQ.
 */
static void expect_refused(struct __test_metadata *_metadata, struct pair *p,
			   int len, uint32_t flags, int want)
{
	struct model_posts before, after;
	int err;

	model_posts(&p->m, &before);
	err = post(p, len, flags);
	model_posts(&p->m, &after);
	EXPECT_EQ(want, err) TH_LOG("errno %d (%s), want %d (%s)", err, strerror(err), want,
				    strerror(want));
	EXPECT_EQ(0, memcmp(&before, &after, sizeof(after)))
		TH_LOG("the adapter saw %llu WQE(s), %llu doorbell(s), %llu BAR2 write(s)",
		       (unsigned long long)(after.wqe_bf + after.wqe_dma - before.wqe_bf -
					    before.wqe_dma),
		       (unsigned long long)(after.doorbells - before.doorbells),
		       (unsigned long long)(after.bar2_writes - before.bar2_writes));
	EXPECT_TRUE(verbs_cq_quiet(p->a.cq));
	EXPECT_TRUE(verbs_cq_quiet(p->b.cq));
}

/*
 * a's WQE (@len bytes) names b's memory in a way b's side refuses: the
 * kernel posts it, the adapter counts one remote access fault (declared
 * here, as it happened), a gets REM_ACCESS_ERR. No local fault.
 */
static void expect_remote_fault(struct __test_metadata *_metadata, struct pair *p,
				int len, uint32_t flags)
{
	uint64_t remote = model_read(&p->m, MODEL_REMOTE_ACCESS_FAULTS);
	uint64_t local = model_read(&p->m, MODEL_LOCAL_PROT_FAULTS);
	uint64_t faults;

	ASSERT_EQ(0, post(p, len, flags));
	expect_a_cqe(_metadata, p, IBV_WC_REM_ACCESS_ERR, 0);
	faults = model_read(&p->m, MODEL_REMOTE_ACCESS_FAULTS) - remote;
	for (uint64_t i = 0; i < faults; i++)
		declare_fault("remote");
	EXPECT_EQ(1, faults) TH_LOG("remote access faults");
	EXPECT_EQ(local, model_read(&p->m, MODEL_LOCAL_PROT_FAULTS));
	EXPECT_TRUE(verbs_cq_quiet(p->b.cq)) TH_LOG("b saw the refused access");
}

/* b received exactly @want (@len bytes, in its region at @at) from a. */
static void expect_received(struct __test_metadata *_metadata, struct pair *p,
			    const uint8_t *at, const uint8_t *want, uint32_t len)
{
	struct ibv_wc wc;
	long diff;

	expect_a_cqe(_metadata, p, IBV_WC_SUCCESS, IBV_WC_SEND);
	ASSERT_EQ(0, verbs_wait_wc(p->b.cq, &wc)) TH_LOG("b received nothing");
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
	EXPECT_EQ(IBV_WC_RECV, wc.opcode);
	EXPECT_EQ(len, wc.byte_len);
	EXPECT_EQ(verbs_qpn(&p->b), wc.qp_num);
	diff = first_difference(at, want, len);
	EXPECT_EQ(-1, diff) TH_LOG("received byte %ld differs", diff);
}

/*
 * a RDMA-writes the WQE in p->wqe (@len bytes, @flags), @n bytes to @dst
 * in b's memory: they land exactly, the bytes around them stay, and the
 * analyzer counts one RDMA write of @n bytes.
 */
static void expect_landed(struct __test_metadata *_metadata, struct pair *p,
			  int len, uint32_t flags, uint8_t *dst, const uint8_t *want, uint32_t n)
{
	uint64_t writes = model_read(&p->m, MODEL_RDMA_WRITES);
	uint64_t bytes = model_read(&p->m, MODEL_RDMA_WRITE_BYTES);
	long diff;

	ASSERT_EQ(0, dst[-1]);
	ASSERT_EQ(0, dst[n]);
	ASSERT_EQ(0, post(p, len, flags));
	expect_a_cqe(_metadata, p, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	EXPECT_EQ(writes + 1, model_read(&p->m, MODEL_RDMA_WRITES));
	EXPECT_EQ(bytes + n, model_read(&p->m, MODEL_RDMA_WRITE_BYTES));
	diff = first_difference(dst, want, n);
	EXPECT_EQ(-1, diff) TH_LOG("byte %ld of %u differs", diff, n);
	EXPECT_EQ(0, dst[-1]) TH_LOG("the byte before the target was written");
	EXPECT_EQ(0, dst[n]) TH_LOG("the byte after the target was written");
}

/* An inline RDMA write of @n bytes to @dst (rkey @rkey) in p->wqe: its length. */
static int inline_write(struct pair *p, int n, uint8_t *dst, uint32_t rkey)
{
	return build_rdma_write(p->wqe, n, 1, (uintptr_t)dst, rkey);
}

/* An RDMA read from @src (rkey @rkey) into @sg in p->wqe: its length. */
static int read_into(struct pair *p, const struct sge *sg, uint8_t *src, uint32_t rkey)
{
	return build_gather(p->wqe, OP_RDMA_READ, (uintptr_t)src, rkey, sg, 1);
}

/* b's region at @src readable by a (REMOTE_READ only), holding a pattern. */
static struct ibv_mr *readable_source(struct pair *p, uint8_t *src, int n)
{
	for (int i = 0; i < n; i++)
		src[i] = (uint8_t)(i * 13 + 5);
	return ibv_reg_mr(p->b.pd, p->bbuf, BUF_BYTES, IBV_ACCESS_REMOTE_READ);
}

TEST_F(pair, gathered_send_lands_byte_exact_in_the_receivers_region)
{
	struct pair *p = &self->p;

	/* 700 bytes across a page boundary of the region */
	struct sge sg = { (uintptr_t)p->abuf + PAGE - 300, 700, p->amr->lkey };
	uint64_t recvs = model_read(&p->m, MODEL_RECV_WQES);
	uint64_t bytes = model_read(&p->m, MODEL_PAYLOAD_BYTES);

	ASSERT_EQ(0, b_recv(p, p->bbuf + 5, 1000));
	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, p->bbuf + 5, p->abuf + PAGE - 300, 700);
	EXPECT_EQ(recvs + 1, model_read(&p->m, MODEL_RECV_WQES));
	EXPECT_EQ(bytes + 700, model_read(&p->m, MODEL_PAYLOAD_BYTES));
	EXPECT_EQ(0, p->bbuf[4]);
	EXPECT_EQ(0, p->bbuf[705]);
}

TEST_F(pair, send_gathered_from_two_regions_arrives_in_segment_order)
{
	struct pair *p = &self->p;
	struct ibv_mr *second = ibv_reg_mr(p->a.pd, p->abuf + 9 * PAGE, PAGE, 0);
	struct sge sg[2];
	uint8_t want[300];

	ASSERT_NE(NULL, second);
	sg[0] = (struct sge){ (uintptr_t)p->abuf + 9 * PAGE + 50, 100, second->lkey };
	sg[1] = (struct sge){ (uintptr_t)p->abuf + 3, 200, p->amr->lkey };
	memcpy(want, p->abuf + 9 * PAGE + 50, 100);
	memcpy(want + 100, p->abuf + 3, 200);
	ASSERT_EQ(0, b_recv(p, p->bbuf, 300));
	ASSERT_EQ(0, send_gather(p, sg, 2));
	expect_received(_metadata, p, p->bbuf, want, 300);
}

TEST_F(pair, rdma_write_lands_exactly_in_the_peers_region)
{
	struct pair *p = &self->p;
	uint8_t want[100];
	int len = build_rdma_write(p->wqe, 100, 0x40, (uintptr_t)p->bbuf + 1000,
				   p->bmr->rkey);

	rdma_write_pattern(want, 100, 0x40);
	expect_landed(_metadata, p, len, 0, p->bbuf + 1000, want, 100);
}

TEST_F(pair, rdma_write_by_doorbell_lands_exactly_in_the_peers_region)
{
	struct pair *p = &self->p;
	uint8_t want[100];
	int len = build_rdma_write(p->wqe, 100, 0x41, (uintptr_t)p->bbuf + 1000,
				   p->bmr->rkey);

	rdma_write_pattern(want, 100, 0x41);
	expect_landed(_metadata, p, len, MLX4_BF_POST_F_FORCE_DOORBELL, p->bbuf + 1000,
		      want, 100);
}

TEST_F(pair, gathered_rdma_write_lands_exactly)
{
	struct pair *p = &self->p;

	/* 3000 bytes, across a page boundary at both ends */
	struct sge sg = { (uintptr_t)p->abuf + 2 * PAGE - 1000, 3000, p->amr->lkey };
	int len = build_gather(p->wqe, OP_RDMA_WRITE, (uintptr_t)p->bbuf + 5 * PAGE - 7,
			       p->bmr->rkey, &sg, 1);

	expect_landed(_metadata, p, len, 0, p->bbuf + 5 * PAGE - 7,
		      p->abuf + 2 * PAGE - 1000, 3000);
}

TEST_F(pair, rdma_write_gathered_from_two_regions_lands_in_segment_order)
{
	struct pair *p = &self->p;
	struct ibv_mr *second = ibv_reg_mr(p->a.pd, p->abuf + 9 * PAGE, PAGE, 0);
	struct sge sg[2];
	uint8_t want[1300];
	int len;

	ASSERT_NE(NULL, second);
	sg[0] = (struct sge){ (uintptr_t)p->abuf + 9 * PAGE + 50, 1000, second->lkey };
	sg[1] = (struct sge){ (uintptr_t)p->abuf + 3, 300, p->amr->lkey };
	memcpy(want, p->abuf + 9 * PAGE + 50, 1000);
	memcpy(want + 1000, p->abuf + 3, 300);
	len = build_gather(p->wqe, OP_RDMA_WRITE, (uintptr_t)p->bbuf + 64,
			   p->bmr->rkey, sg, 2);
	expect_landed(_metadata, p, len, 0, p->bbuf + 64, want, 1300);
}

TEST_F(pair, rdma_write_ending_at_the_peers_last_byte_lands)
{
	struct pair *p = &self->p;
	uint8_t want[100], *dst = p->bbuf + BUF_BYTES - 100;
	int len = build_rdma_write(p->wqe, 100, 0x42, (uintptr_t)dst, p->bmr->rkey);
	uint64_t writes = model_read(&p->m, MODEL_RDMA_WRITES);

	rdma_write_pattern(want, 100, 0x42);
	ASSERT_EQ(0, post(p, len, 0));
	expect_a_cqe(_metadata, p, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	EXPECT_EQ(writes + 1, model_read(&p->m, MODEL_RDMA_WRITES));
	EXPECT_EQ(0, memcmp(dst, want, 100));
}

TEST_F(pair, rdma_write_imm_gives_the_peer_a_receive_cqe)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf + 10, 48, p->amr->lkey };
	uint64_t writes = model_read(&p->m, MODEL_RDMA_WRITES);
	uint64_t bytes = model_read(&p->m, MODEL_RDMA_WRITE_BYTES);
	struct ibv_wc wc;
	int len;

	/* the receive is consumed, its buffer not touched */
	ASSERT_EQ(0, b_recv(p, p->bbuf + 2 * PAGE, 64));
	len = build_gather(p->wqe, OP_RDMA_WRITE_IMM, (uintptr_t)p->bbuf + 64,
			   p->bmr->rkey, &sg, 1);
	put_be32(p->wqe + 12, 0xfeedf00d);
	ASSERT_EQ(0, post(p, len, 0));
	expect_a_cqe(_metadata, p, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	ASSERT_EQ(0, verbs_wait_wc(p->b.cq, &wc)) TH_LOG("b got no completion");
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
	EXPECT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
	EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
	EXPECT_EQ(0xfeedf00d, ntohl(wc.imm_data)) TH_LOG("immediate %#x", ntohl(wc.imm_data));
	EXPECT_EQ(48, wc.byte_len);
	EXPECT_EQ(verbs_qpn(&p->b), wc.qp_num);
	/* the receive CQE comes after the data: it is there already */
	EXPECT_EQ(0, memcmp(p->bbuf + 64, p->abuf + 10, 48));
	EXPECT_EQ(0, p->bbuf[2 * PAGE]);
	EXPECT_EQ(writes + 1, model_read(&p->m, MODEL_RDMA_WRITES));
	EXPECT_EQ(bytes + 48, model_read(&p->m, MODEL_RDMA_WRITE_BYTES));
}

TEST_F(pair, rdma_read_lands_exactly_in_the_requesters_region)
{
	struct pair *p = &self->p;

	/* 3000 bytes, across page boundaries at both ends, on both sides */
	uint8_t *src = p->bbuf + 3 * PAGE - 500, *dst = p->abuf + 6 * PAGE - 7;
	struct sge sg = { (uintptr_t)dst, 3000, p->amr->lkey };
	struct ibv_mr *readable = readable_source(p, src, 3000);
	uint64_t reads, bytes;
	int len;

	if (model_version(&p->m) < 8)
		SKIP(return, NO_ANALYZER " (diag version 8: RDMA reads)");
	ASSERT_NE(NULL, readable);
	memset(dst - 1, 0, 3002);
	len = build_gather(p->wqe, OP_RDMA_READ, (uintptr_t)src, readable->rkey, &sg, 1);
	reads = model_read(&p->m, MODEL_RDMA_READS);
	bytes = model_read(&p->m, MODEL_RDMA_READ_BYTES);
	ASSERT_EQ(0, post(p, len, 0));
	expect_a_cqe(_metadata, p, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	EXPECT_EQ(reads + 1, model_read(&p->m, MODEL_RDMA_READS));
	EXPECT_EQ(bytes + 3000, model_read(&p->m, MODEL_RDMA_READ_BYTES));
	EXPECT_EQ(-1, first_difference(dst, src, 3000))
		TH_LOG("byte %ld differs", first_difference(dst, src, 3000));
	EXPECT_EQ(0, dst[-1]) TH_LOG("the byte before the target was written");
	EXPECT_EQ(0, dst[3000]) TH_LOG("the byte after the target was written");
}

/* The kernel's refusals: what a WQE gathers, checked on QP_POST. */

TEST_F(pair, unregistered_address_is_eacces)
{
	struct pair *p = &self->p;
	struct sge sg = { 0xffff888000000000ull, 64, 0x1234 };

	expect_refused(_metadata, p, build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1), 0,
		       EACCES);
}

TEST_F(pair, reserved_lkey_is_eacces)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf, 64, RESERVED_LKEY };

	expect_refused(_metadata, p, build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1), 0,
		       EACCES);
}

TEST_F(pair, region_of_another_pd_is_eacces)
{
	struct pair *p = &self->p;
	struct ibv_pd *other = ibv_alloc_pd(p->a.ctx);
	struct ibv_mr *mr = other ? ibv_reg_mr(other, p->abuf, PAGE, 0) : NULL;
	struct sge sg = { (uintptr_t)p->abuf, 64, 0 };

	ASSERT_NE(NULL, mr);
	sg.lkey = mr->lkey;
	expect_refused(_metadata, p, build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1), 0,
		       EACCES);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(other);
}

TEST_F(pair, another_contexts_lkey_is_eacces)
{
	struct pair *p = &self->p;

	/* b's region, in the same process: another context's all the same */
	struct sge sg = { (uintptr_t)p->bbuf, 64, p->bmr->lkey };

	expect_refused(_metadata, p, build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1), 0,
		       EACCES);
}

TEST_F(pair, stale_lkey_after_dereg_is_eacces)
{
	struct pair *p = &self->p;
	struct ibv_mr *gone = ibv_reg_mr(p->a.pd, p->abuf, PAGE, 0);
	struct sge sg = { (uintptr_t)p->abuf, 64, 0 };

	ASSERT_NE(NULL, gone);
	sg.lkey = gone->lkey;
	ASSERT_EQ(0, ibv_dereg_mr(gone));
	expect_refused(_metadata, p, build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1), 0,
		       EACCES);
}

/* A region of a over 3000 bytes from abuf + 100, not page-aligned at either end. */
#define PART_OFF	100
#define PART_LEN	3000

static uint32_t part_lkey(struct __test_metadata *_metadata, struct pair *p)
{
	struct ibv_mr *part = ibv_reg_mr(p->a.pd, p->abuf + PART_OFF, PART_LEN, 0);

	EXPECT_NE(NULL, part);
	return part ? part->lkey : 0;
}

TEST_F(pair, gather_one_byte_past_the_regions_end_is_eacces)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf + PART_OFF + PART_LEN - 64, 65,
			  part_lkey(_metadata, p) };

	expect_refused(_metadata, p, build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1), 0,
		       EACCES);
}

TEST_F(pair, gather_one_byte_before_the_region_is_eacces)
{
	struct pair *p = &self->p;

	/* in the region's first page, one byte before the region */
	struct sge sg = { (uintptr_t)p->abuf + PART_OFF - 1, 10, part_lkey(_metadata, p) };

	expect_refused(_metadata, p, build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1), 0,
		       EACCES);
}

TEST_F(pair, gather_of_the_regions_first_and_last_bytes_is_accepted)
{
	struct pair *p = &self->p;
	uint32_t lkey = part_lkey(_metadata, p);
	struct sge sg[2] = {
		{ (uintptr_t)p->abuf + PART_OFF, 64, lkey },
		{ (uintptr_t)p->abuf + PART_OFF + PART_LEN - 64, 64, lkey },
	};
	uint8_t want[128];

	memcpy(want, p->abuf + PART_OFF, 64);
	memcpy(want + 64, p->abuf + PART_OFF + PART_LEN - 64, 64);
	ASSERT_EQ(0, b_recv(p, p->bbuf, 128));
	ASSERT_EQ(0, send_gather(p, sg, 2));
	expect_received(_metadata, p, p->bbuf, want, 128);
}

TEST_F(pair, gather_whose_second_segment_is_bad_is_eacces)
{
	struct pair *p = &self->p;
	struct sge sg[2] = {
		{ (uintptr_t)p->abuf, 64, p->amr->lkey },
		{ (uintptr_t)p->abuf + BUF_BYTES - 10, 11, p->amr->lkey },
	};
	int len;

	expect_refused(_metadata, p, build_gather(p->wqe, OP_SEND, 0, 0, sg, 2), 0, EACCES);
	/* the same for an RDMA write, its remote address good */
	len = build_gather(p->wqe, OP_RDMA_WRITE, (uintptr_t)p->bbuf, p->bmr->rkey, sg, 2);
	expect_refused(_metadata, p, len, 0, EACCES);
	EXPECT_EQ(0, p->bbuf[0]);
}

/* An RDMA READ's data lands locally: its segments need LOCAL_WRITE. */
TEST_F(pair, rdma_read_into_a_region_without_local_write_is_eacces)
{
	struct pair *p = &self->p;
	struct ibv_mr *readable = readable_source(p, p->bbuf, 64);
	struct ibv_mr *read_only = ibv_reg_mr(p->a.pd, p->abuf, BUF_BYTES, 0);
	struct sge sg;

	ASSERT_NE(NULL, readable);
	ASSERT_NE(NULL, read_only);
	sg = (struct sge){ (uintptr_t)p->abuf + 64, 64, read_only->lkey };
	expect_refused(_metadata, p, read_into(p, &sg, p->bbuf, readable->rkey), 0, EACCES);
	/* the same region gathers for a SEND: local read is always allowed */
	ASSERT_EQ(0, b_recv(p, p->bbuf + PAGE, 64));
	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, p->bbuf + PAGE, p->abuf + 64, 64);
}

/* The queue's rule, not a region's: a READ names where its data lands. */
TEST_F(pair, rdma_read_with_inline_data_is_einval)
{
	struct pair *p = &self->p;
	struct ibv_mr *readable = readable_source(p, p->bbuf, 16);
	int len;

	ASSERT_NE(NULL, readable);
	len = inline_write(p, 16, p->bbuf, readable->rkey);
	put_be32(p->wqe, OP_RDMA_READ);
	expect_refused(_metadata, p, len, 0, EINVAL);
}

/* The responder's refusals: what an RDMA names remotely, the adapter's. */

TEST_F(pair, rkey_without_remote_write_is_a_remote_access_error)
{
	struct pair *p = &self->p;
	struct ibv_mr *local = ibv_reg_mr(p->b.pd, p->bbuf, BUF_BYTES, LOCAL_WRITE);

	ASSERT_NE(NULL, local);
	expect_remote_fault(_metadata, p, inline_write(p, 40, p->bbuf + 8, local->rkey), 0);
	EXPECT_EQ(0, p->bbuf[8]);
}

/*
 * a's own remote-writable region: a's QP is connected to b, and the
 * responder checks the key against its own PD, not the requester's.
 */
TEST_F(pair, requesters_own_rkey_is_a_remote_access_error)
{
	struct pair *p = &self->p;
	struct ibv_mr *own = ibv_reg_mr(p->a.pd, p->bbuf, BUF_BYTES, RDMA_ACCESS);

	ASSERT_NE(NULL, own);
	expect_remote_fault(_metadata, p, inline_write(p, 40, p->bbuf + 8, own->rkey), 0);
	EXPECT_EQ(0, p->bbuf[8]);
}

/* A third context's region, over b's very pages: not the peer's PD. */
TEST_F(pair, rkey_of_a_context_that_is_not_the_peer_is_a_remote_access_error)
{
	struct pair *p = &self->p;
	struct ibv_context *c = verbs_open_device();
	struct ibv_pd *pd = c ? ibv_alloc_pd(c) : NULL;
	struct ibv_mr *third = pd ? ibv_reg_mr(pd, p->bbuf, BUF_BYTES, RDMA_ACCESS) : NULL;

	ASSERT_NE(NULL, third);
	expect_remote_fault(_metadata, p, inline_write(p, 40, p->bbuf + 8, third->rkey), 0);
	EXPECT_EQ(0, p->bbuf[8]);
	ibv_close_device(c);
}

TEST_F(pair, stale_rkey_after_the_peer_deregisters_is_a_remote_access_error)
{
	struct pair *p = &self->p;
	struct ibv_mr *gone = ibv_reg_mr(p->b.pd, p->bbuf, PAGE, RDMA_ACCESS);
	uint32_t rkey;

	ASSERT_NE(NULL, gone);
	rkey = gone->rkey;
	ASSERT_EQ(0, ibv_dereg_mr(gone));
	expect_remote_fault(_metadata, p, inline_write(p, 16, p->bbuf, rkey), 0);
	EXPECT_EQ(0, p->bbuf[0]);
}

TEST_F(pair, rdma_write_one_byte_past_the_peers_end_is_a_remote_access_error)
{
	struct pair *p = &self->p;
	int len = inline_write(p, 100, p->bbuf + BUF_BYTES - 99, p->bmr->rkey);

	expect_remote_fault(_metadata, p, len, 0);
	EXPECT_EQ(0, p->bbuf[BUF_BYTES - 99]);
}

TEST_F(pair, rdma_write_one_byte_before_the_peers_region_is_a_remote_access_error)
{
	struct pair *p = &self->p;
	struct ibv_mr *part = ibv_reg_mr(p->b.pd, p->bbuf + 200, 1000, RDMA_ACCESS);

	ASSERT_NE(NULL, part);
	expect_remote_fault(_metadata, p, inline_write(p, 16, p->bbuf + 199, part->rkey), 0);
	EXPECT_EQ(0, p->bbuf[200]);
}

TEST_F(pair, rdma_read_of_a_region_without_remote_read_is_a_remote_access_error)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf, 64, p->amr->lkey };

	/* b's region takes remote writes, not reads */
	expect_remote_fault(_metadata, p, read_into(p, &sg, p->bbuf, p->bmr->rkey), 0);
}

TEST_F(pair, rdma_read_one_byte_past_the_peers_end_is_a_remote_access_error)
{
	struct pair *p = &self->p;
	struct ibv_mr *readable = readable_source(p, p->bbuf, 16);
	struct sge sg = { (uintptr_t)p->abuf, 100, p->amr->lkey };

	ASSERT_NE(NULL, readable);
	expect_remote_fault(_metadata, p, read_into(p, &sg, p->bbuf + BUF_BYTES - 99,
						    readable->rkey), 0);
}

/*
 * ibv_dereg_mr() of a region that WQEs still outstanding gather from: the
 * provider neither waits nor refuses (no EBUSY, as the misc device had);
 * it takes the MPT out of the adapter (HW2SW_MPT) and unpins the pages.
 * The adapter executes WQEs in the order their doorbells came, and the
 * command after them: here every one ran before the MPT went, so all
 * complete and land, and no local fault. (What a real adapter does with a
 * WQE it had not yet read is the application's problem: a local
 * protection error.) The stale lkey is refused from then on.
 */
TEST_F(pair, dereg_with_sends_outstanding_succeeds_at_once)
{
	struct pair *p = &self->p;
	struct ibv_mr *src = ibv_reg_mr(p->a.pd, p->abuf, BUF_BYTES, 0);
	struct sge sg = { (uintptr_t)p->abuf, BUF_BYTES, 0 };
	uint64_t writes = model_read(&p->m, MODEL_RDMA_WRITES);
	uint64_t local = model_read(&p->m, MODEL_LOCAL_PROT_FAULTS);
	long pinned = vm_pinned_kb();
	int len, posts = VERBS_SQ_WRS / 2, posted = 0;

	ASSERT_NE(NULL, src);
	sg.lkey = src->lkey;
	len = build_gather(p->wqe, OP_RDMA_WRITE, (uintptr_t)p->bbuf, p->bmr->rkey,
			   &sg, 1);
	/* RDMA writes of 64 KiB each, none of their completions polled */
	while (posted < posts && !post(p, len, 0))
		posted++;
	ASSERT_EQ(posts, posted);
	EXPECT_EQ(0, ibv_dereg_mr(src));
	EXPECT_EQ(pinned - BUF_BYTES / 1024, vm_pinned_kb()) TH_LOG("VmPin after the dereg");
	for (int i = 0; i < posts; i++)
		expect_a_cqe(_metadata, p, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	EXPECT_EQ(writes + posts, model_read(&p->m, MODEL_RDMA_WRITES));
	EXPECT_EQ(local, model_read(&p->m, MODEL_LOCAL_PROT_FAULTS));
	EXPECT_EQ(0, memcmp(p->bbuf, p->abuf, BUF_BYTES));
	expect_refused(_metadata, p, len, 0, EACCES);
}

/*
 * fork() with a region registered: the RDMA core pins with FOLL_LONGTERM,
 * so the child gets copies of the pinned pages and the parent keeps its
 * own (no ibv_fork_init() needed). The child writes its copy; the parent
 * writes its pages after the fork, and what the adapter gathers for it is
 * what the parent wrote.
 */
TEST_F(pair, fork_keeps_the_parents_region_and_its_pages)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf, 256, p->amr->lkey };
	long pinned = vm_pinned_kb();
	int go[2], done[2], status;
	uint8_t want[256];
	char c = 0;
	pid_t pid;

	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(done));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* the child writes its copy of the pages, then exits */
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		memset(p->abuf, 0xee, BUF_BYTES);
		_exit(write(done[1], &c, 1) == 1 ? 0 : 2);
	}
	/* the parent writes its pages while the child has its own */
	for (int i = 0; i < 256; i++)
		want[i] = (uint8_t)(0x31 + 5 * i);
	memcpy(p->abuf, want, 256);
	ASSERT_EQ(0, b_recv(p, p->bbuf, 256));
	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, p->bbuf, want, 256);
	ASSERT_EQ(1, write(go[1], &c, 1));
	ASSERT_EQ(1, read(done[0], &c, 1));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* what the child wrote is not what the adapter reads for the parent */
	memset(p->bbuf, 0, 256);
	ASSERT_EQ(0, b_recv(p, p->bbuf, 256));
	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, p->bbuf, want, 256);
	EXPECT_EQ(pinned, vm_pinned_kb()) TH_LOG("the parent's VmPin");
}

/*
 * libmlx4's own posts (ibv_post_send(): its stores to its BlueFlame page
 * or its doorbell, no call of the kernel) are checked by the adapter
 * alone: what the kernel refuses on QP_POST, the adapter must refuse on
 * them, as a local protection error that writes nothing. @sge is the
 * WQE's one gather or landing; the fault is declared as it happens.
 */
static void expect_libmlx4_local_fault(struct __test_metadata *_metadata, struct pair *p,
				       enum ibv_wr_opcode opcode, struct ibv_sge *sge,
				       uint8_t *remote, uint32_t rkey)
{
	struct ibv_send_wr wr = {
		.opcode = opcode,
		.send_flags = IBV_SEND_SIGNALED,
		.sg_list = sge,
		.num_sge = 1,
		.wr.rdma = { .remote_addr = (uintptr_t)remote, .rkey = rkey },
	}, *bad;
	uint64_t local = model_read(&p->m, MODEL_LOCAL_PROT_FAULTS);
	uint64_t writes = model_read(&p->m, MODEL_RDMA_WRITES);
	uint64_t faults;

	ASSERT_EQ(0, ibv_post_send(p->a.qp, &wr, &bad));
	expect_a_cqe(_metadata, p, IBV_WC_LOC_PROT_ERR, 0);
	faults = model_read(&p->m, MODEL_LOCAL_PROT_FAULTS) - local;
	for (uint64_t i = 0; i < faults; i++)
		declare_fault("local");
	EXPECT_EQ(1, faults) TH_LOG("local protection faults");
	EXPECT_EQ(writes, model_read(&p->m, MODEL_RDMA_WRITES));
	EXPECT_TRUE(verbs_cq_quiet(p->b.cq)) TH_LOG("b saw the refused WQE");
}

/*
 * The adapter's reserved lkey reaches any memory of the host: a user QP's
 * WQE that names it, which the kernel never sees, is the adapter's to
 * refuse.
 */
TEST_F(pair, libmlx4s_own_gather_with_the_reserved_lkey_is_a_local_protection_error)
{
	struct pair *p = &self->p;
	struct ibv_sge sge = { (uintptr_t)p->abuf, 64, RESERVED_LKEY };

	expect_libmlx4_local_fault(_metadata, p, IBV_WR_RDMA_WRITE, &sge, p->bbuf, p->bmr->rkey);
	EXPECT_EQ(0, p->bbuf[0]);
}

/* libmlx4's own RDMA READ into a region without LOCAL_WRITE: nothing lands. */
TEST_F(pair, libmlx4s_own_rdma_read_into_a_region_without_local_write_is_refused)
{
	struct pair *p = &self->p;
	struct ibv_mr *readable = readable_source(p, p->bbuf, 64);
	struct ibv_mr *read_only = ibv_reg_mr(p->a.pd, p->abuf, BUF_BYTES, 0);
	struct ibv_sge sge;
	uint8_t before[64];

	ASSERT_NE(NULL, readable);
	ASSERT_NE(NULL, read_only);
	memcpy(before, p->abuf + 64, 64);
	sge = (struct ibv_sge){ (uintptr_t)p->abuf + 64, 64, read_only->lkey };
	expect_libmlx4_local_fault(_metadata, p, IBV_WR_RDMA_READ, &sge, p->bbuf,
				   readable->rkey);
	EXPECT_EQ(0, memcmp(p->abuf + 64, before, 64)) TH_LOG("the read landed");
}

/* Last: the fault counters over every test before. */
FIXTURE(program) {};
FIXTURE_SETUP(program) {}
FIXTURE_TEARDOWN(program) {}

TEST_F(program, every_fault_declared)
{
	struct model m;

	if (!at_start.v4 || !analyzer_v4(&m))
		SKIP(return, NO_V4);
	EXPECT_EQ(at_start.local + declared("local") - at_start.declared_local,
		  model_read(&m, MODEL_LOCAL_PROT_FAULTS)) TH_LOG("local protection faults");
	EXPECT_EQ(at_start.remote + declared("remote") - at_start.declared_remote,
		  model_read(&m, MODEL_REMOTE_ACCESS_FAULTS)) TH_LOG("remote access faults");
	model_close(&m);
}

TEST_HARNESS_MAIN
