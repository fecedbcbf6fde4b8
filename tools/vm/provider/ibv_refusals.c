// SPDX-License-Identifier: GPL-2.0
/*
 * ibv_refusals: what a user can ask of an RDMA device through libibverbs
 * and libmlx4 that the provider does not make, and the errno each request
 * must get: a clean refusal, never a WARN (the suite reads the kernel log
 * after it). One KTAP result per request, a "#" line with what came back.
 *
 * Most requests pass libmlx4's own checks and are refused by the kernel:
 * a raw packet QP, an SRQ past max_srq_wr, resized or limited past its
 * size, or destroyed under a QP, a WQE larger than the device's
 * descriptor, a CQ past max_cqe (made or resized), the alternate path, a
 * transition the QP state machine has not, a create flag mlx4_ib has not
 * (blocking multicast loopback is made), memory region access without
 * local write, an mmap of a page the context has not; then PDs, CQs and
 * QPs until the device has no more. Queues past max_qp_wr are libmlx4's
 * own refusal (max_qp_wr leaves room for its spare WQEs, so queues of
 * max_qp_wr are made). A few results are what is made: a UD QP, those
 * queues, an SRQ and its armed limit, a resized CQ, a region re-registered
 * (its keys kept).
 *
 * Usage: ibv_refusals [-d DEV]       (exit status 0 if every result is ok)
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../upstream/verbs_util.h"

static struct ibv_context *ctx;
static struct ibv_device_attr dev_attr;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static int results, failures;

void die(const char *what, int err)
{
	printf("# ibv_refusals: %s: %s\n", what, strerror(err));
	printf("not ok %d setup\n", ++results);
	exit(1);
}

/* One result: the call failed (FAILED) with errno ERR, and ERR is WANT. */
static void expect(const char *name, int failed, int err, int want)
{
	int ok = failed && err == want;

	printf("# %s: %s, errno %d (%s); want %d (%s)\n", name,
	       failed ? "refused" : "accepted", failed ? err : 0,
	       failed ? strerror(err) : "-", want, strerror(want));
	printf("%s %d %s\n", ok ? "ok" : "not ok", ++results, name);
	failures += !ok;
}

/* One result that is not a refusal: COND holds; DETAIL says what came. */
static void check(const char *name, int cond, const char *detail, int err)
{
	printf("# %s: %s, errno %d (%s)\n", name, detail, err, strerror(err));
	printf("%s %d %s\n", cond ? "ok" : "not ok", ++results, name);
	failures += !cond;
}

static struct ibv_qp_init_attr qp_attr(enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = type,
		.cap = {
			.max_send_wr = 4,
			.max_recv_wr = 4,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	return a;
}

/* ibv_create_qp with A: refused with WANT (a QP made is destroyed). */
static void create_qp_refused(const char *name, struct ibv_qp_init_attr *a,
			      int want)
{
	struct ibv_qp *qp;

	errno = 0;
	qp = ibv_create_qp(pd, a);
	expect(name, !qp, errno, want);
	if (qp)
		ibv_destroy_qp(qp);
}

/* ibv_create_qp with A: made (and destroyed). */
static void made(const char *name, struct ibv_qp_init_attr *a)
{
	struct ibv_qp *qp;

	errno = 0;
	qp = ibv_create_qp(pd, a);
	printf("# %s: %s, errno %d (%s)\n", name, qp ? "made" : "refused",
	       qp ? 0 : errno, qp ? "-" : strerror(errno));
	printf("%s %d %s\n", qp ? "ok" : "not ok", ++results, name);
	failures += !qp;
	if (qp)
		ibv_destroy_qp(qp);
}

/*
 * ibv_create_qp_ex of a UD QP with create FLAGS (libmlx4 passes them to the
 * kernel unchecked): made if WANT is 0, else refused with WANT.
 */
static void create_flags(const char *name, uint32_t flags, int want)
{
	struct ibv_qp_init_attr a = qp_attr(IBV_QPT_UD);
	struct ibv_qp_init_attr_ex ax = {
		.send_cq = a.send_cq,
		.recv_cq = a.recv_cq,
		.cap = a.cap,
		.qp_type = a.qp_type,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
		.pd = pd,
		.create_flags = flags,
	};
	struct ibv_qp *qp;

	errno = 0;
	qp = ibv_create_qp_ex(ctx, &ax);
	if (want) {
		expect(name, !qp, errno, want);
	} else {
		printf("# %s: %s, errno %d\n", name, qp ? "made" : "refused",
		       qp ? 0 : errno);
		printf("%s %d %s\n", qp ? "ok" : "not ok", ++results, name);
		failures += !qp;
	}
	if (qp)
		ibv_destroy_qp(qp);
}

static void qp_types_and_sizes(void)
{
	struct ibv_qp_init_attr a = qp_attr(IBV_QPT_UD);

	/* UD is a type the provider makes (issue 46); raw packet is not */
	made("ud_qp_is_made", &a);
	/*
	 * mlx4_ib's one create flag of a user QP; another the uverbs core
	 * lets through for UD (check_creation_flags()), EOPNOTSUPP as over
	 * mainline.
	 */
	create_flags("qp_blocking_multicast_loopback_is_made",
		     IBV_QP_CREATE_BLOCK_SELF_MCAST_LB, 0);
	create_flags("qp_padding_pci_writes_eopnotsupp",
		     IBV_QP_CREATE_PCI_WRITE_END_PADDING, EOPNOTSUPP);
	a = qp_attr(IBV_QPT_RAW_PACKET);
	create_qp_refused("raw_packet_qp_eopnotsupp", &a, EOPNOTSUPP);
	/* max_qp_wr leaves room for libmlx4's spare WQEs: the largest fits. */
	a = qp_attr(IBV_QPT_RC);
	a.cap.max_send_wr = dev_attr.max_qp_wr;
	a.cap.max_recv_wr = dev_attr.max_qp_wr;
	made("queues_of_max_qp_wr_are_made", &a);
	a = qp_attr(IBV_QPT_RC);
	a.cap.max_send_wr = dev_attr.max_qp_wr + 1;
	create_qp_refused("send_queue_past_max_qp_wr_einval", &a, EINVAL);
	a = qp_attr(IBV_QPT_RC);
	a.cap.max_recv_wr = dev_attr.max_qp_wr + 1;
	create_qp_refused("receive_queue_past_max_qp_wr_einval", &a, EINVAL);
	/* 1000 inline bytes: a 2 KiB WQE stride, past max_sq_desc_sz. */
	a = qp_attr(IBV_QPT_RC);
	a.cap.max_inline_data = 1000;
	create_qp_refused("wqe_too_large_einval", &a, EINVAL);
}

static void cq_refusals(void)
{
	struct ibv_cq *c;
	int err;

	errno = 0;
	c = ibv_create_cq(ctx, dev_attr.max_cqe + 1, NULL, NULL, 0);
	expect("cq_past_max_cqe_einval", !c, errno, EINVAL);
	if (c)
		ibv_destroy_cq(c);
	errno = 0;
	c = ibv_create_cq(ctx, 1 << 20, NULL, NULL, 0);
	expect("cq_too_large_einval", !c, errno, EINVAL);
	if (c)
		ibv_destroy_cq(c);
	/* Resized as mlx4_ib does; past max_cqe, refused. */
	err = ibv_resize_cq(cq, 64);
	check("cq_is_resized_to_127", !err && cq->cqe == 127, "resized", err);
	err = ibv_resize_cq(cq, dev_attr.max_cqe + 1);
	expect("cq_resize_past_max_cqe_einval", err != 0, err, EINVAL);
}

/* RESET -> RTS in one step, then INIT -> RTR with an alternate path. */
static void transitions(void)
{
	struct ibv_qp_init_attr init = qp_attr(IBV_QPT_RC);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };
	struct ibv_port_attr port;
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	int err;

	if (!qp || ibv_query_port(ctx, 1, &port))
		die("a QP to modify", errno);
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	expect("reset_to_rts_einval", err != 0, err, EINVAL);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		die("INIT", err);
	self_rtr_attr(qp, port.lid, &a);
	a.alt_ah_attr = a.ah_attr;
	a.alt_port_num = 1;
	a.alt_timeout = 14;
	err = ibv_modify_qp(qp, &a, SELF_RTR_MASK | IBV_QP_ALT_PATH);
	expect("alternate_path_eopnotsupp", err != 0, err, EOPNOTSUPP);
	ibv_destroy_qp(qp);
}

static void mr_and_mmap_refusals(void)
{
	size_t page = sysconf(_SC_PAGESIZE);
	char *buf = aligned_alloc(page, page);
	struct ibv_mr *mr;
	void *p;

	if (!buf)
		die("memory", ENOMEM);
	errno = 0;
	mr = ibv_reg_mr(pd, buf, page, IBV_ACCESS_REMOTE_WRITE);
	expect("mr_remote_write_without_local_write_einval", !mr, errno, EINVAL);
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE);
	expect("mr_of_no_bytes_einval", !mr, errno, EINVAL);
	if (mr)
		ibv_dereg_mr(mr);
	free(buf);
	/* pgoff 0 is the UAR, 1 the BlueFlame page; 3 (a clock) there is not. */
	p = mmap(NULL, page, PROT_READ, MAP_SHARED, ctx->cmd_fd, 3 * page);
	expect("mmap_clock_page_einval", p == MAP_FAILED, errno, EINVAL);
	if (p != MAP_FAILED)
		munmap(p, page);
	p = mmap(NULL, 2 * page, PROT_WRITE, MAP_SHARED, ctx->cmd_fd, 0);
	expect("mmap_two_pages_einval", p == MAP_FAILED, errno, EINVAL);
	if (p != MAP_FAILED)
		munmap(p, 2 * page);
	/*
	 * Past the pages the context offers: the next one, and one as far into
	 * the file as the BAR's would be from its first UAR and beyond. Only
	 * pages the provider offered, of its own BAR, are ever mapped.
	 */
	p = mmap(NULL, page, PROT_WRITE, MAP_SHARED, ctx->cmd_fd, 2 * page);
	expect("mmap_past_the_offered_pages_einval", p == MAP_FAILED, errno,
	       EINVAL);
	if (p != MAP_FAILED)
		munmap(p, page);
	p = mmap(NULL, page, PROT_WRITE, MAP_SHARED, ctx->cmd_fd,
		 (off_t)0x40000 * page);
	expect("mmap_far_past_the_bar_einval", p == MAP_FAILED, errno, EINVAL);
	if (p != MAP_FAILED)
		munmap(p, page);
	/* A private mapping of a device page is no mapping of it. */
	p = mmap(NULL, page, PROT_READ, MAP_PRIVATE, ctx->cmd_fd, 0);
	expect("mmap_private_uar_einval", p == MAP_FAILED, errno, EINVAL);
	if (p != MAP_FAILED)
		munmap(p, page);
}

/*
 * Objects of one kind until the device has no more: the last must fail
 * with ENOSPC or ENOMEM (as mainline's bitmaps answer), after at least
 * MIN were made. Everything made is given back.
 */
enum kind { PD, CQ, QP };

static void *make(enum kind k)
{
	struct ibv_qp_init_attr a = qp_attr(IBV_QPT_RC);

	switch (k) {
	case PD:
		return ibv_alloc_pd(ctx);
	case CQ:
		return ibv_create_cq(ctx, 1, NULL, NULL, 0);
	default:
		return ibv_create_qp(pd, &a);
	}
}

static void unmake(enum kind k, void *o)
{
	if (k == PD)
		ibv_dealloc_pd(o);
	else if (k == CQ)
		ibv_destroy_cq(o);
	else
		ibv_destroy_qp(o);
}

/*
 * Objects of kind K until the device has none left: exactly as many as
 * ibv_query_device says (MAX, less the HELD this context has already),
 * then ENOSPC or ENOMEM; all are destroyed again.
 */
static void exhaust(const char *name, enum kind k, int max, int held)
{
	int want = max - held, n = 0, err = 0, ok;
	void **made = calloc(want + 1, sizeof(*made));

	if (!made)
		die("calloc", ENOMEM);
	while (n <= want) {
		errno = 0;
		made[n] = make(k);
		if (!made[n]) {
			err = errno;
			break;
		}
		n++;
	}
	ok = n == want && (err == ENOSPC || err == ENOMEM);
	printf("# %s: %d made, then errno %d (%s); want %d (max %d less %d held), then ENOSPC or ENOMEM\n",
	       name, n, err, strerror(err), want, max, held);
	printf("%s %d %s\n", ok ? "ok" : "not ok", ++results, name);
	failures += !ok;
	while (n--)
		unmake(k, made[n]);
	free(made);
}

/*
 * ibv_rereg_mr in place, its keys kept, as mlx4_ib: new rights, then new
 * memory; writable rights over memory pinned read-only are refused
 * (EACCES, ib_umem_check_rereg()).
 */
static void mr_rereg(void)
{
	char *buf = aligned_alloc(4096, 8192);
	struct ibv_mr *mr;
	uint32_t lkey;
	int err;

	if (!buf)
		die("aligned_alloc", ENOMEM);
	mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr", errno);
	lkey = mr->lkey;
	err = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	check("mr_rereg_access_keeps_its_keys", !err && mr->lkey == lkey,
	      "re-registered", err ? errno : 0);
	err = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			   buf + 4096, 4096, 0);
	check("mr_rereg_translation_keeps_its_keys",
	      !err && mr->lkey == lkey && mr->addr == buf + 4096,
	      "re-registered", err ? errno : 0);
	ibv_dereg_mr(mr);
	mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_REMOTE_READ);
	if (!mr)
		die("ibv_reg_mr read-only", errno);
	errno = 0;
	err = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE);
	expect("mr_rereg_writable_over_read_only_eacces", err != 0, errno,
	       EACCES);
	ibv_dereg_mr(mr);
	free(buf);
}

/* A shared receive queue: made as mlx4_ib sizes it, its limit armed and
 * read back, and the refusals of mlx4_ib_create_srq()/_modify_srq() and of
 * the core (an SRQ a QP receives from is not destroyed).
 */
static void srq_rules(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq_attr attr = { 0 };
	struct ibv_recv_wr wr = { 0 }, *bad;
	struct ibv_qp_init_attr a;
	struct ibv_srq *srq, *big;
	struct ibv_qp *qp;
	int err, i;

	errno = 0;
	srq = ibv_create_srq(pd, &sa);
	if (!srq)
		die("ibv_create_srq", errno);
	/* roundup_pow_of_two(4 + 1) entries, one never posted */
	check("srq_is_made_with_max_wr_7", sa.attr.max_wr == 7, "made", 0);
	sa.attr.max_wr = dev_attr.max_srq_wr + 1;
	errno = 0;
	big = ibv_create_srq(pd, &sa);
	expect("srq_past_max_srq_wr_einval", !big, errno, EINVAL);
	if (big)
		ibv_destroy_srq(big);
	attr.max_wr = 16;
	err = ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR);
	expect("srq_resize_einval", err != 0, err, EINVAL);
	attr.srq_limit = 8;
	err = ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT);
	expect("srq_limit_past_its_size_einval", err != 0, err, EINVAL);
	/* Four WQEs posted, so a limit of 2 is not reached when armed. */
	for (i = 0, err = 0; i < 4 && !err; i++)
		err = ibv_post_srq_recv(srq, &wr, &bad);
	attr.srq_limit = 2;
	if (!err)
		err = ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT);
	memset(&attr, 0, sizeof(attr));
	if (!err)
		err = ibv_query_srq(srq, &attr);
	check("srq_limit_armed_reads_back",
	      !err && attr.srq_limit == 2 && attr.max_wr == 7 &&
	      attr.max_sge == 1, "queried", err);
	a = qp_attr(IBV_QPT_RC);
	a.srq = srq;
	qp = ibv_create_qp(pd, &a);
	if (!qp)
		die("ibv_create_qp on an SRQ", errno);
	err = ibv_destroy_srq(srq);
	expect("srq_under_a_qp_ebusy", err != 0, err, EBUSY);
	ibv_destroy_qp(qp);
	err = ibv_destroy_srq(srq);
	check("srq_is_destroyed_after_its_qp", !err, "destroyed", err);
}

int main(int argc, char **argv)
{
	const char *dev = "mlx4_bf0";
	int opt;

	while ((opt = getopt(argc, argv, "d:")) != -1) {
		if (opt != 'd') {
			fprintf(stderr, "usage: %s [-d DEV]\n", argv[0]);
			return 2;
		}
		dev = optarg;
	}
	/* Every line at once, in order, whoever reads the pipe. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("KTAP version 1\n1..31\n");
	ctx = open_device(dev);
	errno = ibv_query_device(ctx, &dev_attr);
	if (errno)
		die("ibv_query_device", errno);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!pd || !cq)
		die("PD or CQ", errno);
	printf("# %s: max_qp_wr %d, max_cqe %d, max_pd %d, max_cq %d, max_qp %d\n",
	       dev, dev_attr.max_qp_wr, dev_attr.max_cqe, dev_attr.max_pd,
	       dev_attr.max_cq, dev_attr.max_qp);
	qp_types_and_sizes();
	srq_rules();
	cq_refusals();
	transitions();
	mr_and_mmap_refusals();
	mr_rereg();
	/* Besides this context's PD and CQ. */
	exhaust("pds_until_none_is_left", PD, dev_attr.max_pd, 1);
	exhaust("cqs_until_none_is_left", CQ, dev_attr.max_cq, 1);
	exhaust("qps_until_none_is_left", QP, dev_attr.max_qp, 0);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return failures ? 1 : 0;
}
