// SPDX-License-Identifier: GPL-2.0
/*
 * Lifetimes on the RDMA device (mlx4_bf<N>): the adapter unbound from
 * mlx4_bf under processes that hold verbs contexts, and bound again.
 *
 * The RDMA core disassociates every context at unbind (mlx4_bf has
 * disassociate_ucontext): ib_uverbs_free_hw_resources() in
 * drivers/infiniband/core/uverbs_main.c clears the driver's uverbs methods
 * first (uverbs_disassociate_api_pre()), so QP_POST fails with EIO
 * (ib_uverbs_run_method() in uverbs_ioctl.c), then destroys each file's
 * objects and zaps its mappings (uverbs_destroy_ufile_hw(),
 * uverbs_user_mmap_disassociate()). What a process must see of that:
 *
 * - QP_POST and every verbs call that reaches the kernel fail with EIO,
 *   IBV_EVENT_DEVICE_FATAL arrives, every object is still destroyed and
 *   the context closed without error; after a rebind a new context posts;
 * - libmlx4's UAR and BlueFlame pages stop mapping BAR2: their PTEs are
 *   gone, and a later access faults in one zeroed page of RAM that both
 *   share (rdma_umap_fault()), so nothing reaches the adapter;
 * - nothing stays pinned or held while the process still runs: VmPin is
 *   back where it was, the adapter holds no MPT, queue, ICM or firmware
 *   page;
 * - processes posting through QP_POST in a loop see EIO and exit cleanly;
 * - a teardown command that fails, or never completes, at unbind still
 *   ends with the adapter holding nothing (given back, or the adapter
 *   reset), nothing pinned, no DMA tried without bus mastering, and the
 *   adapter working after the rebind;
 * - contexts opened (libmlx4 maps its pages) racing unbind: no page a
 *   process mapped before or while the adapter went reaches BAR2 after;
 *   contexts opened, posted on and closed racing unbind and bind leave a
 *   kernel that works.
 *
 * Ported from the misc device's mlx4_bf_unbind_test, every rule with a
 * verbs counterpart. Dropped: the misc context's area (its kernel memory
 * mapped into the process: the receive CQ and doorbell record) zapped at
 * unbind: the RDMA device maps no kernel memory into a process, its queues
 * and CQs being libmlx4's own; and the ping-pong and poll() woken by the
 * unbind, which the provider boot does with ibv_rc_pingpong -e and
 * ibv_hold (tools/vm/provider/lifecycle.sh).
 *
 * Every test leaves the adapter bound again (the fixture's teardown runs
 * in the harness's process, after the test's process ended however it
 * ended; a destructor does it once more for a test killed on timeout).
 */
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "mlx4_bf_model.h"
#include "mlx4_bf_verbs.h"

#define IB_CLASS	"/sys/class/infiniband"
#define POSTERS		3
/* How long a bind may take to bring the RDMA device's port up. */
#define BIND_WAIT_MS	30000

/* The adapter bound to mlx4_bf when the program started ("" if none). */
static char adapter[64];

static void __attribute__((constructor)) find_adapter(void)
{
	if (bound_device(adapter, sizeof(adapter)))
		adapter[0] = '\0';
}

static int write_sysfs(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -errno;
}

/* Whether @bdf has a driver (mlx4_bf: nothing else claims the model). */
static int is_bound(const char *bdf)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver", bdf);
	return !access(path, F_OK);
}

/*
 * Whether an mlx4_bf<N> RDMA device is registered, and with @active, whether
 * its port 1 is ACTIVE (a QP needs the port's LID to connect to itself).
 */
static int rdma_device_up(int active)
{
	char path[300], state[64] = "";
	struct dirent *de;
	DIR *dir = opendir(IB_CLASS);
	int up = 0;
	FILE *f;

	if (!dir)
		return 0;
	while (!up && (de = readdir(dir))) {
		if (strncmp(de->d_name, VERBS_DEV_PREFIX, strlen(VERBS_DEV_PREFIX)))
			continue;
		if (!active) {
			up = 1;
			break;
		}
		snprintf(path, sizeof(path), IB_CLASS "/%s/ports/1/state", de->d_name);
		f = fopen(path, "r");
		if (f) {
			up = fgets(state, sizeof(state), f) && strstr(state, "ACTIVE");
			fclose(f);
		}
	}
	closedir(dir);
	return up;
}

/* Unbinds the adapter: returns once mlx4_bf's remove() has. 0 or -errno. */
static int unbind_adapter(void)
{
	return write_sysfs(DRIVER_DIR "/unbind", adapter);
}

/*
 * Binds the adapter again if it is not bound and waits for its RDMA device's
 * port to come up; 0, or -1 if it did not within BIND_WAIT_MS.
 */
static int bind_adapter(void)
{
	if (!is_bound(adapter) && write_sysfs(DRIVER_DIR "/bind", adapter))
		return -1;
	for (int ms = 0; ms < BIND_WAIT_MS; ms += 10) {
		if (rdma_device_up(1))
			return 0;
		usleep(10000);
	}
	return -1;
}

/* The suite's next program needs the adapter: bound again, whatever ended this one. */
static void __attribute__((destructor)) leave_bound(void)
{
	if (adapter[0] && !is_bound(adapter))
		bind_adapter();
}

FIXTURE(unbind)
{
	struct verbs v;
	struct model model;
	int have_model;
	uint8_t wqe[MAX_WQE + 64];
};

FIXTURE_SETUP(unbind)
{
	if (!adapter[0] || !verbs_device_present())
		SKIP(return, NO_VERBS_DEVICE);
	/*
	 * The port too, whoever bound the adapter last: a write to self goes
	 * nowhere before the link is up.
	 */
	ASSERT_EQ(0, bind_adapter()) TH_LOG("port 1 of the RDMA device is not ACTIVE");
	self->have_model = !model_open(&self->model);
	ASSERT_EQ(0, verbs_open(&self->v));
}

/*
 * In the harness's process, after the test's own ended (its contexts closed
 * with it): the next test, and the suite's next program, need the adapter.
 * No TH_LOG here: a failed ASSERT in the test's process aborts it with the
 * shared _metadata->trigger still set, which would print the log line as if
 * this check had failed too.
 */
FIXTURE_TEARDOWN_PARENT(unbind)
{
	EXPECT_EQ(0, bind_adapter());
}

/* One inline RDMA write of 16 bytes (@seed + i) into @v's sink, through QP_POST. */
static int post_write(struct verbs *v, uint8_t *wqe, uint8_t seed)
{
	int len = build_rdma_write(wqe, 16, seed, verbs_sink_addr(v), v->sink_mr->rkey);

	return verbs_post(v, verbs_put_wqe(v, wqe, len), len, 0, NULL);
}

/* Posts through QP_POST and checks the write landed: the context works. */
static void post_and_land(struct __test_metadata *_metadata, struct verbs *v, uint8_t *wqe,
			  uint8_t seed)
{
	uint8_t want[16];

	memset(v->sink, 0, sizeof(want));
	ASSERT_EQ(0, post_write(v, wqe, seed)) TH_LOG("post %u", seed);
	ASSERT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(v->cq)) TH_LOG("post %u", seed);
	rdma_write_pattern(want, sizeof(want), seed);
	EXPECT_EQ(0, memcmp(v->sink, want, sizeof(want))) TH_LOG("post %u", seed);
}

/* The type of the next async event of @ctx within @ms, or -1 if none came. */
static int next_async_event(struct ibv_context *ctx, int ms)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	int type;

	if (poll(&p, 1, ms) != 1 || ibv_get_async_event(ctx, &ev))
		return -1;
	type = ev.event_type;
	ibv_ack_async_event(&ev);
	return type;
}

/*
 * The kernel's answer to the calls a process still makes with a context
 * whose device went, QP_POST first; then the process closes it all, and a
 * new context posts once the adapter is back.
 */
TEST_F(unbind, a_context_sees_the_device_go_then_a_new_one_posts)
{
	struct ibv_qp_attr to_err = { .qp_state = IBV_QPS_ERR };
	struct model_posts before, after;
	struct ibv_context *ctx = self->v.ctx;
	uint8_t *page = map_pages(1, PROT_READ | PROT_WRITE);

	ASSERT_NE(NULL, page);
	post_and_land(_metadata, &self->v, self->wqe, 1);
	ASSERT_EQ(0, unbind_adapter());
	EXPECT_FALSE(rdma_device_up(0)) TH_LOG("an " VERBS_DEV_PREFIX " device after the unbind");

	if (self->have_model)
		model_posts(&self->model, &before);
	EXPECT_EQ(EIO, post_write(&self->v, self->wqe, 2));
	if (self->have_model) {
		model_posts(&self->model, &after);
		EXPECT_EQ(0, memcmp(&before, &after, sizeof(after))) TH_LOG("the post reached the adapter");
	}
	EXPECT_EQ(IBV_EVENT_DEVICE_FATAL, next_async_event(ctx, 5000));
	errno = 0;
	EXPECT_EQ(NULL, ibv_alloc_pd(ctx));
	EXPECT_EQ(EIO, errno);
	errno = 0;
	EXPECT_EQ(NULL, ibv_create_cq(ctx, VERBS_CQ_ENTRIES, NULL, NULL, 0));
	EXPECT_EQ(EIO, errno);
	errno = 0;
	EXPECT_EQ(NULL, ibv_reg_mr(self->v.pd, page, PAGE, IBV_ACCESS_LOCAL_WRITE));
	EXPECT_EQ(EIO, errno);
	EXPECT_EQ(EIO, ibv_modify_qp(self->v.qp, &to_err, IBV_QP_STATE));
	/* no new mapping of the context's pages (ib_uverbs_mmap()) */
	errno = 0;
	EXPECT_EQ(MAP_FAILED, mmap(NULL, PAGE, PROT_WRITE, MAP_SHARED, ctx->cmd_fd, 0));
	EXPECT_EQ(EIO, errno);

	EXPECT_EQ(0, verbs_close(&self->v)) TH_LOG("destroying the objects after the unbind");

	ASSERT_EQ(0, bind_adapter());
	ASSERT_EQ(0, verbs_open(&self->v));
	post_and_land(_metadata, &self->v, self->wqe, 3);
	EXPECT_EQ(0, verbs_close(&self->v));
	munmap(page, PAGE);
}

/*
 * Whether a present user PTE maps @addr in this process, from the kernel's
 * page-table dump (x86: a non-present range is printed without flags): 1,
 * 0, or -1 without the dump.
 */
static int user_pte(const void *addr)
{
	char line[256];
	int found = page_table_line(addr, line, sizeof(line));

	return found < 0 ? -1 : found && strstr(line, " USR ");
}

/* libmlx4's UAR and BlueFlame pages, in @uar and @bf; 0, or -1 if not mapped. */
static int libmlx4_pages(uint8_t **uar, uint8_t **bf)
{
	*uar = uverbs_mapping(UAR_PGOFF * PAGE);
	*bf = uverbs_mapping(BF_PGOFF * PAGE);
	return *uar && *bf ? 0 : -1;
}

/*
 * libmlx4's two pages of BAR2 are mapped from ibv_open_device() on
 * (rdma_user_mmap_io() fills the PTEs at mmap()); the unbind zaps them
 * (uverbs_user_mmap_disassociate()) while the process keeps the VMAs.
 */
TEST_F(unbind, libmlx4_pages_are_zapped_at_unbind)
{
	uint8_t *uar, *bf;

	if (access(PAGE_TABLES, R_OK))
		SKIP(return, "no " PAGE_TABLES " (x86, CONFIG_PTDUMP_DEBUGFS)");
	ASSERT_EQ(0, libmlx4_pages(&uar, &bf)) TH_LOG("no uverbs pages in /proc/self/maps");
	EXPECT_EQ(1, user_pte(uar)) TH_LOG("the UAR page before the unbind");
	EXPECT_EQ(1, user_pte(bf)) TH_LOG("the BlueFlame page before the unbind");
	ASSERT_EQ(0, unbind_adapter());
	EXPECT_EQ(0, user_pte(uar)) TH_LOG("the UAR page after the unbind");
	EXPECT_EQ(0, user_pte(bf)) TH_LOG("the BlueFlame page after the unbind");
	/* the VMAs stay, without their pages */
	EXPECT_EQ(0, libmlx4_pages(&uar, &bf));
	EXPECT_EQ(0, verbs_close(&self->v));
}

#ifdef __s390x__
/*
 * s390x, where libmlx4 writes its pages through s390_pci_mmio_write(): the
 * system call faults the page in and, without MIO (QEMU's zPCI), finds it
 * no zPCI iomap address but RAM: EFAULT (arch/s390/pci/pci_mmio.c).
 */
static void stores_after_unbind(struct __test_metadata *_metadata, uint8_t *uar, uint8_t *bf)
{
	static const uint64_t mark = 0x6d6c7834bf00beefULL;

	errno = 0;
	EXPECT_EQ(-1, syscall(__NR_s390_pci_mmio_write, (unsigned long)(uar + 0x10), &mark, 8));
	EXPECT_EQ(EFAULT, errno) TH_LOG("the UAR page");
	errno = 0;
	EXPECT_EQ(-1, syscall(__NR_s390_pci_mmio_write, (unsigned long)(bf + 0x100), &mark, 8));
	EXPECT_EQ(EFAULT, errno) TH_LOG("the BlueFlame page");
}

/* One 8-byte store to @p, a page of libmlx4's; whatever happens to it. */
static void page_store(uint8_t *p)
{
	static const uint64_t zero;

	syscall(__NR_s390_pci_mmio_write, (unsigned long)p, &zero, 8);
}
#else
static sigjmp_buf bus_error;

static void on_sigbus(int sig)
{
	(void)sig;
	siglongjmp(bus_error, 1);
}

/* Copies @len bytes (a multiple of 8) from @src to @dst, 8 at a time; -1 on SIGBUS. */
static int guarded_copy(void *dst, const void *src, size_t len)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	int bus;

	sigaction(SIGBUS, &sa, &old);
	bus = sigsetjmp(bus_error, 1);
	if (!bus)
		for (size_t i = 0; i < len; i += 8)
			__atomic_store_n((uint64_t *)dst + i / 8,
					 __atomic_load_n((const uint64_t *)src + i / 8,
							 __ATOMIC_RELAXED), __ATOMIC_RELAXED);
	sigaction(SIGBUS, &old, NULL);
	return bus ? -1 : 0;
}

static int all_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return 0;
	return 1;
}

/*
 * Elsewhere libmlx4 loads and stores: both pages read zeros, and a store
 * through one is read back through the other (one page of RAM).
 */
static void stores_after_unbind(struct __test_metadata *_metadata, uint8_t *uar, uint8_t *bf)
{
	static const uint64_t mark = 0x6d6c7834bf00beefULL;
	uint8_t got[PAGE];
	uint64_t back = 0;

	ASSERT_EQ(0, guarded_copy(got, uar, PAGE)) TH_LOG("SIGBUS loading the UAR page");
	EXPECT_TRUE(all_zero(got, PAGE)) TH_LOG("the UAR page after the unbind");
	ASSERT_EQ(0, guarded_copy(got, bf, PAGE)) TH_LOG("SIGBUS loading the BlueFlame page");
	EXPECT_TRUE(all_zero(got, PAGE)) TH_LOG("the BlueFlame page after the unbind");
	/* the 8 bytes around the send doorbell (0x14), then a BlueFlame buffer's */
	ASSERT_EQ(0, guarded_copy(uar + 0x10, &mark, 8)) TH_LOG("SIGBUS storing to the UAR page");
	ASSERT_EQ(0, guarded_copy(&back, bf + 0x10, 8));
	EXPECT_EQ(mark, back) TH_LOG("the UAR and BlueFlame pages are not one page of RAM");
	ASSERT_EQ(0, guarded_copy(bf + 0x100, &mark, 8)) TH_LOG("SIGBUS storing to the BF page");
	if (!access(PAGE_TABLES, R_OK))
		EXPECT_EQ(1, user_pte(uar)) TH_LOG("the fault mapped no page");
}

/* One 8-byte store to @p, a page of libmlx4's; a SIGBUS is no failure here. */
static void page_store(uint8_t *p)
{
	static const uint64_t zero;

	guarded_copy(p, &zero, 8);
}
#endif

/*
 * After the zap, an access faults in rdma_umap_fault(): libmlx4 maps its
 * pages writable (PROT_WRITE), so both get the file's one disassociate
 * page, zeroed RAM; the zero page and SIGBUS are for read-only VMAs and
 * VMAs without the core's tracking. Whatever the process then writes to
 * its pages, the adapter sees none of it.
 */
TEST_F(unbind, a_zapped_page_faults_in_zeroed_ram_not_the_bar)
{
	struct model_posts before, after;
	uint8_t *uar, *bf;

	ASSERT_EQ(0, libmlx4_pages(&uar, &bf)) TH_LOG("no uverbs pages in /proc/self/maps");
	ASSERT_EQ(0, unbind_adapter());
	if (self->have_model)
		model_posts(&self->model, &before);
	stores_after_unbind(_metadata, uar, bf);
	if (self->have_model) {
		model_posts(&self->model, &after);
		EXPECT_EQ(before.bar2_writes, after.bar2_writes) TH_LOG("a store reached BAR2");
		EXPECT_EQ(0, memcmp(&before, &after, sizeof(after)));
	}
	EXPECT_EQ(0, verbs_close(&self->v));
}

/*
 * The unbind destroys the process's objects while it still runs, and with
 * them the umems: the pages ib_umem_get() pinned for the region and
 * libmlx4's queues are unpinned, mm->pinned_vm (VmPin) back where it was
 * before verbs_open().
 */
TEST_F(unbind, pinned_pages_are_released_at_unbind)
{
	long before, open;

	/* the fixture's context is open: start from none */
	ASSERT_EQ(0, verbs_close(&self->v));
	before = vm_pinned_kb();
	ASSERT_LE(0, before) TH_LOG("no VmPin in /proc/self/status");
	ASSERT_EQ(0, verbs_open(&self->v));
	open = vm_pinned_kb();
	/* at least the region's page */
	EXPECT_LE(before + SINK_BYTES / 1024, open);
	ASSERT_EQ(0, unbind_adapter());
	EXPECT_EQ(before, vm_pinned_kb())
		TH_LOG("VmPin %ld kB after the unbind, the context still open: %ld before it",
		       vm_pinned_kb(), open);
	EXPECT_EQ(0, verbs_close(&self->v));
	EXPECT_EQ(before, vm_pinned_kb()) TH_LOG("VmPin after closing");
}

/*
 * With a context holding an MR, a CQ and a QP in RTS, the unbind leaves the
 * adapter holding nothing: no MPT, no EQ, CQ or QP, the firmware off with
 * no ICM or firmware page (the model's gauges).
 */
TEST_F(unbind, the_adapter_holds_nothing_after_unbind)
{
	uint32_t version;

	if (!self->have_model)
		SKIP(return, NO_ANALYZER);
	version = model_version(&self->model);
	if (version < 7)
		SKIP(return, "the model has no firmware gauges (diag version 7)");
	EXPECT_LT(0, model_read(&self->model, MODEL_MPTS));
	EXPECT_LT(0, model_read(&self->model, MODEL_LIVE));
	ASSERT_EQ(0, unbind_adapter());
	EXPECT_EQ(0, model_read(&self->model, MODEL_MPTS));
	EXPECT_EQ(0, model_read(&self->model, MODEL_LIVE));
	EXPECT_EQ(0, model_read(&self->model, MODEL_FW_PHASE));
	EXPECT_EQ(0, model_read(&self->model, MODEL_FW_PAGES));
	EXPECT_EQ(0, model_read(&self->model, MODEL_ICM_PAGES));
	EXPECT_EQ(0, verbs_close(&self->v));
}

/*
 * A poster: its own context, QP_POST after QP_POST (each waited for) until
 * one fails. Exits 0 if that was EIO after at least one post went through
 * and everything is then destroyed without error; 1 otherwise. Tells the
 * parent through @ready once its first post went through.
 */
static int poster(int ready)
{
	uint8_t wqe[MAX_WQE + 64];
	struct verbs v;
	long posts = 0;
	int err;

	if (verbs_open(&v))
		return 1;
	while (!(err = post_write(&v, wqe, (uint8_t)posts))) {
		if (++posts == 1 && write(ready, "x", 1) != 1)
			return 1;
		/* a completion the unbind took is no error: the next post says */
		verbs_wait_cqe(v.cq);
	}
	if (err != EIO || !posts) {
		printf("# pid %d: %s after %ld posts\n", getpid(), strerror(err), posts);
		return 1;
	}
	err = verbs_close(&v);
	if (err)
		printf("# pid %d: closing: %s\n", getpid(), strerror(err));
	return !!err;
}

/* How many posters said they posted within 20 s (each holds the pipe open). */
static int posters_ready(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n = 0;
	char c;

	while (n < POSTERS && poll(&p, 1, 20000) == 1 && read(fd, &c, 1) == 1)
		n++;
	return n;
}

TEST_F_TIMEOUT(unbind, posters_see_eio_and_exit_cleanly, 120)
{
	pid_t pids[POSTERS];
	int ready[2], status;

	ASSERT_EQ(0, verbs_close(&self->v));
	ASSERT_EQ(0, pipe(ready));
	for (int i = 0; i < POSTERS; i++) {
		pids[i] = fork();
		ASSERT_LE(0, pids[i]);
		if (!pids[i])
			_exit(poster(ready[1]));
	}
	ASSERT_EQ(POSTERS, posters_ready(ready[0])) TH_LOG("a poster never posted");
	/* all of them in their loops */
	usleep(50000);
	ASSERT_EQ(0, unbind_adapter());
	for (int i = 0; i < POSTERS; i++) {
		ASSERT_EQ(pids[i], waitpid(pids[i], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("poster %d: %s %d", i, WIFEXITED(status) ? "exit" : "signal",
			       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	}
}

/* mlx4's opcodes of the teardown commands the model is told to break. */
#define OP_HW2SW_CQ	0x17
#define OP_2RST_QP	0x21

/*
 * Unbind with a context's QP in RTS, its CQ and region in the adapter, the
 * model told to break one teardown command (@mode: fail it, or never
 * complete it). The core destroys the context's objects first; what the
 * adapter keeps of a failed destroy (a CQ whose HW2SW_CQ failed) stays
 * pinned, and the driver's own teardown then takes it back or, if the
 * adapter does not give it up (a stalled command leaves the HCR busy),
 * resets the adapter: at most one reset, one for a stall, and either way
 * no DMA tried without bus mastering, nothing left in the adapter and
 * nothing pinned while the process still runs; the adapter works after
 * the rebind.
 */
static void unbind_with_a_broken_teardown(struct __test_metadata *_metadata,
					  struct _test_data_unbind *self, uint16_t opcode,
					  int mode)
{
	uint64_t resets, no_master;
	struct model *m = &self->model;
	long pinned;

	if (!self->have_model)
		SKIP(return, NO_ANALYZER);
	if (model_version(m) < 7)
		SKIP(return, "the model has no command faults or firmware gauges (diag version 7)");
	/* what this process pins with no context open */
	ASSERT_EQ(0, verbs_close(&self->v));
	pinned = vm_pinned_kb();
	ASSERT_LE(0, pinned) TH_LOG("no VmPin in /proc/self/status");
	ASSERT_EQ(0, verbs_open(&self->v));
	post_and_land(_metadata, &self->v, self->wqe, 1);
	resets = model_read(m, MODEL_RESETS);
	no_master = model_read(m, MODEL_NO_MASTER_DMA);
	model_cmd_fault(m, opcode, mode);

	ASSERT_EQ(0, unbind_adapter());
	EXPECT_EQ(0, (uint32_t)model_read(m, MODEL_CMD_FAULT)) TH_LOG("the fault fired");
	/* a stall: one reset; a failure: the teardown's HW2SW_CQ may take the CQ back */
	EXPECT_LE(resets + (mode == CMD_FAULT_STALL), model_read(m, MODEL_RESETS))
		TH_LOG("resets at unbind");
	EXPECT_GE(resets + 1, model_read(m, MODEL_RESETS)) TH_LOG("one reset at most");
	EXPECT_EQ(0, model_read(m, MODEL_LIVE)) TH_LOG("nothing left in the adapter");
	EXPECT_EQ(0, model_read(m, MODEL_MPTS)) TH_LOG("no MPT left in the adapter");
	EXPECT_EQ(0, model_read(m, MODEL_FW_PAGES) + model_read(m, MODEL_ICM_PAGES))
		TH_LOG("the firmware's pages taken back");
	EXPECT_EQ(no_master, model_read(m, MODEL_NO_MASTER_DMA))
		TH_LOG("no DMA tried without bus mastering");
	EXPECT_EQ(pinned, vm_pinned_kb()) TH_LOG("VmPin after the unbind, the context open");
	/* disarmed, whether it fired or not */
	model_cmd_fault(m, 0, 0);
	EXPECT_EQ(EIO, post_write(&self->v, self->wqe, 2));
	EXPECT_EQ(0, verbs_close(&self->v));

	ASSERT_EQ(0, bind_adapter());
	ASSERT_EQ(0, verbs_open(&self->v));
	post_and_land(_metadata, &self->v, self->wqe, 3);
	EXPECT_EQ(0, verbs_close(&self->v));
}

TEST_F(unbind, a_failed_hw2sw_cq_at_unbind_leaves_nothing_behind)
{
	unbind_with_a_broken_teardown(_metadata, self, OP_HW2SW_CQ, CMD_FAULT_FAIL);
}

/* The command times out (10 s); the later ones find the HCR busy. */
TEST_F_TIMEOUT(unbind, a_2rst_qp_that_never_completes_at_unbind_resets_the_adapter, 90)
{
	unbind_with_a_broken_teardown(_metadata, self, OP_2RST_QP, CMD_FAULT_STALL);
}

/* Binds the adapter and waits (10 s at most) for its RDMA device; 0 or -1. */
static int bind_quickly(void)
{
	if (write_sysfs(DRIVER_DIR "/bind", adapter))
		return -1;
	for (int ms = 0; ms < 10000; ms += 10) {
		if (rdma_device_up(0))
			return 0;
		usleep(10000);
	}
	return -1;
}

#define MAPPERS		2
#define RACE_ROUNDS	20
#define RACE_MIN_ROUNDS	5
#define RACE_BUDGET_S	60
#define LIVE_CONTEXTS	4
/* The uverbs pages a mapper's live contexts have, at most. */
#define MAX_PAGES	(2 * LIVE_CONTEXTS + 8)

/* What the parent and the mappers share (MAP_SHARED anonymous memory). */
struct race {
	int unbound;			/* the round whose unbind has completed */
	int bound;			/* the round whose rebind has completed */
	int done;			/* the last round (the parent's budget) */
	int opened_in[MAPPERS];		/* the last round a mapper opened a context in */
	int checked[MAPPERS];		/* the last round a mapper checked */
	int opened;			/* contexts opened, over all rounds */
	int stored;			/* pages stored to after an unbind */
};

/* The start of every uverbs page this process maps, into @at; how many. */
static int uverbs_pages(uint8_t **at, int max)
{
	unsigned long start;
	char line[512];
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f))
		if (strstr(line, "/dev/infiniband/uverbs") && sscanf(line, "%lx-", &start) == 1)
			at[n++] = (uint8_t *)start;
	fclose(f);
	return n;
}

/*
 * A mapper: opens contexts (libmlx4 maps each one's UAR and BlueFlame
 * page at ibv_open_device()) and closes the oldest for each new one, until
 * the parent says the adapter is unbound (the unbind itself takes a while,
 * in which opens fail); then it stores to every page it still maps,
 * whenever its mmap() happened, and closes them all. The parent counts
 * the adapter's BAR2 writes around those stores.
 */
static void mapper(struct race *r, int me)
{
	struct ibv_context *live[LIVE_CONTEXTS] = { NULL };
	uint8_t *pages[MAX_PAGES];
	int next = 0, n;

	for (int round = 1;; round++) {
		while (__atomic_load_n(&r->unbound, __ATOMIC_ACQUIRE) < round) {
			/* a context goes only for a new one: not while the device does */
			struct ibv_context *c = verbs_open_device(), **oldest;

			if (!c)
				continue;
			oldest = &live[next++ % LIVE_CONTEXTS];
			if (*oldest)
				ibv_close_device(*oldest);
			*oldest = c;
			__atomic_fetch_add(&r->opened, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&r->opened_in[me], round, __ATOMIC_RELEASE);
		}
		n = uverbs_pages(pages, MAX_PAGES);
		for (int i = 0; i < n; i++)
			page_store(pages[i] + 0x100);
		__atomic_fetch_add(&r->stored, n, __ATOMIC_RELAXED);
		for (int i = 0; i < LIVE_CONTEXTS; i++) {
			if (live[i])
				ibv_close_device(live[i]);
			live[i] = NULL;
		}
		__atomic_store_n(&r->checked[me], round, __ATOMIC_RELEASE);
		while (__atomic_load_n(&r->bound, __ATOMIC_ACQUIRE) < round)
			usleep(1000);
		if (__atomic_load_n(&r->done, __ATOMIC_ACQUIRE) == round)
			_exit(0);
	}
}

/*
 * Waits (10 s at most) until every mapper has opened a context in @round:
 * the unbind then finds contexts whose pages are mapped, as well as opens
 * under way.
 */
static void mappers_opened(struct race *r, int round)
{
	for (int ms = 0; ms < 10000; ms++) {
		int all = 1;

		for (int i = 0; i < MAPPERS; i++)
			all &= __atomic_load_n(&r->opened_in[i], __ATOMIC_ACQUIRE) >= round;
		if (all)
			return;
		usleep(1000);
	}
}

/*
 * ibv_open_device()'s mmap() of libmlx4's two pages, and the process's use
 * of them, racing unbind, round after round: no page a process mapped
 * before, or while, the adapter was unbound reaches it afterwards (the
 * adapter counts no BAR2 write while the mappers store to every page they
 * still have).
 */
TEST_F_TIMEOUT(unbind, bar_page_mappings_racing_unbind_never_outlive_it, 180)
{
	struct race *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct model_posts before, after;
	struct timespec t0, t1;
	pid_t pids[MAPPERS];
	int status, round;

	if (!self->have_model)
		SKIP(return, NO_ANALYZER);
	ASSERT_EQ(0, verbs_close(&self->v));
	ASSERT_NE(MAP_FAILED, r);
	memset(r, 0, sizeof(*r));
	for (int i = 0; i < MAPPERS; i++) {
		pids[i] = fork();
		ASSERT_LE(0, pids[i]);
		if (!pids[i])
			mapper(r, i);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	t1 = t0;
	for (round = 1; round <= RACE_ROUNDS; round++) {
		mappers_opened(r, round);
		usleep(5000 + 2000 * (round % 7));
		ASSERT_EQ(0, unbind_adapter()) TH_LOG("round %d", round);
		model_posts(&self->model, &before);
		__atomic_store_n(&r->unbound, round, __ATOMIC_RELEASE);
		for (int i = 0; i < MAPPERS; i++)
			while (__atomic_load_n(&r->checked[i], __ATOMIC_ACQUIRE) < round)
				usleep(1000);
		model_posts(&self->model, &after);
		EXPECT_EQ(before.bar2_writes, after.bar2_writes) TH_LOG("round %d", round);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		/* as many rounds as the budget allows past the first few */
		if (round == RACE_ROUNDS ||
		    (round >= RACE_MIN_ROUNDS && t1.tv_sec - t0.tv_sec >= RACE_BUDGET_S))
			__atomic_store_n(&r->done, round, __ATOMIC_RELEASE);
		ASSERT_EQ(0, bind_quickly()) TH_LOG("round %d", round);
		__atomic_store_n(&r->bound, round, __ATOMIC_RELEASE);
		if (__atomic_load_n(&r->done, __ATOMIC_ACQUIRE) == round)
			break;
	}
	for (int i = 0; i < MAPPERS; i++) {
		ASSERT_EQ(pids[i], waitpid(pids[i], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	printf("# %d contexts opened, %d pages stored to after an unbind, in %d rounds\n",
	       r->opened, r->stored, round);
	EXPECT_LT(round, r->opened) TH_LOG("the mappers hardly opened anything");
	EXPECT_LT(0, r->stored) TH_LOG("no mapping outlived its context's device to be tried");
	munmap(r, sizeof(*r));
}

/* Opens a context, posts on its QP and closes it, in a loop until killed. */
static void churn(void)
{
	uint8_t wqe[MAX_WQE + 64];

	for (;;) {
		struct verbs v;

		if (verbs_open(&v))
			continue;
		post_write(&v, wqe, 7);
		verbs_close(&v);
	}
}

/* Contexts opened and closed racing unbind and bind must not hurt the kernel. */
TEST_F_TIMEOUT(unbind, open_and_close_race_unbind_and_bind, 180)
{
	struct timespec t0, t1;
	pid_t pids[POSTERS];
	int cycle;

	ASSERT_EQ(0, verbs_close(&self->v));
	for (int i = 0; i < POSTERS; i++) {
		pids[i] = fork();
		ASSERT_LE(0, pids[i]);
		if (pids[i] == 0)
			churn();
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	t1 = t0;
	/*
	 * 20 cycles, or as many as RACE_BUDGET_S allows past the first
	 * RACE_MIN_ROUNDS: a debug kernel under load takes seconds a cycle.
	 */
	for (cycle = 0; cycle < RACE_ROUNDS; cycle++) {
		if (cycle >= RACE_MIN_ROUNDS && t1.tv_sec - t0.tv_sec >= RACE_BUDGET_S)
			break;
		usleep(20000);
		ASSERT_EQ(0, unbind_adapter()) TH_LOG("cycle %d", cycle);
		usleep(5000);
		ASSERT_EQ(0, bind_quickly()) TH_LOG("cycle %d", cycle);
		clock_gettime(CLOCK_MONOTONIC, &t1);
	}
	printf("# %d unbind/bind cycles in %.1f s\n", cycle,
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	for (int i = 0; i < POSTERS; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
	}
	/* every context is gone: the adapter works as before */
	ASSERT_EQ(0, bind_adapter());
	ASSERT_EQ(0, verbs_open(&self->v));
	post_and_land(_metadata, &self->v, self->wqe, 4);
	EXPECT_EQ(0, verbs_close(&self->v));
}

TEST_HARNESS_MAIN
