// SPDX-License-Identifier: GPL-2.0
/*
 * The RDMA device (mlx4_bf<N>) fuzzed from several processes, each with its
 * own verbs context: the QP_POST method with valid WQEs with bits flipped,
 * random attribute IDs, lengths, flags and pointers (NULL, kernel,
 * unmapped, odd) and QP numbers (its own, another process's, none); and the
 * verbs objects churned through libibverbs and libmlx4: QPs created,
 * modified (legal and illegal transitions and attribute masks) and
 * destroyed, MRs over random ranges (read-only, unmapped, kernel) with
 * random access flags, CQs of random sizes, PDs, objects destroyed in the
 * wrong order, and the context closed with its objects alive.
 *
 * The kernel must survive (the runner checks its log for oops, BUG, WARN,
 * lockdep and KFENCE reports); every error must be an errno the uverbs core
 * or the driver returns (counted per operation and errno, printed as "#"
 * lines); afterwards a fresh context's QP must still post through QP_POST
 * and complete, and the adapter must hold no more MPTs than before (the
 * device model's gauge; without the model that check SKIPs).
 *
 * Faults: a WQE may name anything remotely, which the responder alone
 * checks, as for every RC QP of the provider; the remote access faults the
 * campaign caused are declared (mlx4_bf_invariants). A local protection
 * fault is one the kernel's gather check let through: none may happen.
 *
 * Protocol errors: the send queues are the processes' own memory, which
 * the kernel neither writes nor reads on a post. A WQE handed to the method
 * that is not the one in its QP's queue (bits flipped, or posted to a
 * churned QP of the same context) makes the adapter find nothing valid to
 * fetch after a doorbell or a BlueFlame fallback, which the model counts as
 * a protocol error; that is user space's doing, as on real hardware. The
 * campaign runs inside the model's EXPECT window, so the runner does not
 * fail the boot for it; what the kernel itself writes is checked byte by
 * byte by mlx4_bf_qp_post_test, outside any window.
 *
 * Usage: mlx4_bf_qp_post_fuzz [-n operations] [-p processes] [-s seed]
 * The seed is printed; the same seed replays the same operations.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE		/* strerrorname_np() */
#endif
#include <getopt.h>
#include <sys/wait.h>
#include <time.h>

#include "fuzz_rand.h"
#include "kselftest.h"
#include "mlx4_bf_model.h"
#include "mlx4_bf_verbs.h"

enum fuzz_op {
	FUZZ_POST,		/* a valid WQE of one of its QPs, mutated */
	FUZZ_RAW,		/* the method's call itself, random */
	FUZZ_CREATE_QP,
	FUZZ_MODIFY_QP,
	FUZZ_DESTROY_QP,
	FUZZ_REG_MR,
	FUZZ_DEREG_MR,
	FUZZ_CREATE_CQ,
	FUZZ_DESTROY_CQ,
	FUZZ_ALLOC_PD,
	FUZZ_DEALLOC_PD,
	FUZZ_REOPEN,		/* the context closed with its objects alive */
	FUZZ_OPS
};

static const char * const op_names[FUZZ_OPS] = {
	"qp_post", "qp_post_raw", "create_qp", "modify_qp", "destroy_qp", "reg_mr",
	"dereg_mr", "create_cq", "destroy_cq", "alloc_pd", "dealloc_pd", "reopen",
};

/* Of every 1000 operations; the posts are what the campaign is about. */
static const unsigned int op_weights[FUZZ_OPS] = {
	330, 150, 70, 120, 60, 80, 60, 40, 30, 30, 29, 1,
};

/*
 * The errnos the uverbs core (drivers/infiniband/core: uverbs_*.c,
 * rdma_core.c, umem.c, verbs.c) and the driver (ib/, rdma/) return to user
 * space, which libibverbs and libmlx4 also use to refuse a call before it
 * gets there; any other value (the kernel's internal ones from 512 up, a
 * failure without errno) is a bug.
 */
static const int clean_errnos[] = {
	EPERM, ENOENT, EIO, ENXIO, E2BIG, EAGAIN, ENOMEM, EACCES, EFAULT, EBUSY, EEXIST,
	ENODEV, EINVAL, ENOSPC, EOVERFLOW, EPROTONOSUPPORT, EOPNOTSUPP,
};

/* errno slots: 0 success, then the errnos, then those that are none. */
#define ERRNO_SLOTS	134
#define SLOT_NO_ERRNO	ERRNO_SLOTS
#define SLOT_BAD_ERRNO	(ERRNO_SLOTS + 1)
#define MAX_PROCS	64
#define FUZZ_QPS	6
#define FUZZ_MRS	8
#define FUZZ_CQS	4
#define FUZZ_PDS	4
#define POOL_PAGES	16
#define POOL_BYTES	(POOL_PAGES * PAGE)
/* Polls for a post's completion: one that never comes costs no more. */
#define CQE_TRIES	20000

/* Shared by the processes: their QP numbers, for the others to name, and the counts. */
struct shared {
	uint32_t qpns[MAX_PROCS][FUZZ_QPS + 1];
	unsigned long counts[FUZZ_OPS][SLOT_BAD_ERRNO + 1];
	long bad_value;
};

/*
 * One process: its context (v: a PD, a CQ, a sink and a QP connected to
 * itself, which the posts mostly take) and the objects it churns; slot 0
 * of pds and cqs is v's. A churned QP is a struct verbs of which only ctx,
 * qp, dv and head are set: verbs_put_wqe() and verbs_post() need no more.
 */
static struct {
	struct verbs v;
	struct verbs qps[FUZZ_QPS];
	struct ibv_pd *pds[FUZZ_PDS];
	struct ibv_cq *cqs[FUZZ_CQS];
	struct ibv_mr *mrs[FUZZ_MRS];
	uint8_t *pool, *readonly;
	void *unmapped;
	int index;
	struct shared *sh;
} f;

static int errno_slot(long err)
{
	if (err > 0 && err < ERRNO_SLOTS)
		return err;
	f.sh->bad_value = err;
	return SLOT_BAD_ERRNO;
}

/* Counts @op's outcome: 0, or the errno it returned. */
static int count(enum fuzz_op op, long err)
{
	__atomic_fetch_add(&f.sh->counts[op][err ? errno_slot(err) : 0], 1, __ATOMIC_RELAXED);
	return err;
}

/* Counts a call that returned an object, NULL with errno on failure. */
static void *count_obj(enum fuzz_op op, void *obj)
{
	if (obj)
		count(op, 0);
	else if (errno)
		count(op, errno);
	else
		__atomic_fetch_add(&f.sh->counts[op][SLOT_NO_ERRNO], 1, __ATOMIC_RELAXED);
	return obj;
}

/* This process's QP numbers as the others see them. */
static void publish_qpns(void)
{
	uint32_t *mine = f.sh->qpns[f.index];

	mine[FUZZ_QPS] = f.v.qp ? verbs_qpn(&f.v) : 0;
	for (int i = 0; i < FUZZ_QPS; i++)
		mine[i] = f.qps[i].qp ? f.qps[i].qp->qp_num : 0;
}

/* A context with everything in it forgotten: 0 or an errno. */
static int reopen(void)
{
	int err;

	memset(f.qps, 0, sizeof(f.qps));
	memset(f.pds, 0, sizeof(f.pds));
	memset(f.cqs, 0, sizeof(f.cqs));
	memset(f.mrs, 0, sizeof(f.mrs));
	err = verbs_open(&f.v);
	if (!err) {
		f.pds[0] = f.v.pd;
		f.cqs[0] = f.v.cq;
	}
	publish_qpns();
	return err;
}

/*
 * Closes the context with every object alive: the kernel destroys them.
 * Their user-space structures are left behind (libibverbs frees them only
 * when each is destroyed), a few KiB per reopen.
 */
static int close_alive(void)
{
	ibv_close_device(f.v.ctx);
	free(f.v.sink);
	return reopen();
}

/* A live PD or CQ of the context: slot 0 always is. */
static void *pick(void **slots, int n)
{
	void *p = slots[below(n)];

	return p ? p : slots[0];
}

/* A QP to post to or modify: a churned one, else the context's own. */
static struct verbs *pick_qp(void)
{
	struct verbs *q = &f.qps[below(FUZZ_QPS)];

	return below(3) && q->qp ? q : &f.v;
}

/*
 * Another process's QP number, 0, or any: not one of its own, whose queue
 * does not hold the WQE, which the adapter alone would find out.
 */
static uint32_t random_qpn(void)
{
	const uint32_t *other = f.sh->qpns[below(MAX_PROCS)];

	switch (below(4)) {
	case 0:
		return 0;
	case 1:
		return rnd() & 0xffffff;
	default:
		return other[below(FUZZ_QPS + 1)];
	}
}

/*
 * A byte of a WQE of @len bytes to flip a bit of: not the owner bit, WQE
 * counter (bytes 0..2) or QP number (4..6), user space's stamps, which the
 * kernel leaves to the adapter.
 */
static int checked_byte(int len)
{
	int at = below(len - 6);

	return at ? at + 6 : 3;
}

/* Polls @cq for the completion of a post that was taken, for a while. */
static void drain(struct ibv_cq *cq)
{
	struct ibv_wc wc[4];

	for (int i = 0; i < CQE_TRIES; i++)
		if (ibv_poll_cq(cq, 4, wc) != 0)
			break;
}

/*
 * QP_POST of an RDMA write to the context's sink, stamped for one of its
 * QPs as libmlx4 stamps it, then mostly bits flipped, now and then another
 * QP number, length, flags, WQE or result pointer.
 *
 * The adapter runs any WQE of a queue whose owner bit is valid once a
 * doorbell of its QP is rung, a doorbell's scan running ahead too: what
 * the kernel refused included. So a mutated WQE never enters the queue
 * with a valid owner bit: it is posted from a copy, through BlueFlame
 * (small enough, no FORCE_DOORBELL), and its slot gets it with the last
 * lap's owner bit. An unmutated one is posted from its slot, as libmlx4's
 * patched post does, by either path.
 */
static void fuzz_post(void)
{
	static struct mlx4_bf_post_result res[4];
	static uint8_t wqe[MAX_WQE + 64];
	struct verbs *q = pick_qp();
	int flips = below(4), payload = 1 + below(flips ? 200 : below(16) ? 300 : 900), len;
	uint8_t *slot;
	struct qp_post p = {
		.fd = f.v.ctx->cmd_fd,
		.with_flags = !below(4), .flags = below(2) ? below(8) : rnd(),
		.result = below(2) ? res : NULL,
	};

	/* no longer than the queue's stride: the slot is all the WQE has */
	while ((len = build_rdma_write(wqe, payload, rnd(),
				       verbs_sink_addr(&f.v) + below(SINK_BYTES - 300),
				       f.v.sink_mr->rkey)) > 1 << q->dv.sq.wqe_shift)
		payload /= 2;
	slot = verbs_put_wqe(q, wqe, len);
	p.wqe = slot;
	p.len = len;
	if (flips || !below(8)) {
		slot[0] ^= 0x80;
		p.wqe = wqe;
		p.flags &= ~MLX4_BF_POST_F_FORCE_DOORBELL;
		for (; flips > 0; flips--)
			wqe[checked_byte(len)] ^= 1 << below(8);
		if (!below(4))
			put_be32(wqe + 4, random_qpn() << 8 | wqe[7]);
	} else {
		if (!below(8))
			p.len = below(MLX4_BF_QP_POST_MAX_WQE + 64);
		if (!below(16))
			p.wqe = (void *)(uintptr_t)random_pointer(slot, f.unmapped);
	}
	if (!below(16))
		p.result = (void *)(uintptr_t)random_pointer(res, f.unmapped);
	if (!count(FUZZ_POST, qp_post_call(&p))) {
		q->head++;
		drain(q->qp->send_cq);
	} else if (p.wqe != wqe) {
		/* refused: as a mutated one, out of the adapter's reach */
		slot[0] ^= 0x80;
	}
}

static uint16_t random_attr_id(void)
{
	static const uint16_t ids[] = {
		MLX4_BF_IB_ATTR_QP_POST_WQE, MLX4_BF_IB_ATTR_QP_POST_FLAGS,
		MLX4_BF_IB_ATTR_QP_POST_RESULT,
	};

	return below(8) ? ids[below(3)] : (uint16_t)rnd();
}

/*
 * RDMA_VERBS_IOCTL as QP_POST's, mostly: random attributes (IDs, lengths,
 * flags, pointers, how many), header (length, object, method, driver), or
 * the header itself at a bad address. The WQE is a valid one of the
 * context's QP, which a call may post.
 */
static void fuzz_raw(void)
{
	static uint8_t out[256], wqe[MAX_WQE + 64];
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[6];
	} cmd;
	int len = build_rdma_write(wqe, 1 + below(200), rnd(), verbs_sink_addr(&f.v),
				   f.v.sink_mr->rkey);
	uint8_t *slot = verbs_put_wqe(&f.v, wqe, len);
	uint32_t n = below(4) ? 1 + below(3) : below(7);
	void *arg = &cmd;
	int err;

	memset(&cmd, 0, sizeof(cmd));
	for (uint32_t i = 0; i < n; i++) {
		struct ib_uverbs_attr *a = &cmd.attrs[i];

		a->attr_id = i == 0 && below(8) ? MLX4_BF_IB_ATTR_QP_POST_WQE : random_attr_id();
		switch (a->attr_id) {
		case MLX4_BF_IB_ATTR_QP_POST_WQE:
			a->len = below(8) ? len : below(1100);
			a->data = below(8) ? (uintptr_t)slot : random_pointer(slot, f.unmapped);
			break;
		case MLX4_BF_IB_ATTR_QP_POST_FLAGS:
			a->len = below(4) ? 8 : below(16);
			a->data = below(4) ? below(4) : rnd();
			break;
		default:
			a->len = below(4) ? sizeof(struct mlx4_bf_post_result) : below(64);
			a->data = below(4) ? (uintptr_t)out : random_pointer(out, f.unmapped);
			break;
		}
		if (!below(16))
			a->flags = rnd();
	}
	cmd.hdr.num_attrs = below(32) ? n : rnd();
	cmd.hdr.length = sizeof(cmd.hdr) + n * sizeof(cmd.attrs[0]);
	if (!below(32))
		cmd.hdr.length = below(sizeof(cmd) + 16);
	cmd.hdr.object_id = below(16) ? UVERBS_OBJECT_DEVICE : below(32);
	cmd.hdr.method_id = below(16) ? MLX4_BF_IB_METHOD_QP_POST : (uint16_t)rnd();
	cmd.hdr.driver_id = below(16) ? RDMA_DRIVER_MLX4 : below(32);
	if (!below(64))
		arg = (void *)(uintptr_t)random_pointer(&cmd, f.unmapped);
	err = ioctl(f.v.ctx->cmd_fd, RDMA_VERBS_IOCTL, arg) ? errno : 0;
	if (!count(FUZZ_RAW, err)) {
		f.v.head++;
		drain(f.v.cq);
	} else {
		/* as a refused post's (fuzz_post()) */
		slot[0] ^= 0x80;
	}
}

/* A free slot of @n, or -1. */
static int free_slot(void **slots, int n)
{
	int i = below(n);

	for (int k = 0; k < n; k++, i = (i + 1) % n)
		if (!slots[i])
			return i;
	return -1;
}

/*
 * A QP of a random PD and CQs: mostly the RC QP the posts want, connected
 * to itself half the time; else random capabilities and types. Not the XRC
 * types, which libmlx4 reads an XRC domain for that ibv_create_qp() has
 * none of.
 */
static void fuzz_create_qp(void)
{
	static const enum ibv_qp_type types[] = {
		IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_RAW_PACKET, 0, 5,
	};
	struct ibv_pd *pd = pick((void **)f.pds, FUZZ_PDS);
	struct ibv_cq *cq = pick((void **)f.cqs, FUZZ_CQS);
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = pick((void **)f.cqs, FUZZ_CQS),
		.qp_type = types[below(ARRAY_SIZE(types))],
		.sq_sig_all = below(2),
		.cap = {
			.max_send_wr = below(4) ? 1 + below(64) : rnd() % (1 << 17),
			.max_recv_wr = below(4) ? below(64) : rnd() % (1 << 17),
			.max_send_sge = below(4) ? 1 + below(4) : below(64),
			.max_recv_sge = below(4) ? 1 + below(4) : below(64),
			.max_inline_data = below(4) ? below(VERBS_MAX_INLINE + 1) : rnd() % 4096,
		},
	};
	int i, legal = below(2);
	struct verbs *q;

	for (i = 0; i < FUZZ_QPS && f.qps[i].qp; i++)
		;
	if (i == FUZZ_QPS)
		return;
	q = &f.qps[i];
	errno = 0;
	q->qp = count_obj(FUZZ_CREATE_QP, legal ? verbs_rc_qp(pd, cq) : ibv_create_qp(pd, &a));
	if (!q->qp)
		return;
	q->ctx = f.v.ctx;
	q->head = 0;
	if (verbs_qp_queue(q->qp, &q->dv) || !q->dv.sq.wqe_cnt) {
		/* no send queue to put WQEs in: not one to post to */
		count(FUZZ_DESTROY_QP, ibv_destroy_qp(q->qp));
		memset(q, 0, sizeof(*q));
		return;
	}
	if (legal && below(2))
		count(FUZZ_MODIFY_QP, verbs_connect_to_self(q->qp));
	publish_qpns();
}

/*
 * A transition of one of the QPs: the legal way to RTS from RESET, or a
 * random target state (invalid ones too) with a random attribute mask and
 * attributes.
 */
static void fuzz_modify_qp(void)
{
	struct verbs *q = pick_qp();
	struct ibv_qp_attr a;
	int mask, err;

	if (!below(4)) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RESET;
		err = count(FUZZ_MODIFY_QP, ibv_modify_qp(q->qp, &a, IBV_QP_STATE));
		if (!err) {
			/* libmlx4 and the adapter start the queue again */
			q->head = 0;
			count(FUZZ_MODIFY_QP, verbs_connect_to_self(q->qp));
		}
		return;
	}
	for (size_t k = 0; k < sizeof(a); k++)
		((uint8_t *)&a)[k] = rnd();
	a.qp_state = below(8) ? below(IBV_QPS_UNKNOWN + 1) : rnd();
	a.port_num = below(4) ? 1 : rnd();
	a.ah_attr.port_num = below(4) ? 1 : rnd();
	a.ah_attr.is_global = below(4) ? 0 : rnd();
	/* the core masks wider PSNs, with a line in the log each time */
	if (below(16)) {
		a.sq_psn &= 0xffffff;
		a.rq_psn &= 0xffffff;
	}
	mask = below(8) ? (rnd() & ((IBV_QP_DEST_QPN << 1) - 1)) | IBV_QP_STATE : rnd();
	err = count(FUZZ_MODIFY_QP, ibv_modify_qp(q->qp, &a, mask));
	if (!err && (mask & IBV_QP_STATE) && a.qp_state == IBV_QPS_RESET)
		q->head = 0;
}

static void fuzz_destroy_qp(void)
{
	struct verbs *q = &f.qps[below(FUZZ_QPS)];

	if (q->qp && !count(FUZZ_DESTROY_QP, ibv_destroy_qp(q->qp))) {
		memset(q, 0, sizeof(*q));
		publish_qpns();
	}
}

/*
 * An MR of a random PD over a random range (in the pool, into its guard
 * page, the read-only page, nothing mapped, a kernel address, empty, huge)
 * with legal or random access flags.
 */
static void fuzz_reg_mr(void)
{
	static const int legal[] = {
		IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
	};
	int i = free_slot((void **)f.mrs, FUZZ_MRS), access;
	uint64_t off = below(POOL_BYTES), len;
	uint8_t *addr = f.pool + off;

	if (i < 0)
		return;
	access = below(4) ? legal[below(ARRAY_SIZE(legal))] : below(2) ? IBV_ACCESS_REMOTE_WRITE :
			    (int)rnd();
	switch (below(7)) {
	case 0:
		len = 1 + below(POOL_BYTES - off);
		break;
	case 1:
		len = below(4 * PAGE);
		break;
	case 2:
		addr = f.readonly + below(PAGE);
		len = 1 + below(PAGE);
		break;
	case 3:
		addr = (uint8_t *)f.unmapped + below(PAGE);
		len = 1 + below(2 * PAGE);
		break;
	case 4:
		addr = (void *)(uintptr_t)random_pointer(f.pool, f.unmapped);
		len = below(2) ? 1 + below(2 * PAGE) : rnd();
		break;
	default:
		len = below(2) ? (uint64_t)1 << (30 + below(20)) : ~0ull - below(PAGE);
		break;
	}
	errno = 0;
	f.mrs[i] = count_obj(FUZZ_REG_MR, ibv_reg_mr(pick((void **)f.pds, FUZZ_PDS), addr, len,
						     access));
}

static void fuzz_dereg_mr(void)
{
	int i = below(FUZZ_MRS);

	if (f.mrs[i] && !count(FUZZ_DEREG_MR, ibv_dereg_mr(f.mrs[i])))
		f.mrs[i] = NULL;
}

/* A CQ of a random size (up to over libmlx4's largest) and vector. */
static void fuzz_create_cq(void)
{
	int i = free_slot((void **)f.cqs, FUZZ_CQS);
	int cqe = below(4) ? 1 + below(256) : below(2) ? (int)below(1 << 16) : (int)rnd();

	if (i < 0)
		return;
	errno = 0;
	f.cqs[i] = count_obj(FUZZ_CREATE_CQ, ibv_create_cq(f.v.ctx, cqe, NULL, NULL,
							   below(8) ? 0 : below(64)));
}

/* Any CQ or PD, the context's own and those still in use too: EBUSY. */
static void fuzz_destroy(enum fuzz_op op, void **slots, int n)
{
	int i = below(n), err;

	if (!slots[i])
		return;
	if (op == FUZZ_DESTROY_CQ)
		err = ibv_destroy_cq(slots[i]);
	else
		err = ibv_dealloc_pd(slots[i]);
	if (!count(op, err)) {
		slots[i] = NULL;
		/* the context's own went: it needs another for what follows */
		if (i == 0)
			count(FUZZ_REOPEN, close_alive());
	}
}

static void fuzz_alloc_pd(void)
{
	int i = free_slot((void **)f.pds, FUZZ_PDS);

	if (i < 0)
		return;
	errno = 0;
	f.pds[i] = count_obj(FUZZ_ALLOC_PD, ibv_alloc_pd(f.v.ctx));
}

static enum fuzz_op random_op(void)
{
	unsigned int r = below(1000);
	int op = 0;

	while (r >= op_weights[op])
		r -= op_weights[op++];
	return op;
}

/* A pool of pages, a PROT_NONE guard after it, then a read-only page. */
static int mem_init(void)
{
	uint8_t *p = map_pages(POOL_PAGES + 2, PROT_READ | PROT_WRITE);

	if (!p || mprotect(p + POOL_BYTES, PAGE, PROT_NONE) ||
	    mprotect(p + POOL_BYTES + PAGE, PAGE, PROT_READ))
		return -1;
	f.pool = p;
	f.readonly = p + POOL_BYTES + PAGE;
	return 0;
}

/* Process @index's @ops operations; 0, or -1 if it could not start. */
static int fuzz(int index, uint64_t seed, long ops)
{
	f.index = index;
	rng_state = seed + index * 0x9E3779B97F4A7C15ULL;
	if (!rng_state)
		rng_state = 1;
	if (mem_init() || reopen())
		return -1;
	for (long i = 0; i < ops; i++) {
		enum fuzz_op op = random_op();

		switch (op) {
		case FUZZ_POST:
			fuzz_post();
			break;
		case FUZZ_RAW:
			fuzz_raw();
			break;
		case FUZZ_CREATE_QP:
			fuzz_create_qp();
			break;
		case FUZZ_MODIFY_QP:
			fuzz_modify_qp();
			break;
		case FUZZ_DESTROY_QP:
			fuzz_destroy_qp();
			break;
		case FUZZ_REG_MR:
			fuzz_reg_mr();
			break;
		case FUZZ_DEREG_MR:
			fuzz_dereg_mr();
			break;
		case FUZZ_CREATE_CQ:
			fuzz_create_cq();
			break;
		case FUZZ_ALLOC_PD:
			fuzz_alloc_pd();
			break;
		case FUZZ_DESTROY_CQ:
		case FUZZ_DEALLOC_PD:
			fuzz_destroy(op, op == FUZZ_DESTROY_CQ ? (void **)f.cqs : (void **)f.pds,
				     op == FUZZ_DESTROY_CQ ? FUZZ_CQS : FUZZ_PDS);
			break;
		default:
			count(FUZZ_REOPEN, close_alive());
			break;
		}
		if (!f.v.ctx && reopen())
			return -1;
	}
	/* the process ends with its objects alive: its exit closes the context */
	return 0;
}

static int clean(int slot)
{
	for (size_t i = 0; i < ARRAY_SIZE(clean_errnos); i++)
		if (clean_errnos[i] == slot)
			return 1;
	return 0;
}

/* The counts per operation and errno as "#" lines; 1 if every error was clean. */
static int report(const struct shared *sh)
{
	int ok = 1;

	for (int op = 0; op < FUZZ_OPS; op++) {
		char line[1024];
		int n = snprintf(line, sizeof(line), "# %-11s", op_names[op]);

		for (int s = 0; s <= SLOT_BAD_ERRNO; s++) {
			const char *name = s == 0 ? "ok" : s == SLOT_NO_ERRNO ? "no-errno" :
					   s == SLOT_BAD_ERRNO ? "not-an-errno" : strerrorname_np(s);

			if (!sh->counts[op][s] || n >= (int)sizeof(line))
				continue;
			n += snprintf(line + n, sizeof(line) - n, " %s=%lu", name ? name : "?",
				      sh->counts[op][s]);
			if (s && !clean(s))
				ok = 0;
		}
		printf("%s\n", line);
	}
	if (sh->bad_value)
		printf("# a value that is not an errno: %ld\n", sh->bad_value);
	return ok;
}

/*
 * After the campaign: a fresh context's QP still posts a WQE through
 * QP_POST, which completes and lands in its sink. With @m, the adapter's
 * MPTs must have gone up while the context was open (its sink's MR), so
 * that their gauge is seen to count the provider's MRs.
 */
static int device_still_works(struct model *m, uint64_t mpts)
{
	struct mlx4_bf_post_result res = {};
	uint8_t wqe[MAX_WQE + 64], want[77];
	struct verbs v;
	int ok, err, len, status = -1;

	if (verbs_open(&v))
		return 0;
	len = build_rdma_write(wqe, 77, 5, verbs_sink_addr(&v) + 100, v.sink_mr->rkey);
	err = verbs_post(&v, verbs_put_wqe(&v, wqe, len), len, 0, &res);
	if (!err)
		status = verbs_wait_cqe(v.cq);
	rdma_write_pattern(want, 77, 5);
	ok = err == 0 && status == IBV_WC_SUCCESS && !memcmp(v.sink + 100, want, 77);
	printf("# fresh context: QP_POST %s, completion status %d, path %u, data %s\n",
	       err ? strerror(err) : "ok", status, res.path,
	       memcmp(v.sink + 100, want, 77) ? "missing" : "landed");
	if (m) {
		uint64_t open = model_read(m, MODEL_MPTS);

		printf("# MPTs %llu with it open\n", (unsigned long long)open);
		ok = ok && open > mpts;
	}
	verbs_close(&v);
	return ok;
}

/* The adapter's MPTs once back at @before, waiting up to 2 s for the contexts to go. */
static int mpts_back(struct model *m, uint64_t before)
{
	uint64_t now = model_read(m, MODEL_MPTS);

	for (int i = 0; i < 200 && now != before; i++) {
		usleep(10000);
		now = model_read(m, MODEL_MPTS);
	}
	printf("# MPTs before the campaign %llu, after %llu; MTT pages %llu; driver's mrs %ld\n",
	       (unsigned long long)before, (unsigned long long)now,
	       (unsigned long long)model_read(m, MODEL_MR_PAGES), debugfs_counter("device", "mrs"));
	return now == before;
}

static int result(int n, int ok, const char *name)
{
	printf("%sok %d %s\n", ok ? "" : "not ", n, name);
	return !ok;
}

int main(int argc, char **argv)
{
	uint64_t seed = time(NULL), mpts = 0, local = 0, remote = 0;
	long total = 20000, per;
	int procs = 4, opt, status, failed = 0, died = 0, have_model;
	struct timespec t0, t1;
	struct shared *sh;
	struct model m;

	while ((opt = getopt(argc, argv, "n:p:s:")) != -1) {
		switch (opt) {
		case 'n':
			total = atol(optarg);
			break;
		case 'p':
			procs = atoi(optarg);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, "usage: %s [-n operations] [-p processes] [-s seed]\n",
				argv[0]);
			return 2;
		}
	}
	if (procs < 1 || procs > MAX_PROCS || total < procs) {
		fprintf(stderr, "mlx4_bf_qp_post_fuzz: need 1..%d processes and an operation each\n",
			MAX_PROCS);
		return 2;
	}
	printf("TAP version 13\n1..5\n");
	printf("# seed %llu, %ld operations, %d processes (replay: -s %llu -n %ld -p %d)\n",
	       (unsigned long long)seed, total, procs, (unsigned long long)seed, total, procs);
	if (!verbs_device_present()) {
		printf("ok 1 fuzz # SKIP " NO_VERBS_DEVICE "\n");
		for (int i = 2; i <= 5; i++)
			printf("ok %d # SKIP\n", i);
		return 4;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	have_model = analyzer_v4(&m);
	if (have_model) {
		mpts = model_read(&m, MODEL_MPTS);
		local = model_read(&m, MODEL_LOCAL_PROT_FAULTS);
		remote = model_read(&m, MODEL_REMOTE_ACCESS_FAULTS);
		model_write(&m, MODEL_EXPECT, 1);
		/*
		 * Not in the fuzzing processes: a random pointer's copy that
		 * ran into it would read the diagnostic block byte by byte,
		 * which the model reports as a protocol error.
		 */
		model_close(&m);
	}
	f.sh = sh;
	f.unmapped = map_pages(1, PROT_NONE);
	munmap(f.unmapped, PAGE);
	per = total / procs;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fflush(stdout);
	for (int i = 0; i < procs; i++)
		if (fork() == 0)
			_exit(fuzz(i, seed, per) ? 1 : 0);
	while (wait(&status) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			died++;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("# %ld operations in %.1f s, %d processes failed\n", per * procs,
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, died);
	failed += result(1, !died, "fuzz");
	failed += result(2, report(sh), "errnos_clean");
	if (!have_model || !analyzer_v4(&m)) {
		printf("ok 3 nothing_left_registered # SKIP " NO_V4 "\n");
		failed += result(4, device_still_works(NULL, 0), "device_still_works");
		printf("ok 5 no_local_protection_fault # SKIP " NO_V4 "\n");
		return failed ? 1 : 0;
	}
	/* device_still_works' post is the kernel's to get right: no window */
	model_write(&m, MODEL_EXPECT, 0);
	failed += result(3, mpts_back(&m, mpts), "nothing_left_registered");
	failed += result(4, device_still_works(&m, mpts), "device_still_works");
	local = model_read(&m, MODEL_LOCAL_PROT_FAULTS) - local;
	remote = model_read(&m, MODEL_REMOTE_ACCESS_FAULTS) - remote;
	printf("# the adapter saw %llu local protection and %llu remote access faults (declared)\n",
	       (unsigned long long)local, (unsigned long long)remote);
	for (uint64_t i = 0; i < remote; i++)
		declare_fault("remote");
	failed += result(5, !local, "no_local_protection_fault");
	model_close(&m);
	return failed ? 1 : 0;
}
