// SPDX-License-Identifier: GPL-2.0
/*
 * Registered memory on the RDMA device (mlx4_bf<N>), the regions
 * themselves, through unmodified libibverbs and libmlx4: ibv_reg_mr() and
 * ibv_dereg_mr(), the keys a region gets, the registrations the kernel
 * refuses and with which errno, and what a region holds while it lives:
 * its pages pinned and charged to the process (VmPin, mm->pinned_vm, which
 * ib_umem_get() in drivers/infiniband/core/umem.c charges against
 * RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK), an MPT in the
 * adapter translating them. The device model's analyzer (diagnostic block
 * version 4) counts the MPTs in hardware ownership and the pages they
 * translate; its checks are left out without it (real hardware), and a
 * test that is nothing else SKIPs. Posts that name regions are
 * mlx4_bf_verbs_mr_post_test's.
 *
 * Ported from the misc device's mlx4_bf_mr_reg_test and
 * mlx4_bf_mr_limit_test, every rule that has a verbs counterpart. Dropped:
 * - REG_MR's missing-attribute and output-attribute rules, and its
 *   MLX4_BF_ACCESS_* bits: the uverbs command has fixed fields, checked by
 *   the RDMA core (ib_check_mr_access(): IB_ACCESS_* here).
 * - DEREG_MR of an unknown handle, twice, or of another file's handle:
 *   ibv_dereg_mr() takes the region, not a number; what remains of the rule
 *   (a handle names an object of the caller's own file only) is
 *   another_contexts_handle_names_nothing here, through the raw command.
 * - max_mrs_per_context (16) and max_mr_pages per context (ENOSPC): the
 *   provider has no per-context limit. Its limits are the adapter's MPT
 *   table (ibv_query_device()'s max_mr, shared by every context: see
 *   mpt_table_is_the_limit_not_a_context_quota) and MTT (256 MiB
 *   registered at once, not tested here); max_mr_size is unbounded (as
 *   mlx4_ib's), so a length is refused only by umem.c's rules.
 * - The debugfs mrs and pinned_pages counters: the misc device's regions
 *   only; the RDMA core pins (VmPin) and the analyzer counts MPTs.
 * - VmLck: ib_umem charges pinned_vm (VmPin), not locked_vm.
 */
#include <sys/resource.h>
#include <sys/wait.h>
#include <rdma/ib_user_verbs.h>

#include "kselftest_harness.h"
#include "mlx4_bf_model.h"
#include "mlx4_bf_verbs.h"

/* A context with a PD, BUF_PAGES pages of this process, the analyzer. */
struct regs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct model m;
	int v4;
	uint8_t *buf;
};

FIXTURE(mr)
{
	struct regs r;
};

FIXTURE_SETUP(mr)
{
	struct regs *r = &self->r;

	r->ctx = NULL;
	r->pd = NULL;
	r->v4 = 0;
	r->buf = NULL;
	if (!verbs_device_present())
		SKIP(return, NO_VERBS_DEVICE);
	r->v4 = analyzer_v4(&r->m);
	r->ctx = verbs_open_device();
	ASSERT_NE(NULL, r->ctx);
	r->pd = ibv_alloc_pd(r->ctx);
	ASSERT_NE(NULL, r->pd);
	r->buf = map_pages(BUF_PAGES, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, r->buf);
	memset(r->buf, 0x5a, BUF_BYTES);
}

/* Regions a test left registered go with the context: the kernel's to destroy. */
FIXTURE_TEARDOWN(mr)
{
	struct regs *r = &self->r;

	if (r->ctx)
		ibv_close_device(r->ctx);
	if (r->buf)
		munmap(r->buf, BUF_BYTES);
	if (r->v4)
		model_close(&r->m);
}

#define LOCAL_WRITE	IBV_ACCESS_LOCAL_WRITE
#define RDMA_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

/* ibv_reg_mr() of @len bytes at @off into the fixture's pages. */
static struct ibv_mr *reg(struct regs *r, size_t off, size_t len, int access)
{
	return ibv_reg_mr(r->pd, r->buf + off, len, access);
}

/* The adapter's MPTs in hardware ownership and the pages they translate. */
struct gauges {
	uint64_t mpts, pages;
	long pinned_kb;
};

static void gauges(struct regs *r, struct gauges *g)
{
	g->mpts = r->v4 ? model_read(&r->m, MODEL_MPTS) : 0;
	g->pages = r->v4 ? model_read(&r->m, MODEL_MR_PAGES) : 0;
	g->pinned_kb = vm_pinned_kb();
}

/*
 * The gauges moved by @mpts MPTs translating @pages pages, all of them
 * pinned and charged to this process.
 */
static void expect_gauges(struct __test_metadata *_metadata, struct regs *r,
			  const struct gauges *before, int mpts, int pages, const char *when)
{
	struct gauges now;

	gauges(r, &now);
	EXPECT_EQ(before->pinned_kb + pages * PAGE / 1024, now.pinned_kb) TH_LOG("VmPin %s", when);
	if (!r->v4)
		return;
	EXPECT_EQ(before->mpts + mpts, now.mpts) TH_LOG("MPTs %s", when);
	EXPECT_EQ(before->pages + pages, now.pages) TH_LOG("MR pages %s", when);
}

/*
 * ibv_reg_mr() of @len bytes at @addr with @access fails with @want, and
 * leaves nothing behind: no page pinned or charged, no MPT.
 */
static void expect_refused(struct __test_metadata *_metadata, struct regs *r,
			   const void *addr, size_t len, int access, int want, const char *what)
{
	struct gauges before;
	struct ibv_mr *mr;
	int err;

	gauges(r, &before);
	errno = 0;
	mr = ibv_reg_mr(r->pd, (void *)addr, len, access);
	err = errno;
	EXPECT_EQ(NULL, mr) TH_LOG("%s: registered", what);
	if (mr) {
		ibv_dereg_mr(mr);
		return;
	}
	EXPECT_EQ(want, err) TH_LOG("%s: errno %d (%s), want %d (%s)", what, err, strerror(err),
				    want, strerror(want));
	expect_gauges(_metadata, r, &before, 0, 0, what);
}

TEST_F(mr, reg_and_dereg_round_trip)
{
	struct regs *r = &self->r;
	struct gauges before;
	struct ibv_mr *mr;

	gauges(r, &before);
	mr = reg(r, 0, 3 * PAGE, LOCAL_WRITE);
	ASSERT_NE(NULL, mr) TH_LOG("ibv_reg_mr: %s", strerror(errno));
	EXPECT_EQ(r->pd, mr->pd);
	EXPECT_EQ(r->ctx, mr->context);
	EXPECT_EQ(r->buf, mr->addr);
	EXPECT_EQ(3 * PAGE, mr->length);
	expect_gauges(_metadata, r, &before, 1, 3, "registered");
	EXPECT_EQ(0, ibv_dereg_mr(mr));
	expect_gauges(_metadata, r, &before, 0, 0, "after ibv_dereg_mr");
}

/* The provider's one key per region (mlx4_ib's too): MPT index << 8 | tag. */
TEST_F(mr, lkey_and_rkey_are_one_key_not_the_reserved_one)
{
	struct regs *r = &self->r;
	struct ibv_mr *mr = reg(r, 0, PAGE, RDMA_ACCESS);

	ASSERT_NE(NULL, mr);
	EXPECT_EQ(mr->lkey, mr->rkey);
	EXPECT_NE(RESERVED_LKEY, mr->lkey);
	/* MPT 0 is the firmware's, never a region's */
	EXPECT_NE(0, mr->lkey >> 8) TH_LOG("key %#x", mr->lkey);
	EXPECT_EQ(0, ibv_dereg_mr(mr));
}

TEST_F(mr, live_regions_have_distinct_keys_and_an_mpt_each)
{
	struct regs *r = &self->r;
	struct gauges before;
	struct ibv_mr *a, *b;

	gauges(r, &before);
	/* 100 bytes in: the second region's 2 pages touch 3 */
	a = reg(r, 0, PAGE, 0);
	b = reg(r, 100, 2 * PAGE, LOCAL_WRITE);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	EXPECT_NE(a->lkey >> 8, b->lkey >> 8) TH_LOG("keys %#x and %#x", a->lkey, b->lkey);
	expect_gauges(_metadata, r, &before, 2, 1 + 3, "two regions");
	/* the same pages again: a region is a registration, not a range */
	{
		struct ibv_mr *c = reg(r, 0, PAGE, 0);

		ASSERT_NE(NULL, c);
		EXPECT_NE(a->lkey >> 8, c->lkey >> 8);
		EXPECT_NE(b->lkey >> 8, c->lkey >> 8);
		expect_gauges(_metadata, r, &before, 3, 1 + 3 + 1, "the same page twice");
		EXPECT_EQ(0, ibv_dereg_mr(c));
	}
	EXPECT_EQ(0, ibv_dereg_mr(a));
	expect_gauges(_metadata, r, &before, 1, 3, "one deregistered");
	EXPECT_EQ(0, ibv_dereg_mr(b));
	expect_gauges(_metadata, r, &before, 0, 0, "both deregistered");
}

/* A stale key never names the MPT's next region: its tag moves on. */
TEST_F(mr, key_changes_every_time_an_mpt_is_reused)
{
	struct regs *r = &self->r;
	uint32_t keys[32];
	int reused = 0;

	for (int i = 0; i < 32; i++) {
		struct ibv_mr *mr = reg(r, 0, PAGE, 0);

		ASSERT_NE(NULL, mr) TH_LOG("cycle %d: %s", i, strerror(errno));
		keys[i] = mr->lkey;
		ASSERT_EQ(0, ibv_dereg_mr(mr));
		for (int j = 0; j < i; j++) {
			EXPECT_NE(keys[j], keys[i])
				TH_LOG("cycles %d and %d: key %#x", j, i, keys[i]);
			reused += (keys[j] >> 8) == (keys[i] >> 8);
		}
	}
	/* first free slot: the MPT freed is the next one taken */
	EXPECT_LT(0, reused);
	TH_LOG("%d pairs of the 32 registrations on one MPT index", reused);
}

/* The provider (mr.rs): an empty region is none. */
TEST_F(mr, zero_length_is_einval)
{
	struct regs *r = &self->r;

	expect_refused(_metadata, r, r->buf, 0, 0, EINVAL, "0 bytes");
	expect_refused(_metadata, r, r->buf, 0, LOCAL_WRITE, EINVAL, "0 bytes, LOCAL_WRITE");
}

/*
 * max_mr_size is unbounded (mlx4_ib's): a length is refused by umem.c,
 * more pages than an unsigned int counts with EINVAL, fewer by what
 * pinning them finds (here a page without access after the first: EFAULT).
 */
TEST_F(mr, huge_lengths)
{
	struct regs *r = &self->r;
	struct ibv_device_attr attr;

	ASSERT_EQ(0, ibv_query_device(r->ctx, &attr));
	EXPECT_EQ(~0ull, attr.max_mr_size);
	expect_refused(_metadata, r, r->buf, 1ull << 62, 0, EINVAL, "2^62 bytes");
	expect_refused(_metadata, r, r->buf, (size_t)PAGE << 32, 0, EINVAL, "2^32 pages");
	/* a page, then none: the pinning stops at the second */
	ASSERT_EQ(0, mprotect(r->buf + PAGE, PAGE, PROT_NONE));
	expect_refused(_metadata, r, r->buf, 1ull << 40, 0, EFAULT, "2^40 bytes");
}

/* umem.c: addr + size, and its page-aligned end, must not wrap. */
TEST_F(mr, range_wrapping_the_address_space_is_einval)
{
	struct regs *r = &self->r;

	expect_refused(_metadata, r, r->buf, ~0ull, 0, EINVAL, "~0 bytes");
	expect_refused(_metadata, r, (void *)(~0ull - PAGE + 1), 2 * PAGE, 0, EINVAL,
		       "2 pages from the last");
	expect_refused(_metadata, r, (void *)~0ull, 1, 0, EINVAL, "the last byte");
}

/* ib_check_mr_access(): bits outside IB_ACCESS_SUPPORTED. */
TEST_F(mr, unknown_access_bits_are_einval)
{
	struct regs *r = &self->r;

	expect_refused(_metadata, r, r->buf, PAGE, 1 << 10, EINVAL, "bit 10");
	expect_refused(_metadata, r, r->buf, PAGE, LOCAL_WRITE | 1 << 19, EINVAL, "bit 19");
	expect_refused(_metadata, r, r->buf, PAGE, RDMA_ACCESS | 1u << 31, EINVAL, "bit 31");
}

/* ib_check_mr_access(): what the device does not offer. */
TEST_F(mr, on_demand_paging_and_flush_are_eopnotsupp)
{
	struct regs *r = &self->r;

	expect_refused(_metadata, r, r->buf, PAGE, LOCAL_WRITE | IBV_ACCESS_ON_DEMAND,
		       EOPNOTSUPP, "ON_DEMAND");
	expect_refused(_metadata, r, r->buf, PAGE, LOCAL_WRITE | IBV_ACCESS_FLUSH_GLOBAL,
		       EOPNOTSUPP, "FLUSH_GLOBAL");
}

/* ib_check_mr_access(): a peer's write or atomic needs the local write. */
TEST_F(mr, remote_write_or_atomic_without_local_write_is_einval)
{
	struct regs *r = &self->r;

	expect_refused(_metadata, r, r->buf, PAGE, IBV_ACCESS_REMOTE_WRITE, EINVAL,
		       "REMOTE_WRITE");
	expect_refused(_metadata, r, r->buf, PAGE,
		       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, EINVAL,
		       "REMOTE_WRITE | REMOTE_READ");
	expect_refused(_metadata, r, r->buf, PAGE, IBV_ACCESS_REMOTE_ATOMIC, EINVAL,
		       "REMOTE_ATOMIC");
}

TEST_F(mr, remote_read_registers_without_local_write)
{
	struct regs *r = &self->r;
	struct ibv_mr *a = reg(r, 0, PAGE, IBV_ACCESS_REMOTE_READ);
	struct ibv_mr *b = reg(r, 0, PAGE, RDMA_ACCESS | IBV_ACCESS_REMOTE_READ);

	EXPECT_NE(NULL, a);
	EXPECT_NE(NULL, b);
}

TEST_F(mr, unmapped_range_is_efault)
{
	struct regs *r = &self->r;

	/* the second half of the fixture's pages gone: a hole after them */
	ASSERT_EQ(0, munmap(r->buf + BUF_BYTES / 2, BUF_BYTES / 2));
	expect_refused(_metadata, r, r->buf + BUF_BYTES / 2 - PAGE, 2 * PAGE, 0, EFAULT,
		       "into the hole");
	expect_refused(_metadata, r, r->buf + BUF_BYTES / 2, PAGE, 0, EFAULT,
		       "inside the hole");
	expect_refused(_metadata, r, NULL, PAGE, 0, EFAULT, "page 0");
	EXPECT_NE(NULL, reg(r, 0, BUF_BYTES / 2, 0)) TH_LOG("what is still mapped");
	/* the teardown unmaps the whole range again: harmless */
}

/* LOCAL_WRITE pins for writing (FOLL_WRITE): a read-only mapping refuses. */
TEST_F(mr, read_only_mapping_with_local_write_is_efault)
{
	struct regs *r = &self->r;
	uint8_t *ro = map_pages(2, PROT_READ);

	ASSERT_NE(NULL, ro);
	expect_refused(_metadata, r, ro, 2 * PAGE, LOCAL_WRITE, EFAULT, "LOCAL_WRITE");
	expect_refused(_metadata, r, ro, 2 * PAGE, RDMA_ACCESS, EFAULT, "RDMA");
	munmap(ro, 2 * PAGE);
}

TEST_F(mr, read_only_mapping_registers_without_local_write)
{
	struct regs *r = &self->r;

	ASSERT_EQ(0, mprotect(r->buf, 2 * PAGE, PROT_READ));
	EXPECT_NE(NULL, reg(r, 0, 2 * PAGE, 0)) TH_LOG("%s", strerror(errno));
	EXPECT_NE(NULL, reg(r, 0, 2 * PAGE, IBV_ACCESS_REMOTE_READ))
		TH_LOG("%s", strerror(errno));
}

TEST_F(mr, unaligned_range_pins_every_page_it_touches)
{
	struct regs *r = &self->r;
	struct gauges before;
	struct ibv_mr *a, *b;

	gauges(r, &before);
	ASSERT_LE(0, before.pinned_kb) TH_LOG("no VmPin in /proc/self/status");
	/* 200 bytes across a page boundary: two pages; 3 pages + 2 bytes: five */
	a = reg(r, PAGE - 100, 200, 0);
	b = reg(r, 5 * PAGE - 1, 3 * PAGE + 2, LOCAL_WRITE);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	expect_gauges(_metadata, r, &before, 2, 7, "two unaligned regions");
	ASSERT_EQ(0, ibv_dereg_mr(b));
	expect_gauges(_metadata, r, &before, 1, 2, "after one ibv_dereg_mr");
	ASSERT_EQ(0, ibv_dereg_mr(a));
	expect_gauges(_metadata, r, &before, 0, 0, "after both");
}

/* Closing a context destroys its regions: pages unpinned, MPTs back. */
TEST_F(mr, close_with_regions_alive_unpins_them)
{
	struct regs *r = &self->r;
	struct ibv_context *ctx = verbs_open_device();
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct gauges before;

	ASSERT_NE(NULL, pd);
	gauges(r, &before);
	ASSERT_NE(NULL, ibv_reg_mr(pd, r->buf, 4 * PAGE, 0));
	ASSERT_NE(NULL, ibv_reg_mr(pd, r->buf + 100, 2 * PAGE, LOCAL_WRITE));
	ASSERT_NE(NULL, ibv_reg_mr(pd, r->buf, BUF_BYTES, RDMA_ACCESS));
	expect_gauges(_metadata, r, &before, 3, 4 + 3 + BUF_PAGES, "three regions");
	/* no ibv_dereg_mr, no ibv_dealloc_pd: the kernel cleans up */
	ASSERT_EQ(0, ibv_close_device(ctx));
	expect_gauges(_metadata, r, &before, 0, 0, "after ibv_close_device");
}

/*
 * The misc device's 16 regions per context are no rule here: the limit is
 * the adapter's MPT table, every context's (max_mr). Registering to it
 * fails with ENOSPC, and a region deregistered makes room again.
 */
TEST_F_TIMEOUT(mr, mpt_table_is_the_limit_not_a_context_quota, 120)
{
	struct regs *r = &self->r;
	struct ibv_device_attr attr;
	struct ibv_mr **mrs;
	int n = 0, err = 0;

	ASSERT_EQ(0, ibv_query_device(r->ctx, &attr));
	ASSERT_LT(16, attr.max_mr);
	mrs = calloc(attr.max_mr + 1, sizeof(*mrs));
	ASSERT_NE(NULL, mrs);
	while (n <= attr.max_mr) {
		mrs[n] = reg(r, 0, PAGE, 0);
		if (!mrs[n]) {
			err = errno;
			break;
		}
		n++;
	}
	/* other contexts (and the kernel's ping) may hold some */
	EXPECT_LT(16, n);
	EXPECT_GE(attr.max_mr, n);
	EXPECT_EQ(ENOSPC, err) TH_LOG("after %d regions: %s", n, strerror(err));
	if (n) {
		EXPECT_EQ(0, ibv_dereg_mr(mrs[--n]));
		mrs[n] = reg(r, 0, PAGE, 0);
		EXPECT_NE(NULL, mrs[n]) TH_LOG("after a dereg: %s", strerror(errno));
		if (mrs[n])
			n++;
	}
	while (n)
		ibv_dereg_mr(mrs[--n]);
	free(mrs);
}

/*
 * A region's handle names it in its own context's file only: another
 * context's handle, given to this context's command file (the raw
 * DEREG_MR, which ibv_dereg_mr() sends on the region's own file), names
 * nothing there (ENOENT), and the region stays its owner's. The handle is taken
 * above every object this context has, so it cannot name one of them.
 */
static int dereg_by_handle(int cmd_fd, uint32_t handle)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_dereg_mr cmd;
	} c = {
		.hdr = { .command = IB_USER_VERBS_CMD_DEREG_MR, .in_words = sizeof(c) / 4 },
		.cmd = { .mr_handle = handle },
	};

	return write(cmd_fd, &c, sizeof(c)) == sizeof(c) ? 0 : errno;
}

TEST_F(mr, another_contexts_handle_names_nothing)
{
	struct regs *r = &self->r;
	struct ibv_context *ctx = verbs_open_device();
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_mr *mrs[8] = {};
	struct gauges before;
	int err;

	ASSERT_NE(NULL, pd);
	for (int i = 0; i < 8; i++) {
		mrs[i] = ibv_reg_mr(pd, r->buf, PAGE, 0);
		ASSERT_NE(NULL, mrs[i]);
	}
	gauges(r, &before);
	err = dereg_by_handle(r->ctx->cmd_fd, mrs[7]->handle);
	EXPECT_EQ(ENOENT, err) TH_LOG("handle %u on another context's file: %s",
				      mrs[7]->handle, strerror(err));
	expect_gauges(_metadata, r, &before, 0, 0, "after the refused DEREG_MR");
	EXPECT_EQ(0, ibv_dereg_mr(mrs[7])) TH_LOG("still its owner's");
	expect_gauges(_metadata, r, &before, -1, -1, "after its owner's ibv_dereg_mr");
	ibv_close_device(ctx);
}

/*
 * RLIMIT_MEMLOCK, in a child that lowers its own limit (and drops
 * CAP_IPC_LOCK if asked): umem.c charges a region's pages to pinned_vm
 * and refuses one that takes it over the limit with ENOMEM, unless the
 * process has CAP_IPC_LOCK; a limit of 0 without it is EPERM
 * (can_do_mlock()). A child has an mm of its own: its pinned_vm starts at 0.
 */
#define LIMIT_PAGES	8

/* In a child: @got is @want, else say so; 0 or 1. */
static int unexpected(struct ibv_mr *mr, int want, const char *what)
{
	int got = mr ? 0 : errno;

	if (got == want)
		return 0;
	printf("# %s: %s, expected %s\n", what, strerror(got), strerror(want));
	return 1;
}

/*
 * In a child: CAP_IPC_LOCK dropped if @drop, RLIMIT_MEMLOCK @pages pages
 * above what the process has pinned, a context's PD. NULL after saying why.
 */
static struct ibv_pd *limited_pd(int drop, long pages)
{
	struct ibv_context *ctx;
	struct rlimit rl;
	long pinned;
	int ret;

	if (drop) {
		ret = drop_cap_ipc_lock();
		if (ret || has_cap_ipc_lock()) {
			printf("# dropping CAP_IPC_LOCK: %s\n", strerror(-ret));
			return NULL;
		}
	}
	ctx = verbs_open_device();
	if (!ctx) {
		printf("# no context\n");
		return NULL;
	}
	pinned = vm_pinned_kb();
	if (pinned < 0) {
		printf("# no VmPin in /proc/self/status\n");
		return NULL;
	}
	rl.rlim_cur = pinned * 1024 + pages * PAGE;
	rl.rlim_max = rl.rlim_cur;
	if (setrlimit(RLIMIT_MEMLOCK, &rl)) {
		printf("# setrlimit: %s\n", strerror(errno));
		return NULL;
	}
	return ibv_alloc_pd(ctx);
}

static int memlock_exceeded(uint8_t *buf)
{
	struct ibv_pd *pd = limited_pd(1, LIMIT_PAGES);

	if (!pd)
		return 2;
	if (unexpected(ibv_reg_mr(pd, buf, 4 * PAGE, 0), 0, "4 pages of 8") ||
	    unexpected(ibv_reg_mr(pd, buf, 8 * PAGE, 0), ENOMEM, "8 more pages"))
		return 1;
	ibv_close_device(pd->context);
	pd = limited_pd(1, LIMIT_PAGES);
	if (!pd)
		return 2;
	return unexpected(ibv_reg_mr(pd, buf, (LIMIT_PAGES + 1) * PAGE, 0), ENOMEM,
			  "9 pages in one region");
}

TEST_F(mr, memlock_limit_is_enomem_without_cap_ipc_lock)
{
	struct regs *r = &self->r;

	EXPECT_EQ(0, in_child(memlock_exceeded, r->buf));
}

static int memlock_given_back(uint8_t *buf)
{
	struct ibv_pd *pd = limited_pd(1, LIMIT_PAGES);
	struct ibv_mr *a;

	if (!pd)
		return 2;
	a = ibv_reg_mr(pd, buf, 4 * PAGE, 0);
	if (unexpected(a, 0, "4 pages of 8") ||
	    unexpected(ibv_reg_mr(pd, buf, 5 * PAGE, 0), ENOMEM, "5 more") ||
	    /* the refused registration charged nothing */
	    unexpected(ibv_reg_mr(pd, buf, 4 * PAGE, 0), 0, "4 more, to the limit") ||
	    unexpected(ibv_reg_mr(pd, buf, PAGE, 0), ENOMEM, "one page above it"))
		return 1;
	if (ibv_dereg_mr(a)) {
		printf("# ibv_dereg_mr: %s\n", strerror(errno));
		return 1;
	}
	if (unexpected(ibv_reg_mr(pd, buf, 4 * PAGE, 0), 0, "4 pages again after a dereg"))
		return 1;
	/* closing the context gives back the rest */
	ibv_close_device(pd->context);
	pd = limited_pd(1, LIMIT_PAGES);
	if (!pd)
		return 2;
	return unexpected(ibv_reg_mr(pd, buf, LIMIT_PAGES * PAGE, 0), 0,
			  "8 pages after ibv_close_device");
}

TEST_F(mr, memlock_charge_is_given_back_by_dereg_and_close)
{
	struct regs *r = &self->r;

	EXPECT_EQ(0, in_child(memlock_given_back, r->buf));
}

static int memlock_zero(uint8_t *buf)
{
	struct ibv_context *ctx;
	struct rlimit rl = { 0, 0 };
	struct ibv_pd *pd;

	if (drop_cap_ipc_lock() || has_cap_ipc_lock())
		return 2;
	ctx = verbs_open_device();
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd || setrlimit(RLIMIT_MEMLOCK, &rl))
		return 2;
	return unexpected(ibv_reg_mr(pd, buf, PAGE, 0), EPERM, "a page with a limit of 0");
}

TEST_F(mr, memlock_limit_of_zero_is_eperm_without_cap_ipc_lock)
{
	struct regs *r = &self->r;

	EXPECT_EQ(0, in_child(memlock_zero, r->buf));
}

static int memlock_exempt(uint8_t *buf)
{
	struct ibv_pd *pd = limited_pd(0, LIMIT_PAGES);

	if (!pd)
		return 2;
	return unexpected(ibv_reg_mr(pd, buf, BUF_BYTES, 0), 0,
			  "16 pages over a limit of 8, with CAP_IPC_LOCK");
}

TEST_F(mr, cap_ipc_lock_is_exempt_from_the_memlock_limit)
{
	struct regs *r = &self->r;

	if (!has_cap_ipc_lock())
		SKIP(return, "the test runs without CAP_IPC_LOCK");
	EXPECT_EQ(0, in_child(memlock_exempt, r->buf));
}

TEST_HARNESS_MAIN
