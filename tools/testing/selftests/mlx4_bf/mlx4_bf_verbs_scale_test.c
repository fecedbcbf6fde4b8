// SPDX-License-Identifier: GPL-2.0
/*
 * Scale on the RDMA device (mlx4_bf<N>): the QPs, CQs, PDs and regions a
 * verbs user holds come from the adapter's firmware profile, thousands of
 * each, not from slot tables of the driver's own (32 QPs, 64 CQs, 64 PDs
 * per adapter, where the 33rd QP, the 65th CQ or PD was refused with
 * ENOSPC or ENOMEM). Through unmodified libibverbs and libmlx4, and
 * QP_POST as the patched libmlx4 calls it (mlx4_bf_verbs.h), proves:
 * - SCALE_QPS RC QPs in one context, one PD, SCALE_QPS_PER_CQ of them to a
 *   CQ: each QPN its own, each QP in RTS connected to itself; each posts one
 *   inline RDMA write through QP_POST, which completes once, successfully,
 *   on that QP's CQ, and lands in the QP's own slot of the sink. The
 *   analyzer counts every QP out of RESET and every write, and after the
 *   destroys the adapter holds the QPs, CQs and MPTs it held before.
 * - SCALE_CQS CQs in one context, each CQN its own, in the adapter while
 *   they live and out of it after the destroys.
 * - SCALE_PDS PDs in one context, each with a region of its own: an MPT
 *   and a key index each, all given back.
 * - ibv_query_device() offers at least SCALE_ATTR_MIN QPs, CQs, PDs and
 *   regions (max_qp, max_cq, max_pd, max_mr).
 * - SCALE_PROCS processes holding SCALE_PROC_QPS QPs each at the same
 *   time, every QP's RDMA write completing, all given back at exit.
 * Every test destroys what it made, on its failure paths too (the
 * teardown). The analyzer's checks need the model's diagnostic block,
 * version 5 (its LIVE gauge: EQs + CQs in hardware ownership, QPs out of
 * RESET); without it (real hardware) they are left out.
 */
#include <stdarg.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "mlx4_bf_model.h"
#include "mlx4_bf_verbs.h"

/* What each test holds at once. */
#define SCALE_QPS		256
#define SCALE_QPS_PER_CQ	64
#define SCALE_CQS		256
#define SCALE_PDS		128
#define SCALE_PROCS		2
#define SCALE_PROC_QPS		128
/* The least ibv_query_device() may offer of each object. */
#define SCALE_ATTR_MIN		256
/* Entries of each CQ of the CQ test. */
#define SCALE_CQ_ENTRIES	16
/* Each QP's RDMA write: WRITE_LEN inline bytes into its own slot of the sink. */
#define WRITE_LEN		16
/* Seconds a test of SCALE_QPS QPs may take under TCG on a loaded host. */
#define SCALE_TIMEOUT		240

/* The LIVE gauge's halves. */
#define LIVE_QUEUES(v)		((uint32_t)(v))
#define LIVE_QPS(v)		((uint32_t)((v) >> 32))

/*
 * One context's QPs: @n of them on one PD, SCALE_QPS_PER_CQ to a CQ, each
 * RDMA-writing into its own WRITE_LEN bytes of one sink. Each QP is a
 * struct verbs whose context, PD and CQ are the set's (verbs_post() and
 * verbs_put_wqe() post through it); the set destroys them (qps_close()),
 * never verbs_close().
 */
struct qp_set {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq **cqs;
	int ncqs;
	uint8_t *sink;
	size_t sink_len;
	struct ibv_mr *sink_mr;
	struct verbs *qps;
	/* QPs created */
	int n;
	/* what failed, for the failure message */
	char why[192];
};

/* Says in s->why what failed (and @err's text if set); @err, or -1 if 0. */
static int why(struct qp_set *s, int err, const char *fmt, ...)
{
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(s->why, sizeof(s->why), fmt, ap);
	va_end(ap);
	if (err && len >= 0 && (size_t)len < sizeof(s->why))
		snprintf(s->why + len, sizeof(s->why) - len, ": %s", strerror(err));
	return err ? err : -1;
}

/*
 * A context with @n QPs in RTS, each connected to itself and allowed to
 * RDMA-write its own PD: 0, or an error with s->why set and what was made
 * left in @s for qps_close().
 */
static int qps_open(struct qp_set *s, int n)
{
	memset(s, 0, sizeof(*s));
	s->ncqs = (n + SCALE_QPS_PER_CQ - 1) / SCALE_QPS_PER_CQ;
	s->sink_len = ((size_t)n * WRITE_LEN + PAGE - 1) / PAGE * PAGE;
	s->ctx = verbs_open_device();
	if (!s->ctx)
		return why(s, ENODEV, "ibv_open_device");
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd)
		return why(s, errno, "ibv_alloc_pd");
	s->cqs = calloc(s->ncqs, sizeof(*s->cqs));
	s->qps = calloc(n, sizeof(*s->qps));
	s->sink = aligned_alloc(PAGE, s->sink_len);
	if (!s->cqs || !s->qps || !s->sink)
		return why(s, ENOMEM, "calloc");
	memset(s->sink, 0, s->sink_len);
	s->sink_mr = ibv_reg_mr(s->pd, s->sink, s->sink_len,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!s->sink_mr)
		return why(s, errno, "ibv_reg_mr of the sink");
	for (int i = 0; i < s->ncqs; i++) {
		s->cqs[i] = ibv_create_cq(s->ctx, 2 * SCALE_QPS_PER_CQ, NULL, NULL, 0);
		if (!s->cqs[i])
			return why(s, errno, "CQ %d of %d: ibv_create_cq", i + 1, s->ncqs);
	}
	while (s->n < n) {
		struct verbs *v = &s->qps[s->n];
		int err;

		v->ctx = s->ctx;
		v->pd = s->pd;
		v->cq = s->cqs[s->n / SCALE_QPS_PER_CQ];
		v->qp = verbs_rc_qp(s->pd, v->cq);
		if (!v->qp)
			return why(s, errno, "QP %d of %d: ibv_create_qp", s->n + 1, n);
		s->n++;
		err = verbs_qp_queue(v->qp, &v->dv);
		if (!err)
			err = verbs_connect_to_self(v->qp);
		if (err)
			return why(s, err, "QP %d of %d (QPN %#x): RESET to RTS", s->n, n,
				   verbs_qpn(v));
	}
	return 0;
}

/* Destroys what qps_open() made, all of it; 0 or the first error. */
static int qps_close(struct qp_set *s)
{
	int err = 0;

	while (s->n)
		err = first_err(err, ibv_destroy_qp(s->qps[--s->n].qp));
	if (s->sink_mr)
		err = first_err(err, ibv_dereg_mr(s->sink_mr));
	for (int i = 0; s->cqs && i < s->ncqs; i++)
		if (s->cqs[i])
			err = first_err(err, ibv_destroy_cq(s->cqs[i]));
	if (s->pd)
		err = first_err(err, ibv_dealloc_pd(s->pd));
	if (s->ctx)
		err = first_err(err, ibv_close_device(s->ctx));
	free(s->cqs);
	free(s->qps);
	free(s->sink);
	memset(s, 0, sizeof(*s));
	return err;
}

/* Two QPs of the set with one QPN: 0 if there are none, else -1 and why. */
static int qps_distinct(struct qp_set *s)
{
	for (int i = 0; i < s->n; i++)
		for (int j = 0; j < i; j++)
			if (verbs_qpn(&s->qps[i]) == verbs_qpn(&s->qps[j]))
				return why(s, 0, "QPs %d and %d both have QPN %#x", j + 1, i + 1,
					   verbs_qpn(&s->qps[i]));
	return 0;
}

/* The QP of the set with QPN @qpn, or -1. */
static int qp_index(const struct qp_set *s, uint32_t qpn)
{
	for (int i = 0; i < s->n; i++)
		if (verbs_qpn(&s->qps[i]) == qpn)
			return i;
	return -1;
}

/*
 * Every QP's completion on @c, CQ number @c of the set: @want of them, one
 * for each of its own QPs, each successful and an RDMA write; nothing after
 * them. @done counts them by QP. 0, or -1 and why.
 */
static int cq_completions(struct qp_set *s, int c, int want, int *done)
{
	struct ibv_wc wc;

	for (int k = 0; k < want; k++) {
		int i;

		if (verbs_wait_wc(s->cqs[c], &wc))
			return why(s, 0, "CQ %d: completion %d of %d never came", c + 1, k + 1,
				   want);
		i = qp_index(s, wc.qp_num);
		if (i < 0 || i / SCALE_QPS_PER_CQ != c)
			return why(s, 0, "CQ %d: a completion of QPN %#x, none of its QPs'", c + 1,
				   wc.qp_num);
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RDMA_WRITE)
			return why(s, 0, "QP %d (QPN %#x): %s, opcode %d", i + 1, wc.qp_num,
				   ibv_wc_status_str(wc.status), wc.opcode);
		done[i]++;
	}
	if (!verbs_cq_quiet(s->cqs[c]))
		return why(s, 0, "CQ %d: a completion more than its %d QPs' writes", c + 1, want);
	return 0;
}

/*
 * Each QP posts one RDMA write of WRITE_LEN inline bytes (pattern: its
 * index) to its own slot of the sink through QP_POST, all of them before
 * any completion is polled; then each completes once, successfully, on its
 * own CQ, and each slot holds its QP's bytes. 0, or an error and why.
 */
static int qps_write_each(struct qp_set *s)
{
	uint8_t wqe[MAX_WQE + 64], want[WRITE_LEN];
	int *done = calloc(s->n, sizeof(*done));
	int err = done ? 0 : why(s, ENOMEM, "calloc");

	for (int i = 0; i < s->n && !err; i++) {
		struct verbs *v = &s->qps[i];
		int len = build_rdma_write(wqe, WRITE_LEN, (uint8_t)i,
					   (uintptr_t)(s->sink + i * WRITE_LEN), s->sink_mr->rkey);

		err = verbs_send_wqe(v, wqe, len);
		if (err)
			err = why(s, err, "QP %d (QPN %#x): QP_POST", i + 1, verbs_qpn(v));
	}
	for (int c = 0; c < s->ncqs && !err; c++) {
		int on_cq = s->n - c * SCALE_QPS_PER_CQ;

		err = cq_completions(s, c, on_cq < SCALE_QPS_PER_CQ ? on_cq : SCALE_QPS_PER_CQ,
				     done);
	}
	for (int i = 0; i < s->n && !err; i++) {
		rdma_write_pattern(want, WRITE_LEN, (uint8_t)i);
		if (done[i] != 1)
			err = why(s, 0, "QP %d (QPN %#x): %d completions", i + 1,
				  verbs_qpn(&s->qps[i]), done[i]);
		else if (memcmp(s->sink + i * WRITE_LEN, want, WRITE_LEN))
			err = why(s, 0, "QP %d (QPN %#x): its slot of the sink holds other bytes",
				  i + 1, verbs_qpn(&s->qps[i]));
	}
	free(done);
	return err;
}

/*
 * A context (set up by the test that needs it) and the objects a test
 * holds, all destroyed by the teardown if the test did not; the analyzer.
 * (Its helpers spell FIXTURE_DATA(scale) as struct _test_data_scale, so
 * checkpatch sees a type.)
 */
FIXTURE(scale)
{
	struct model m;
	/* the diagnostic block's version; 0 without one */
	uint32_t version;
	struct qp_set s;
	struct ibv_context *ctx;
	struct ibv_cq **cqs;
	struct ibv_pd **pds;
	struct ibv_mr **mrs;
	uint8_t *page;
};

FIXTURE_SETUP(scale)
{
	memset(&self->s, 0, sizeof(self->s));
	self->version = 0;
	self->ctx = NULL;
	self->cqs = NULL;
	self->pds = NULL;
	self->mrs = NULL;
	self->page = NULL;
	if (!verbs_device_present())
		SKIP(return, NO_VERBS_DEVICE);
	if (!model_open(&self->m)) {
		self->version = model_version(&self->m);
		if (self->version < 5) {
			model_close(&self->m);
			self->version = 0;
		}
	}
	if (!self->version)
		TH_LOG(NO_ANALYZER " (diag version 5): its checks are left out");
}

/* Destroys whatever a test left, regions first, then the context. */
static void objects_close(struct _test_data_scale *self)
{
	for (int i = 0; self->mrs && i < SCALE_PDS; i++)
		if (self->mrs[i])
			ibv_dereg_mr(self->mrs[i]);
	for (int i = 0; self->pds && i < SCALE_PDS; i++)
		if (self->pds[i])
			ibv_dealloc_pd(self->pds[i]);
	for (int i = 0; self->cqs && i < SCALE_CQS; i++)
		if (self->cqs[i])
			ibv_destroy_cq(self->cqs[i]);
	if (self->ctx)
		ibv_close_device(self->ctx);
	free(self->mrs);
	free(self->pds);
	free(self->cqs);
	free(self->page);
	self->ctx = NULL;
	self->mrs = NULL;
	self->pds = NULL;
	self->cqs = NULL;
	self->page = NULL;
}

FIXTURE_TEARDOWN(scale)
{
	if (self->s.ctx)
		qps_close(&self->s);
	objects_close(self);
	if (self->version)
		model_close(&self->m);
}

/* What the adapter holds: the LIVE gauge, MPTs; the RDMA writes so far. */
struct gauges {
	uint64_t live, mpts, rdma_writes;
};

static void gauges(struct _test_data_scale *self, struct gauges *g)
{
	memset(g, 0, sizeof(*g));
	if (!self->version)
		return;
	g->live = model_read(&self->m, MODEL_LIVE);
	g->mpts = model_read(&self->m, MODEL_MPTS);
	g->rdma_writes = model_read(&self->m, MODEL_RDMA_WRITES);
}

/* The adapter holds what it held at @before: every QP, CQ and MPT given back. */
static void expect_as_before(struct __test_metadata *_metadata,
			     struct _test_data_scale *self, const struct gauges *before)
{
	struct gauges now;

	if (!self->version)
		return;
	gauges(self, &now);
	EXPECT_EQ(LIVE_QPS(before->live), LIVE_QPS(now.live)) TH_LOG("QPs out of RESET");
	EXPECT_EQ(LIVE_QUEUES(before->live), LIVE_QUEUES(now.live)) TH_LOG("EQs + CQs");
	EXPECT_EQ(before->mpts, now.mpts) TH_LOG("MPTs");
}

TEST_F_TIMEOUT(scale, one_context_holds_scale_qps_each_completing_a_write, SCALE_TIMEOUT)
{
	struct qp_set *s = &self->s;
	struct gauges before, now;
	int err;

	gauges(self, &before);
	err = qps_open(s, SCALE_QPS);
	ASSERT_EQ(0, err) TH_LOG("%d QPs of %d made: %s", s->n, SCALE_QPS, s->why);
	ASSERT_EQ(0, qps_distinct(s)) TH_LOG("%s", s->why);
	if (self->version) {
		gauges(self, &now);
		EXPECT_EQ(LIVE_QPS(before.live) + SCALE_QPS, LIVE_QPS(now.live))
			TH_LOG("QPs out of RESET");
		EXPECT_EQ(LIVE_QUEUES(before.live) + s->ncqs, LIVE_QUEUES(now.live))
			TH_LOG("EQs + CQs");
	}
	ASSERT_EQ(0, qps_write_each(s)) TH_LOG("%s", s->why);
	if (self->version) {
		gauges(self, &now);
		EXPECT_EQ(before.rdma_writes + SCALE_QPS, now.rdma_writes) TH_LOG("RDMA writes");
	}
	err = qps_close(s);
	EXPECT_EQ(0, err) TH_LOG("destroying: %s", strerror(err));
	expect_as_before(_metadata, self, &before);
}

TEST_F_TIMEOUT(scale, one_context_holds_scale_cqs, SCALE_TIMEOUT)
{
	uint32_t cqns[SCALE_CQS];
	struct gauges before, now;

	gauges(self, &before);
	self->ctx = verbs_open_device();
	ASSERT_NE(NULL, self->ctx);
	self->cqs = calloc(SCALE_CQS, sizeof(*self->cqs));
	ASSERT_NE(NULL, self->cqs);
	for (int i = 0; i < SCALE_CQS; i++) {
		struct mlx4dv_cq dv;
		struct mlx4dv_obj obj = { .cq = { .in = NULL, .out = &dv } };

		self->cqs[i] = ibv_create_cq(self->ctx, SCALE_CQ_ENTRIES, NULL, NULL, 0);
		ASSERT_NE(NULL, self->cqs[i])
			TH_LOG("CQ %d of %d: %s", i + 1, SCALE_CQS, strerror(errno));
		obj.cq.in = self->cqs[i];
		ASSERT_EQ(0, mlx4dv_init_obj(&obj, MLX4DV_OBJ_CQ));
		cqns[i] = dv.cqn;
	}
	/* (braces: TH_LOG is a statement of its own after EXPECT's) */
	for (int i = 0; i < SCALE_CQS; i++) {
		for (int j = 0; j < i; j++) {
			EXPECT_NE(cqns[j], cqns[i]) TH_LOG("CQs %d and %d: CQN %#x", j + 1, i + 1,
							  cqns[i]);
		}
	}
	if (self->version) {
		gauges(self, &now);
		EXPECT_EQ(LIVE_QUEUES(before.live) + SCALE_CQS, LIVE_QUEUES(now.live))
			TH_LOG("EQs + CQs");
	}
	for (int i = 0; i < SCALE_CQS; i++) {
		EXPECT_EQ(0, ibv_destroy_cq(self->cqs[i])) TH_LOG("CQ %d", i + 1);
		self->cqs[i] = NULL;
	}
	EXPECT_EQ(0, ibv_close_device(self->ctx));
	self->ctx = NULL;
	expect_as_before(_metadata, self, &before);
}

TEST_F_TIMEOUT(scale, one_context_holds_scale_pds_each_with_a_region, SCALE_TIMEOUT)
{
	struct gauges before, now;
	long pinned_kb;

	gauges(self, &before);
	self->ctx = verbs_open_device();
	ASSERT_NE(NULL, self->ctx);
	pinned_kb = vm_pinned_kb();
	self->pds = calloc(SCALE_PDS, sizeof(*self->pds));
	self->mrs = calloc(SCALE_PDS, sizeof(*self->mrs));
	self->page = aligned_alloc(PAGE, PAGE);
	ASSERT_NE(NULL, self->pds);
	ASSERT_NE(NULL, self->mrs);
	ASSERT_NE(NULL, self->page);
	memset(self->page, 0x5a, PAGE);
	for (int i = 0; i < SCALE_PDS; i++) {
		self->pds[i] = ibv_alloc_pd(self->ctx);
		ASSERT_NE(NULL, self->pds[i])
			TH_LOG("PD %d of %d: %s", i + 1, SCALE_PDS, strerror(errno));
		self->mrs[i] = ibv_reg_mr(self->pds[i], self->page, PAGE, IBV_ACCESS_LOCAL_WRITE);
		ASSERT_NE(NULL, self->mrs[i])
			TH_LOG("region of PD %d of %d: %s", i + 1, SCALE_PDS, strerror(errno));
	}
	for (int i = 0; i < SCALE_PDS; i++) {
		EXPECT_EQ(self->pds[i], self->mrs[i]->pd);
		for (int j = 0; j < i; j++) {
			EXPECT_NE(self->mrs[j]->lkey >> 8, self->mrs[i]->lkey >> 8)
				TH_LOG("regions %d and %d: keys %#x and %#x", j + 1, i + 1,
				       self->mrs[j]->lkey, self->mrs[i]->lkey);
		}
	}
	EXPECT_EQ(pinned_kb + SCALE_PDS * PAGE / 1024, vm_pinned_kb()) TH_LOG("VmPin");
	if (self->version) {
		gauges(self, &now);
		EXPECT_EQ(before.mpts + SCALE_PDS, now.mpts) TH_LOG("MPTs");
	}
	for (int i = 0; i < SCALE_PDS; i++) {
		EXPECT_EQ(0, ibv_dereg_mr(self->mrs[i])) TH_LOG("region %d", i + 1);
		self->mrs[i] = NULL;
		EXPECT_EQ(0, ibv_dealloc_pd(self->pds[i])) TH_LOG("PD %d", i + 1);
		self->pds[i] = NULL;
	}
	EXPECT_EQ(pinned_kb, vm_pinned_kb()) TH_LOG("VmPin after the deregistrations");
	EXPECT_EQ(0, ibv_close_device(self->ctx));
	self->ctx = NULL;
	expect_as_before(_metadata, self, &before);
}

TEST_F(scale, device_attributes_offer_scale_attr_min_of_each_object)
{
	struct ibv_device_attr attr;

	self->ctx = verbs_open_device();
	ASSERT_NE(NULL, self->ctx);
	ASSERT_EQ(0, ibv_query_device(self->ctx, &attr));
	EXPECT_LE(SCALE_ATTR_MIN, attr.max_qp) TH_LOG("max_qp %d", attr.max_qp);
	EXPECT_LE(SCALE_ATTR_MIN, attr.max_cq) TH_LOG("max_cq %d", attr.max_cq);
	EXPECT_LE(SCALE_ATTR_MIN, attr.max_pd) TH_LOG("max_pd %d", attr.max_pd);
	EXPECT_LE(SCALE_ATTR_MIN, attr.max_mr) TH_LOG("max_mr %d", attr.max_mr);
}

/*
 * In a child: SCALE_PROC_QPS QPs, each completing its write; then one
 * byte on @ready (0 holding, 1 failed), and the QPs held until @go reads
 * end of file (the parent closed it, or exited). Its exit status: 0, or 1
 * after saying why.
 */
static int hold_qps(int ready, int go)
{
	struct qp_set s;
	int ret = qps_open(&s, SCALE_PROC_QPS);
	char c;

	if (!ret)
		ret = qps_distinct(&s);
	if (!ret)
		ret = qps_write_each(&s);
	if (ret)
		printf("# pid %d: %d QPs of %d made: %s\n", getpid(), s.n, SCALE_PROC_QPS, s.why);
	c = ret ? 1 : 0;
	if (write(ready, &c, 1) != 1)
		ret = 1;
	while (!ret && read(go, &c, 1) > 0)
		;
	if (qps_close(&s))
		ret = 1;
	fflush(stdout);
	return ret ? 1 : 0;
}

TEST_F_TIMEOUT(scale, processes_hold_scale_proc_qps_each_at_once, SCALE_TIMEOUT)
{
	int ready[SCALE_PROCS][2], go[SCALE_PROCS][2], holding = 0, status;
	pid_t pids[SCALE_PROCS];
	struct gauges before, now;

	gauges(self, &before);
	fflush(stdout);
	fflush(stderr);
	for (int p = 0; p < SCALE_PROCS; p++) {
		ASSERT_EQ(0, pipe(ready[p]));
		ASSERT_EQ(0, pipe(go[p]));
		pids[p] = fork();
		ASSERT_LE(0, pids[p]);
		if (!pids[p]) {
			/* the other processes' ends: each sees its own go's end alone */
			for (int q = 0; q <= p; q++) {
				close(ready[q][0]);
				close(go[q][1]);
			}
			_exit(hold_qps(ready[p][1], go[p][0]));
		}
		close(ready[p][1]);
		close(go[p][0]);
	}
	for (int p = 0; p < SCALE_PROCS; p++) {
		char c = 1;

		EXPECT_EQ(1, read(ready[p][0], &c, 1)) TH_LOG("process %d said nothing", p + 1);
		EXPECT_EQ(0, c) TH_LOG("process %d could not hold its QPs", p + 1);
		holding += !c;
	}
	if (self->version && holding == SCALE_PROCS) {
		gauges(self, &now);
		EXPECT_EQ(LIVE_QPS(before.live) + SCALE_PROCS * SCALE_PROC_QPS,
			  LIVE_QPS(now.live)) TH_LOG("QPs out of RESET, every process's at once");
		EXPECT_EQ(before.rdma_writes + SCALE_PROCS * SCALE_PROC_QPS, now.rdma_writes)
			TH_LOG("RDMA writes");
	}
	/* let go: each process destroys its QPs and exits */
	for (int p = 0; p < SCALE_PROCS; p++)
		close(go[p][1]);
	for (int p = 0; p < SCALE_PROCS; p++) {
		close(ready[p][0]);
		ASSERT_EQ(pids[p], waitpid(pids[p], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("process %d: status %#x", p + 1, status);
	}
	expect_as_before(_metadata, self, &before);
}

TEST_HARNESS_MAIN
