// SPDX-License-Identifier: GPL-2.0
/*
 * Delivery between the QPs of two verbs contexts on the RDMA device, each an
 * RC QP connected to the other: SENDs posted through QP_POST, receives
 * posted by libmlx4 (ibv_post_recv) and completed through its CQ. Proves,
 * in the receiver's memory, its CQEs and the analyzer's counters
 * (mlx4_bf_model.h): every inline size, BlueFlame and doorbell, and every
 * gathered size up to 1024 bytes lands byte-exact with its byte_len; a
 * SEND_WITH_IMM's immediate; receive buffers consumed in posting order;
 * delivery to another process; a SEND that finds no receive waits for a
 * late one (rnr_retry 7) or, with rnr_retry 0, fails; a peer that
 * names another QP and a peer that is gone complete in error for the
 * sender, and what QP_POST answers for a QP in error; a gather with the
 * reserved lkey is refused. Those failures are the peer's or the user's
 * doing, and the model reports them as error completions, not as protocol
 * errors: no test needs a MODEL_EXPECT window.
 *
 * The rules of mlx4_bf_recv_test (the misc device, /dev/mlx4_bf0) that have
 * no counterpart here, and were dropped:
 * - the WQE page (delivers_wqes_staged_in_the_wqe_page, wqe_page_rules) and
 *   the PAYLOAD attribute (payload_attribute_rules): the misc device's ways
 *   to hand a WQE or a message to the kernel. libmlx4 owns its queues in
 *   user memory; a message that is not inline is gathered from a region, as
 *   delivers_every_gathered_size_up_to_1024 does.
 * - POST_RECV's and CONNECT_QP's argument checks
 *   (post_recv_checks_its_count_and_the_queue,
 *   post_recv_refills_only_what_was_consumed, connect_checks_its_arguments)
 *   and "a failed QP refuses receives": ibv_post_recv() is libmlx4's write
 *   to its receive queue and doorbell record, no call of the kernel; the
 *   verbs commands' checks are mlx4_bf_qp_post_refusal_test's.
 * - the mmap rules (receive_side_mappings_are_read_only,
 *   mmap_refuses_offsets_outside_the_regions, mmap_before_any_qp_fails):
 *   the CQ and receive buffers are libmlx4's own memory, not mappings of
 *   the kernel's; mlx4_bf_qp_post_test checks the pages mlx4_ib maps.
 */
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "mlx4_bf_model.h"
#include "mlx4_bf_verbs.h"

/* The receives a QP has room for, each a slot of the receiver's region. */
#define RQ_DEPTH	16
#define RECV_LEN	1024
/* Slots twice the receive: what lands beyond byte_len shows in the canary. */
#define RECV_SLOT	(2 * RECV_LEN)
#define RECV_BYTES	(RQ_DEPTH * RECV_SLOT)
#define CANARY		0xa5
/* The longest gathered SEND this program sends, and BlueFlame's longest WQE. */
#define GATHER_MAX	1024
#define BF_MAX_WQE	256

/*
 * Two contexts, a sending to b, each with a region for its receives and one
 * to gather from; the analyzer. (Its helpers spell FIXTURE_DATA(recv) as
 * struct _test_data_recv, so checkpatch sees a type.)
 */
FIXTURE(recv)
{
	struct verbs a, b;
	struct model m;
	int have_model;
	uint8_t *abuf, *bbuf;
	struct ibv_mr *amr, *bmr;
	uint8_t wqe[MAX_WQE + 64];
};

/* @v's region, RECV_BYTES of canary, registered for receives and gathers. */
static struct ibv_mr *region(struct verbs *v, uint8_t **buf)
{
	*buf = aligned_alloc(PAGE, RECV_BYTES);
	if (!*buf)
		return NULL;
	memset(*buf, CANARY, RECV_BYTES);
	return ibv_reg_mr(v->pd, *buf, RECV_BYTES, IBV_ACCESS_LOCAL_WRITE);
}

FIXTURE_SETUP(recv)
{
	self->have_model = 0;
	self->a.ctx = self->b.ctx = NULL;
	self->amr = self->bmr = NULL;
	self->abuf = self->bbuf = NULL;
	if (!verbs_device_present())
		SKIP(return, NO_VERBS_DEVICE);
	if (model_open(&self->m))
		SKIP(return, NO_ANALYZER);
	self->have_model = 1;
	if (model_version(&self->m) < 3)
		SKIP(return, NO_ANALYZER " (version 3: the receive counters)");
	ASSERT_EQ(0, verbs_open_pair(&self->a, &self->b, IBV_ACCESS_REMOTE_WRITE, RQ_DEPTH, 0));
	self->amr = region(&self->a, &self->abuf);
	self->bmr = region(&self->b, &self->bbuf);
	ASSERT_NE(NULL, self->amr);
	ASSERT_NE(NULL, self->bmr);
}

FIXTURE_TEARDOWN(recv)
{
	if (self->amr)
		ibv_dereg_mr(self->amr);
	if (self->bmr)
		ibv_dereg_mr(self->bmr);
	free(self->abuf);
	free(self->bbuf);
	if (self->a.ctx)
		verbs_close(&self->a);
	if (self->b.ctx)
		verbs_close(&self->b);
	if (self->have_model)
		model_close(&self->m);
}

/* The analyzer's receive counters. */
struct recv_counts {
	uint64_t wqes, cqes, bytes, rnr, peer;
};

static void recv_counts(struct model *m, struct recv_counts *c)
{
	c->wqes = model_read(m, MODEL_RECV_WQES);
	c->cqes = model_read(m, MODEL_RECV_CQES);
	c->bytes = model_read(m, MODEL_PAYLOAD_BYTES);
	c->rnr = model_read(m, MODEL_RNR_ERRORS);
	c->peer = model_read(m, MODEL_PEER_ERRORS);
}

/* A message to deliver: its WQE, what must land, how it is posted. */
struct msg {
	int len;
	const uint8_t *want;
	int payload;
	uint32_t flags;
	/* the path QP_POST must take */
	uint32_t path;
};

/*
 * @to posts a receive into slot 0 of its region; @from posts the WQE in
 * self->wqe (@m->len bytes) through QP_POST, which takes @m->path. Both
 * complete: the send on @from's CQ, the receive on @to's with byte_len
 * @m->payload, its own QP and @from's as the source; exactly @m->want
 * landed in the slot and nothing after it; the analyzer counted one
 * receive WQE, one receive CQE and the payload's bytes.
 */
static void deliver(struct __test_metadata *_metadata, struct _test_data_recv *self,
		    struct verbs *from, struct verbs *to, const struct msg *m)
{
	uint8_t *slot = to == &self->b ? self->bbuf : self->abuf;
	struct ibv_mr *mr = to == &self->b ? self->bmr : self->amr;
	struct mlx4_bf_post_result res = {};
	struct recv_counts before, after;
	struct ibv_wc wc;
	long diff;

	memset(slot, CANARY, m->payload + 1);
	ASSERT_EQ(0, verbs_post_recv(to->qp, mr, slot, RECV_LEN, m->payload));
	recv_counts(&self->m, &before);
	ASSERT_EQ(0, verbs_post(from, verbs_put_wqe(from, self->wqe, m->len), m->len, m->flags,
				&res)) TH_LOG("%d bytes", m->payload);
	EXPECT_EQ(m->path, res.path) TH_LOG("%d bytes: WQE of %d", m->payload, m->len);
	ASSERT_EQ(0, verbs_wait_wc(from->cq, &wc)) TH_LOG("%d bytes: no send CQE", m->payload);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("%d bytes: %s", m->payload,
						      ibv_wc_status_str(wc.status));
	EXPECT_EQ(IBV_WC_SEND, wc.opcode);
	ASSERT_EQ(0, verbs_wait_wc(to->cq, &wc)) TH_LOG("%d bytes never arrived", m->payload);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("%d bytes: %s", m->payload,
						      ibv_wc_status_str(wc.status));
	EXPECT_EQ(IBV_WC_RECV, wc.opcode);
	EXPECT_EQ((uint64_t)m->payload, wc.wr_id);
	EXPECT_EQ((uint32_t)m->payload, wc.byte_len) TH_LOG("byte_len");
	EXPECT_EQ(verbs_qpn(to), wc.qp_num);
	EXPECT_EQ(verbs_qpn(from), wc.src_qp) TH_LOG("source QPN");
	EXPECT_EQ(0, wc.wc_flags & IBV_WC_WITH_IMM);
	diff = first_difference(slot, m->want, m->payload);
	EXPECT_EQ(-1, diff) TH_LOG("%d bytes: byte %ld is %#04x, expected %#04x", m->payload,
				   diff, slot[diff], m->want[diff]);
	EXPECT_EQ(CANARY, slot[m->payload]) TH_LOG("%d bytes: the byte after was written",
						   m->payload);
	recv_counts(&self->m, &after);
	EXPECT_EQ(before.wqes + 1, after.wqes) TH_LOG("%d bytes", m->payload);
	EXPECT_EQ(before.cqes + 1, after.cqes) TH_LOG("%d bytes", m->payload);
	EXPECT_EQ(before.bytes + m->payload, after.bytes) TH_LOG("%d bytes", m->payload);
}

/* An inline SEND of @payload bytes from @from to @to, with @flags. */
static void deliver_inline(struct __test_metadata *_metadata, struct _test_data_recv *self,
			   struct verbs *from, struct verbs *to, int payload, uint32_t flags)
{
	uint8_t want[MAX_INLINE_SEND];
	struct msg m = { .payload = payload, .want = want, .flags = flags };

	m.len = build_send(self->wqe, payload, (uint8_t)payload, 0, 0);
	m.path = m.len <= BF_MAX_WQE && !(flags & MLX4_BF_POST_F_FORCE_DOORBELL) ?
		 MLX4_BF_PATH_BLUEFLAME : MLX4_BF_PATH_DOORBELL;
	expected_payload(want, payload, (uint8_t)payload);
	deliver(_metadata, self, from, to, &m);
}

TEST_F(recv, delivers_every_inline_size_blueflame_or_doorbell)
{
	for (int size = 1; size <= MAX_INLINE_SEND && !_metadata->exit_code; size++)
		deliver_inline(_metadata, self, &self->a, &self->b, size, 0);
}

/* Gathered from a's region, by DMA after the doorbell. */
TEST_F(recv, delivers_every_gathered_size_up_to_1024)
{
	const uint8_t *src = self->abuf + RECV_SLOT;
	struct msg m = { .want = src, .path = MLX4_BF_PATH_DOORBELL };

	for (int i = 0; i < GATHER_MAX; i++)
		self->abuf[RECV_SLOT + i] = (uint8_t)(i * 13 + 5);
	for (int n = 1; n <= GATHER_MAX && !_metadata->exit_code; n++) {
		struct sge sg = { .addr = (uintptr_t)src, .length = n, .lkey = self->amr->lkey };

		m.payload = n;
		m.len = build_gather(self->wqe, OP_SEND, 0, 0, &sg, 1);
		deliver(_metadata, self, &self->a, &self->b, &m);
	}
}

/* b to a, inline WQEs BlueFlame would take, rung in by the doorbell. */
TEST_F(recv, delivers_through_the_forced_doorbell)
{
	for (int size = 1; size <= 240 && !_metadata->exit_code; size += 13)
		deliver_inline(_metadata, self, &self->b, &self->a, size,
			       MLX4_BF_POST_F_FORCE_DOORBELL);
}

TEST_F(recv, ping_pong_both_ways)
{
	for (int i = 0; i < 200 && !_metadata->exit_code; i++) {
		deliver_inline(_metadata, self, &self->a, &self->b, 1 + i % 64, 0);
		deliver_inline(_metadata, self, &self->b, &self->a, 1 + i % 64, 0);
	}
}

TEST_F(recv, send_imm_carries_the_immediate)
{
	int len = build_send(self->wqe, 12, 3, 1, 0xdeadbeef);
	uint8_t want[12];
	struct ibv_wc wc;

	ASSERT_EQ(0, verbs_post_recv(self->b.qp, self->bmr, self->bbuf, RECV_LEN, 7));
	ASSERT_EQ(0, verbs_send_wqe(&self->a, self->wqe, len));
	ASSERT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(self->a.cq));
	ASSERT_EQ(0, verbs_wait_wc(self->b.cq, &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
	EXPECT_EQ(IBV_WC_RECV, wc.opcode);
	EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
	/* verbs hands the immediate over in network order, as it came */
	EXPECT_EQ(0xdeadbeef, ntohl(wc.imm_data));
	EXPECT_EQ(12, wc.byte_len);
	expected_payload(want, 12, 3);
	EXPECT_EQ(0, memcmp(want, self->bbuf, 12));
}

/*
 * RQ_DEPTH receives, each into a slot of its own, then as many SENDs before
 * b polls: each took the next receive in posting order, its data in that
 * receive's slot. Twice, so the second round runs on libmlx4's receive
 * queue after it wrapped.
 */
TEST_F(recv, receive_buffers_are_consumed_in_order)
{
	for (int round = 0; round < 2; round++) {
		uint8_t want[8];
		struct ibv_wc wc;

		for (int i = 0; i < RQ_DEPTH; i++)
			ASSERT_EQ(0, verbs_post_recv(self->b.qp, self->bmr,
						     self->bbuf + i * RECV_SLOT, RECV_LEN,
						     round * RQ_DEPTH + i));
		for (int i = 0; i < RQ_DEPTH; i++) {
			int len = build_send(self->wqe, 8, round * RQ_DEPTH + i, 0, 0);

			ASSERT_EQ(0, verbs_send_wqe(&self->a, self->wqe, len));
			ASSERT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(self->a.cq)) TH_LOG("send %d", i);
		}
		for (int i = 0; i < RQ_DEPTH; i++) {
			ASSERT_EQ(0, verbs_wait_wc(self->b.cq, &wc));
			ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
			EXPECT_EQ((uint64_t)(round * RQ_DEPTH + i), wc.wr_id) TH_LOG("receive %d", i);
			expected_payload(want, 8, round * RQ_DEPTH + i);
			EXPECT_EQ(0, memcmp(want, self->bbuf + i * RECV_SLOT, 8))
				TH_LOG("round %d: slot %d holds another message", round, i);
		}
	}
}

/*
 * A child process opens a context of its own, connects its QP to a fresh
 * one of this process and posts a receive; the 64 bytes this process sends
 * arrive there intact. The child says how by its exit status: 0 intact, 1
 * not, 2 it could not set up.
 */
TEST_F(recv, delivers_to_another_process)
{
	int to_child[2], to_parent[2], status, len;
	struct verbs c;
	uint32_t qpn;
	pid_t pid;

	ASSERT_EQ(0, pipe(to_child));
	ASSERT_EQ(0, pipe(to_parent));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct verbs d;
		struct ibv_mr *mr;
		uint8_t *buf, want[64];
		struct ibv_wc wc;
		int ok;

		if (verbs_open_unconnected(&d, 1, 0) || read(to_child[0], &qpn, 4) != 4 ||
		    verbs_connect(d.qp, qpn, IBV_ACCESS_REMOTE_WRITE))
			_exit(2);
		mr = region(&d, &buf);
		if (!mr || verbs_post_recv(d.qp, mr, buf, RECV_LEN, 64) ||
		    write(to_parent[1], &d.qp->qp_num, 4) != 4)
			_exit(2);
		expected_payload(want, 64, 64);
		ok = !verbs_wait_wc(d.cq, &wc) && wc.status == IBV_WC_SUCCESS &&
		     wc.wr_id == 64 && wc.byte_len == 64 && wc.src_qp == qpn &&
		     !memcmp(want, buf, 64) && buf[64] == CANARY;
		_exit(ok ? 0 : 1);
	}
	ASSERT_EQ(0, verbs_open_unconnected(&c, 1, 0));
	ASSERT_EQ(4, write(to_child[1], &c.qp->qp_num, 4));
	ASSERT_EQ(4, read(to_parent[0], &qpn, 4)) TH_LOG("the child did not set up");
	ASSERT_EQ(0, verbs_connect(c.qp, qpn, IBV_ACCESS_REMOTE_WRITE));
	len = build_send(self->wqe, 64, 64, 0, 0);
	ASSERT_EQ(0, verbs_send_wqe(&c, self->wqe, len));
	EXPECT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(c.cq));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("the other process did not receive the 64 bytes intact (status %#x)",
		       status);
	verbs_close(&c);
}

/*
 * @v's next completion is an error with @status, for a SEND; the QP went
 * to the error state.
 */
static void expect_send_error(struct __test_metadata *_metadata, struct verbs *v,
			      enum ibv_wc_status status)
{
	struct ibv_wc wc;

	ASSERT_EQ(0, verbs_wait_wc(v->cq, &wc)) TH_LOG("no completion");
	EXPECT_EQ(status, wc.status) TH_LOG("%s, expected %s", ibv_wc_status_str(wc.status),
					    ibv_wc_status_str(status));
	EXPECT_EQ(verbs_qpn(v), wc.qp_num);
}

/*
 * A WQE of @v's QP, in the error state: QP_POST takes it (0), the adapter
 * flushes it (WR_FLUSH_ERR), and nothing reaches a receiver.
 */
static void expect_flushed(struct __test_metadata *_metadata, struct _test_data_recv *self,
			   struct verbs *v)
{
	int len = build_send(self->wqe, 4, 1, 0, 0);
	uint64_t wqes = model_read(&self->m, MODEL_RECV_WQES);

	EXPECT_EQ(0, verbs_send_wqe(v, self->wqe, len));
	expect_send_error(_metadata, v, IBV_WC_WR_FLUSH_ERR);
	EXPECT_EQ(wqes, model_read(&self->m, MODEL_RECV_WQES));
}

/*
 * b posts no receive: the adapter answers a's SEND with RNR NAKs and, as
 * verbs_connect() asks rnr_retry 7, retries it every RNR timer until b
 * posts one; then it lands and both complete.
 */
TEST_F(recv, a_send_waits_for_a_late_receive)
{
	struct recv_counts before, after;
	int len = build_send(self->wqe, 4, 1, 0, 0);
	struct ibv_wc wc;

	recv_counts(&self->m, &before);
	ASSERT_EQ(0, verbs_send_wqe(&self->a, self->wqe, len));
	EXPECT_TRUE(verbs_cq_quiet(self->a.cq)) TH_LOG("retried forever: no completion yet");
	usleep(20000);
	recv_counts(&self->m, &after);
	EXPECT_LT(before.rnr, after.rnr) TH_LOG("no RNR NAK counted");
	EXPECT_EQ(before.wqes, after.wqes);
	ASSERT_EQ(0, verbs_post_recv(self->b.qp, self->bmr, self->bbuf, RECV_LEN, 7));
	ASSERT_EQ(0, verbs_wait_wc(self->a.cq, &wc)) TH_LOG("the retry never found the receive");
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
	ASSERT_EQ(0, verbs_wait_wc(self->b.cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(7, wc.wr_id);
	EXPECT_EQ(4, wc.byte_len);
}

/* RESET to RTS with the peer @dest and @rnr_retry (verbs_connect()'s is 7). */
static int connect_rnr_retry(struct ibv_qp *qp, uint32_t dest, uint8_t rnr_retry)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
		.rnr_retry = rnr_retry, .max_rd_atomic = 1,
	};
	int err = verbs_to_init(qp, 0);

	if (!err)
		err = verbs_to_rtr(qp, dest);
	return err ? err : ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
					 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					 IBV_QP_MAX_QP_RD_ATOMIC);
}

/*
 * c sends with rnr_retry 0 to d, which posts no receive: the first RNR NAK
 * ends it, RNR_RETRY_EXC_ERR, d untouched. The state QP_POST checks is the
 * one the QP's last modify left (ib/post.rs): the adapter's move to ERR
 * does not change it, so QP_POST still takes c's WQEs, and the adapter
 * flushes them. Moved to ERR by a modify, the QP still posts (ERR is a
 * postable state) and flushes; in RESET it posts no more.
 */
TEST_F(recv, send_without_a_receive_fails_rnr_with_rnr_retry_0)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct recv_counts before, after;
	int len = build_send(self->wqe, 4, 1, 0, 0);
	struct verbs c, d;

	ASSERT_EQ(0, verbs_open_unconnected(&c, RQ_DEPTH, 0));
	ASSERT_EQ(0, verbs_open_unconnected(&d, RQ_DEPTH, 0));
	ASSERT_EQ(0, connect_rnr_retry(c.qp, d.qp->qp_num, 0));
	ASSERT_EQ(0, verbs_connect(d.qp, c.qp->qp_num, 0));
	recv_counts(&self->m, &before);
	ASSERT_EQ(0, verbs_send_wqe(&c, self->wqe, len));
	expect_send_error(_metadata, &c, IBV_WC_RNR_RETRY_EXC_ERR);
	recv_counts(&self->m, &after);
	EXPECT_EQ(before.rnr + 1, after.rnr) TH_LOG("one NAK, no retry");
	EXPECT_EQ(before.wqes, after.wqes);
	EXPECT_EQ(before.cqes, after.cqes);
	EXPECT_TRUE(verbs_cq_quiet(d.cq)) TH_LOG("d received something");

	expect_flushed(_metadata, self, &c);
	ASSERT_EQ(0, ibv_modify_qp(c.qp, &attr, IBV_QP_STATE));
	expect_flushed(_metadata, self, &c);
	attr.qp_state = IBV_QPS_RESET;
	ASSERT_EQ(0, ibv_modify_qp(c.qp, &attr, IBV_QP_STATE));
	EXPECT_EQ(EINVAL, verbs_send_wqe(&c, self->wqe, len));
	EXPECT_TRUE(verbs_cq_quiet(c.cq));
	EXPECT_TRUE(verbs_cq_quiet(d.cq));
	EXPECT_EQ(0, verbs_close(&d));
	EXPECT_EQ(0, verbs_close(&c));
}

/*
 * c is connected to itself with a receive posted; a fresh QP of a names
 * c, which does not name it back: no connection, TRANSPORT_RETRY_EXC_ERR
 * for the sender (RETRY_EXC_ERR in verbs), c receives nothing.
 */
TEST_F(recv, send_to_a_peer_that_names_another_qp_fails)
{
	struct ibv_qp *qp = verbs_rc_qp(self->a.pd, self->a.cq);
	uint64_t peer = model_read(&self->m, MODEL_PEER_ERRORS);
	struct verbs c;
	int len;

	ASSERT_NE(NULL, qp);
	ASSERT_EQ(0, verbs_open(&c));
	ASSERT_EQ(0, verbs_post_recv(c.qp, c.sink_mr, c.sink, 64, 1));
	ASSERT_EQ(0, verbs_connect(qp, verbs_qpn(&c), IBV_ACCESS_REMOTE_WRITE));
	ibv_destroy_qp(self->a.qp);
	self->a.qp = qp;
	self->a.head = 0;
	ASSERT_EQ(0, verbs_qp_queue(qp, &self->a.dv));
	len = build_send(self->wqe, 4, 1, 0, 0);
	ASSERT_EQ(0, verbs_send_wqe(&self->a, self->wqe, len));
	expect_send_error(_metadata, &self->a, IBV_WC_RETRY_EXC_ERR);
	EXPECT_EQ(peer + 1, model_read(&self->m, MODEL_PEER_ERRORS));
	EXPECT_TRUE(verbs_cq_quiet(c.cq)) TH_LOG("c received something");
	verbs_close(&c);
}

/* b's context closed (its process gone): a's SEND finds no peer. */
TEST_F(recv, send_to_a_destroyed_peer_fails)
{
	uint64_t peer = model_read(&self->m, MODEL_PEER_ERRORS);
	int len = build_send(self->wqe, 4, 1, 0, 0);

	ibv_dereg_mr(self->bmr);
	self->bmr = NULL;
	verbs_close(&self->b);
	ASSERT_EQ(0, verbs_send_wqe(&self->a, self->wqe, len));
	expect_send_error(_metadata, &self->a, IBV_WC_RETRY_EXC_ERR);
	EXPECT_EQ(peer + 1, model_read(&self->m, MODEL_PEER_ERRORS));
}

/*
 * A SEND gathering with the adapter's reserved lkey, which is no region of
 * the QP's PD: QP_POST refuses it (EACCES) before the adapter sees it; b
 * receives nothing.
 */
TEST_F(recv, gather_with_the_reserved_lkey_is_refused)
{
	struct sge sg = { .addr = (uintptr_t)self->abuf, .length = 64, .lkey = RESERVED_LKEY };
	int len = build_gather(self->wqe, OP_SEND, 0, 0, &sg, 1);
	struct model_posts before, after;

	ASSERT_EQ(0, verbs_post_recv(self->b.qp, self->bmr, self->bbuf, RECV_LEN, 1));
	model_posts(&self->m, &before);
	EXPECT_EQ(EACCES, verbs_send_wqe(&self->a, self->wqe, len));
	model_posts(&self->m, &after);
	EXPECT_EQ(0, memcmp(&before, &after, sizeof(after)));
	EXPECT_TRUE(verbs_cq_quiet(self->a.cq));
	EXPECT_TRUE(verbs_cq_quiet(self->b.cq));
}

TEST_HARNESS_MAIN
