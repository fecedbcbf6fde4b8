// SPDX-License-Identifier: GPL-2.0
/*
 * Lifetimes: unbinding the adapter while processes post, closing after the
 * unbind, binding it again. Runs last: it leaves the adapter bound again.
 */
#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "kselftest_harness.h"
#include "mlx4_bf_queue.h"
#include "mlx4_bf_model.h"

#define POSTERS 3

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -errno;
}

/*
 * A poster: posts until an error. Exits 0 if that error was -ENODEV after at
 * least one successful post and close() then works, 1 otherwise. Tells the
 * parent through @ready once its first post went through. -EAGAIN (the
 * send queue still full: the device model runs behind) is back pressure,
 * not an end.
 */
static int poster(int ready)
{
	struct mlx4_bf_qp_info qp;
	struct sink sink = {};
	uint8_t wqe[MAX_WQE + 64];
	long posts = 0;
	int fd, err, len;

	fd = open(DEV_PATH, O_RDWR);
	if (fd < 0 || create_qp(fd, &qp) || sink_open(fd, &sink))
		return 1;
	len = build_rdma_write(wqe, 50, 3, sink_addr(&sink), sink.mr.rkey);
	while (!(err = post_send(fd, qp.qp_handle, wqe, len, 0, NULL)) || err == -EAGAIN)
		if (!err && ++posts == 1 && write(ready, "x", 1) != 1)
			return 1;
	if (err != -ENODEV || posts == 0) {
		printf("# pid %d ended with %s after %ld posts\n", getpid(), strerror(-err), posts);
		return 1;
	}
	return close(fd) ? 1 : 0;
}

TEST(unbind_while_posting_then_rebind)
{
	char bdf[64], c;
	pid_t pids[POSTERS];
	struct mlx4_bf_qp_info qp;
	struct mlx4_bf_device_info dev;
	struct sink sink = {};
	uint8_t wqe[MAX_WQE + 64];
	int ready[2], fd, status, len;

	if (bound_device(bdf, sizeof(bdf)))
		SKIP(return, "no adapter bound to mlx4_bf");
	ASSERT_EQ(0, pipe(ready));
	for (int i = 0; i < POSTERS; i++) {
		pids[i] = fork();
		ASSERT_LE(0, pids[i]);
		if (pids[i] == 0)
			_exit(poster(ready[1]));
	}
	for (int i = 0; i < POSTERS; i++)
		ASSERT_EQ(1, read(ready[0], &c, 1));

	/* an idle context, open across the unbind */
	fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, create_qp(fd, &qp));
	ASSERT_EQ(0, sink_open(fd, &sink));
	len = build_rdma_write(wqe, 20, 9, sink_addr(&sink), sink.mr.rkey);

	ASSERT_EQ(0, write_file(DRIVER_DIR "/unbind", bdf));
	for (int i = 0; i < POSTERS; i++) {
		ASSERT_EQ(pids[i], waitpid(pids[i], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("poster %d did not end with -ENODEV", i);
	}
	EXPECT_EQ(-ENODEV, post_send(fd, qp.qp_handle, wqe, len, 0, NULL));
	EXPECT_EQ(-ENODEV, query_device(fd, &dev));
	EXPECT_EQ(0, close(fd));
	/* no new context while unbound */
	EXPECT_GT(0, open(DEV_PATH, O_RDWR));

	/* the ID table still matches the adapter: probing binds it again */
	ASSERT_EQ(0, write_file("/sys/bus/pci/drivers_probe", bdf));
	fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, create_qp(fd, &qp));
	ASSERT_EQ(0, sink_open(fd, &sink));
	len = build_rdma_write(wqe, 20, 9, sink_addr(&sink), sink.mr.rkey);
	EXPECT_EQ(0, post_send(fd, qp.qp_handle, wqe, len, 0, NULL));
	close(fd);
}

/*
 * A context with memory regions registered across an unbind: registering
 * more fails with -ENODEV, closing it still works (and unpins what it
 * held), and the adapter comes back with nothing registered.
 */
TEST(memory_regions_across_unbind)
{
	struct mlx4_bf_mr_info mr;
	long locked = vm_locked_kb();
	char bdf[64];
	uint8_t *buf;
	int fd;

	if (bound_device(bdf, sizeof(bdf)))
		SKIP(return, "no adapter bound to mlx4_bf");
	buf = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, buf);
	fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, reg_mr(fd, (uintptr_t)buf, 2 * 4096, ACCESS_RDMA, &mr));
	ASSERT_EQ(0, reg_mr(fd, (uintptr_t)buf + 100, 3 * 4096, 0, &mr));

	ASSERT_EQ(0, write_file(DRIVER_DIR "/unbind", bdf));
	EXPECT_EQ(-ENODEV, reg_mr(fd, (uintptr_t)buf, 4096, 0, &mr));
	EXPECT_EQ(0, close(fd));
	EXPECT_EQ(locked, vm_locked_kb()) TH_LOG("VmLck after close");

	ASSERT_EQ(0, write_file("/sys/bus/pci/drivers_probe", bdf));
	if (debugfs_counter("device", "pinned_pages") >= 0) {
		EXPECT_EQ(0, debugfs_counter("device", "pinned_pages"));
		EXPECT_EQ(0, debugfs_counter("device", "mrs"));
	}
	fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, reg_mr(fd, (uintptr_t)buf, 4096, 0, &mr)) TH_LOG("after the rebind");
	close(fd);
	munmap(buf, 4 * 4096);
}

/*
 * Unbind gives the firmware its memory back in full: CLOSE_HCA, UNMAP_ICM
 * of every table, UNMAP_ICM_AUX, UNMAP_FA leave the model's firmware off
 * with no host page; a rebind maps exactly as much again, so
 * unbind/bind cycles leak nothing on the adapter either.
 */
TEST(unbind_gives_the_firmware_area_and_icm_back)
{
	uint64_t fw_pages, icm_pages;
	struct model m;
	char bdf[64];

	if (bound_device(bdf, sizeof(bdf)))
		SKIP(return, "no adapter bound to mlx4_bf");
	if (model_open(&m))
		SKIP(return, NO_ANALYZER);
	if (model_version(&m) < 7) {
		model_close(&m);
		SKIP(return, "the model has no firmware gauges (diag version 7)");
	}
	EXPECT_EQ(MODEL_FW_HCA_UP, model_read(&m, MODEL_FW_PHASE));
	fw_pages = model_read(&m, MODEL_FW_PAGES);
	icm_pages = model_read(&m, MODEL_ICM_PAGES);
	EXPECT_LT(0, fw_pages);
	EXPECT_LT(0, icm_pages);
	for (int cycle = 0; cycle < 3; cycle++) {
		ASSERT_EQ(0, write_file(DRIVER_DIR "/unbind", bdf));
		EXPECT_EQ(0, model_read(&m, MODEL_FW_PHASE)) TH_LOG("cycle %d", cycle);
		EXPECT_EQ(0, model_read(&m, MODEL_FW_PAGES)) TH_LOG("cycle %d", cycle);
		EXPECT_EQ(0, model_read(&m, MODEL_ICM_PAGES)) TH_LOG("cycle %d", cycle);
		EXPECT_EQ(0, model_read(&m, MODEL_LIVE)) TH_LOG("cycle %d", cycle);
		ASSERT_EQ(0, write_file("/sys/bus/pci/drivers_probe", bdf));
		EXPECT_EQ(MODEL_FW_HCA_UP, model_read(&m, MODEL_FW_PHASE));
		EXPECT_EQ(fw_pages, model_read(&m, MODEL_FW_PAGES)) TH_LOG("cycle %d", cycle);
		EXPECT_EQ(icm_pages, model_read(&m, MODEL_ICM_PAGES)) TH_LOG("cycle %d", cycle);
	}
	model_close(&m);
}

/* mlx4's opcodes of the teardown commands the model is told to break. */
#define OP_HW2SW_CQ	0x17
#define OP_2RST_QP	0x21

/*
 * Unbind with a QP and a CQ in the adapter, the model told to break one
 * teardown command (@mode: fail it, or never complete it): the driver must
 * stop the adapter's DMA and reset it before it frees the queues' memory,
 * and the adapter must work again after a rebind.
 */
static void unbind_with_a_broken_teardown(struct __test_metadata *_metadata, uint16_t opcode,
					  int mode)
{
	struct mlx4_bf_qp_info qp;
	uint64_t resets, no_master;
	struct model m;
	char bdf[64];
	int fd;

	if (bound_device(bdf, sizeof(bdf)))
		SKIP(return, "no adapter bound to mlx4_bf");
	if (model_open(&m))
		SKIP(return, NO_ANALYZER);
	if (model_version(&m) < 5) {
		model_close(&m);
		SKIP(return, "the model has no command faults (diag version 5)");
	}
	fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, create_qp(fd, &qp));
	resets = model_read(&m, MODEL_RESETS);
	no_master = model_read(&m, MODEL_NO_MASTER_DMA);
	model_cmd_fault(&m, opcode, mode);

	ASSERT_EQ(0, write_file(DRIVER_DIR "/unbind", bdf));
	EXPECT_EQ(0, (uint32_t)model_read(&m, MODEL_CMD_FAULT)) TH_LOG("the fault fired");
	EXPECT_EQ(resets + 1, model_read(&m, MODEL_RESETS)) TH_LOG("one reset, at unbind");
	EXPECT_EQ(0, model_read(&m, MODEL_LIVE)) TH_LOG("nothing left in the adapter");
	if (model_version(&m) >= 7)
		EXPECT_EQ(0, model_read(&m, MODEL_FW_PAGES) + model_read(&m, MODEL_ICM_PAGES))
			TH_LOG("the reset took the firmware's pages");
	EXPECT_EQ(no_master, model_read(&m, MODEL_NO_MASTER_DMA))
		TH_LOG("no DMA tried without bus mastering");
	EXPECT_EQ(-ENODEV, create_qp(fd, &qp));
	EXPECT_EQ(0, close(fd));
	model_close(&m);

	ASSERT_EQ(0, write_file("/sys/bus/pci/drivers_probe", bdf));
	fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, create_qp(fd, &qp)) TH_LOG("the adapter works after the rebind");
	close(fd);
}

TEST(a_failed_hw2sw_cq_at_unbind_resets_the_adapter)
{
	unbind_with_a_broken_teardown(_metadata, OP_HW2SW_CQ, CMD_FAULT_FAIL);
}

/* The command times out (10 s); the later ones find the HCR busy. */
TEST(a_2rst_qp_that_never_completes_at_unbind_resets_the_adapter)
{
	unbind_with_a_broken_teardown(_metadata, OP_2RST_QP, CMD_FAULT_STALL);
}

static sigjmp_buf bus_error;

static void on_sigbus(int sig)
{
	(void)sig;
	siglongjmp(bus_error, 1);
}

/*
 * A load from @p, memory a context maps (RAM on both architectures): 1 if
 * the page is gone (SIGBUS), 0 if the load went through.
 */
static int ram_gone(const void *p)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	int gone;

	sigaction(SIGBUS, &sa, &old);
	gone = sigsetjmp(bus_error, 1);
	if (!gone)
		(void)__atomic_load_n((const uint8_t *)p, __ATOMIC_RELAXED);
	sigaction(SIGBUS, &old, NULL);
	return gone;
}

/*
 * One store to the BlueFlame page of a user-posting context (the mapping is
 * not inherited by a child: VM_DONTCOPY): 1 if the page is gone (SIGBUS; on
 * s390 the s390_pci_mmio_write() system call fails instead), 0 if the store
 * went through.
 */
#ifdef __s390x__
static int store_to_page(uint8_t *page)
{
	uint64_t zero = 0;

	/* No PTE to look the PFN up in: follow_pfnmap_start() fails. */
	return syscall(__NR_s390_pci_mmio_write, (unsigned long)page, &zero, 8) != 0;
}
#else
static int store_to_page(uint8_t *page)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	int gone;

	sigaction(SIGBUS, &sa, &old);
	gone = sigsetjmp(bus_error, 1);
	if (!gone)
		__atomic_store_n((uint64_t *)page, 0, __ATOMIC_RELAXED);
	sigaction(SIGBUS, &old, NULL);
	return gone;
}
#endif

/*
 * A context's area (its receive CQ ring and doorbell record page) is
 * zapped at unbind like its BAR pages: the adapter's DMA mapping of that
 * memory ends with the binding, and no process keeps reading it after.
 */
TEST(area_mappings_are_zapped_at_unbind)
{
	struct mlx4_bf_qp_info qp;
	uint8_t *cq, *db;
	char bdf[64];
	int fd;

	if (bound_device(bdf, sizeof(bdf)))
		SKIP(return, "no adapter bound to mlx4_bf");
	fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, create_qp(fd, &qp));
	cq = mmap(NULL, qp.cq_entries * qp.cqe_size, PROT_READ, MAP_SHARED, fd, qp.cq_offset);
	ASSERT_NE(MAP_FAILED, cq);
	db = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, qp.cq_db_offset);
	ASSERT_NE(MAP_FAILED, db);
	EXPECT_EQ(0, ram_gone(cq));
	EXPECT_EQ(0, ram_gone(db));
	ASSERT_EQ(0, write_file(DRIVER_DIR "/unbind", bdf));
	/* Both pages, the one touched before and the one never touched. */
	EXPECT_EQ(1, ram_gone(cq));
	EXPECT_EQ(1, ram_gone(cq + 4096 - 1));
	EXPECT_EQ(1, ram_gone(db));
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, qp.cq_offset));
	munmap(cq, qp.cq_entries * qp.cqe_size);
	munmap(db, 4096);
	EXPECT_EQ(0, close(fd));
	ASSERT_EQ(0, write_file("/sys/bus/pci/drivers_probe", bdf));
}

TEST(bar_page_mappings_are_zapped_at_unbind)
{
	char bdf[64];
	uint8_t *bf;
	int fd;

	if (bound_device(bdf, sizeof(bdf)))
		SKIP(return, "no adapter bound to mlx4_bf");
	fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	bf = mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, fd, MLX4_BF_MMAP_BF_PAGE);
	ASSERT_NE(MAP_FAILED, bf);
	ASSERT_EQ(0, write_file(DRIVER_DIR "/unbind", bdf));
	/* The page is gone from the process: nothing reaches the device. */
	EXPECT_EQ(1, store_to_page(bf));
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, fd, MLX4_BF_MMAP_BF_PAGE));
	munmap(bf, 4096);
	EXPECT_EQ(0, close(fd));
	ASSERT_EQ(0, write_file("/sys/bus/pci/drivers_probe", bdf));
}

/*
 * A load from @page at @off (the UAR's send doorbell: a register, which the
 * adapter lets be read): 1 if the page is gone, 0 if the load went through.
 */
#ifdef __s390x__
static int load_from_page(uint8_t *page, size_t off)
{
	uint32_t v;

	return syscall(__NR_s390_pci_mmio_read, (unsigned long)(page + off), &v, 4) != 0;
}
#else
static int load_from_page(uint8_t *page, size_t off)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	int gone;

	sigaction(SIGBUS, &sa, &old);
	gone = sigsetjmp(bus_error, 1);
	if (!gone)
		(void)__atomic_load_n((uint32_t *)(page + off), __ATOMIC_RELAXED);
	sigaction(SIGBUS, &old, NULL);
	return gone;
}
#endif

#define MAPPERS		2
#define RACE_ROUNDS	20
#define LIVE_MAPS	4
#define SEND_DOORBELL	0x14

/* What the parent and the mappers share (MAP_SHARED anonymous memory). */
struct race {
	int unbound;			/* the round whose unbind has completed */
	int bound;			/* the round whose rebind has completed */
	int checked[MAPPERS];		/* the last round a mapper checked */
	int alive_after_unbind;		/* pages still reachable after an unbind */
	int mapped;			/* mappings made, over all rounds */
};

struct bar_maps {
	int fd;
	uint8_t *uar, *bf;
};

static void drop_maps(struct bar_maps *m)
{
	if (m->uar && m->uar != MAP_FAILED)
		munmap(m->uar, 4096);
	if (m->bf && m->bf != MAP_FAILED)
		munmap(m->bf, 4096);
	if (m->fd >= 0)
		close(m->fd);
	*m = (struct bar_maps){ .fd = -1 };
}

/*
 * A mapper: opens contexts and maps their UAR and BlueFlame pages, faults
 * the UAR page in with a load of its doorbell register, and unmaps the
 * oldest, until the parent says the adapter is unbound; then every page it
 * still maps must be gone (the BlueFlame page never touched before: a
 * store must not reach the adapter), whenever its mmap() returned.
 */
static void mapper(struct race *r, int me)
{
	struct bar_maps live[LIVE_MAPS];
	int next = 0;

	for (int i = 0; i < LIVE_MAPS; i++)
		live[i] = (struct bar_maps){ .fd = -1 };
	for (int round = 1; round <= RACE_ROUNDS; round++) {
		while (__atomic_load_n(&r->unbound, __ATOMIC_ACQUIRE) < round) {
			struct bar_maps *m = &live[next++ % LIVE_MAPS];

			drop_maps(m);
			m->fd = open(DEV_PATH, O_RDWR);
			if (m->fd < 0)
				continue;
			m->uar = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd,
				      MLX4_BF_MMAP_UAR_PAGE);
			m->bf = mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, m->fd,
				     MLX4_BF_MMAP_BF_PAGE);
			if (m->uar != MAP_FAILED) {
				__atomic_fetch_add(&r->mapped, 1, __ATOMIC_RELAXED);
				load_from_page(m->uar, SEND_DOORBELL);
			}
		}
		for (int i = 0; i < LIVE_MAPS; i++) {
			struct bar_maps *m = &live[i];

			if (m->uar && m->uar != MAP_FAILED && !load_from_page(m->uar, SEND_DOORBELL))
				__atomic_fetch_add(&r->alive_after_unbind, 1, __ATOMIC_RELAXED);
			if (m->bf && m->bf != MAP_FAILED && !store_to_page(m->bf))
				__atomic_fetch_add(&r->alive_after_unbind, 1, __ATOMIC_RELAXED);
			drop_maps(m);
		}
		__atomic_store_n(&r->checked[me], round, __ATOMIC_RELEASE);
		while (__atomic_load_n(&r->bound, __ATOMIC_ACQUIRE) < round)
			usleep(1000);
	}
	_exit(0);
}

/*
 * A fixture only for its timeout: each rebind brings the adapter up, maps
 * the 32 areas again and registers the RDMA device, and on the debug kernel
 * (KASAN, DMA_API_DEBUG) 20 cycles under churn take longer than the
 * harness's default 30 s.
 */
FIXTURE(rebinds) {};
FIXTURE_SETUP(rebinds) {}
FIXTURE_TEARDOWN(rebinds) {}

/*
 * mmap(), the first access and munmap() of both pages racing unbind, round
 * after round: no page a process mapped before, or while, the adapter was
 * unbound reaches it afterwards.
 */
TEST_F_TIMEOUT(rebinds, bar_page_mappings_racing_unbind_never_outlive_it, 180)
{
	struct race *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pids[MAPPERS];
	char bdf[64];
	int status;

	if (bound_device(bdf, sizeof(bdf)))
		SKIP(return, "no adapter bound to mlx4_bf");
	ASSERT_NE(MAP_FAILED, r);
	memset(r, 0, sizeof(*r));
	for (int i = 0; i < MAPPERS; i++) {
		pids[i] = fork();
		ASSERT_LE(0, pids[i]);
		if (!pids[i])
			mapper(r, i);
	}
	for (int round = 1; round <= RACE_ROUNDS; round++) {
		usleep(5000 + 2000 * (round % 7));
		ASSERT_EQ(0, write_file(DRIVER_DIR "/unbind", bdf)) TH_LOG("round %d", round);
		__atomic_store_n(&r->unbound, round, __ATOMIC_RELEASE);
		for (int i = 0; i < MAPPERS; i++)
			while (__atomic_load_n(&r->checked[i], __ATOMIC_ACQUIRE) < round)
				usleep(1000);
		ASSERT_EQ(0, write_file("/sys/bus/pci/drivers_probe", bdf)) TH_LOG("round %d", round);
		__atomic_store_n(&r->bound, round, __ATOMIC_RELEASE);
	}
	for (int i = 0; i < MAPPERS; i++) {
		ASSERT_EQ(pids[i], waitpid(pids[i], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	EXPECT_EQ(0, r->alive_after_unbind);
	EXPECT_LT(RACE_ROUNDS, r->mapped) TH_LOG("the mappers hardly mapped anything");
	printf("# %d mappings in %d rounds\n", r->mapped, RACE_ROUNDS);
	munmap(r, sizeof(*r));
}

/*
 * Ping-pong between @a and @b until a post fails; its error. Tells the
 * parent through @ready once the first round trip is done.
 */
static int ping_until_error(struct endpoint *a, struct endpoint *b, int ready)
{
	uint8_t wqe[MAX_WQE + 64];
	int len = build_send(wqe, 32, 5, 0, 0), err;

	for (long trips = 0;; trips++) {
		struct endpoint *from = trips & 1 ? b : a, *to = trips & 1 ? a : b;

		err = post_send(from->fd, from->qp.qp_handle, wqe, len, 0, NULL);
		if (err)
			return err;
		if (!ep_wait(to, 5000))
			return -ETIMEDOUT;
		ep_consume(to);
		err = post_recv(to->fd, to->qp.qp_handle, 1);
		if (err)
			return err;
		if (trips == 0 && write(ready, "x", 1) != 1)
			return -EPIPE;
	}
}

/*
 * A ping-pong pair in one process until the adapter goes: exits 0 if a post
 * failed with -ENODEV, or the CQ it polled vanished (SIGBUS) and the next
 * post fails so, and its mappings are gone.
 */
static int pinger(int ready)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	uint8_t wqe[MAX_WQE + 64];
	struct endpoint a, b;
	int err;

	if (ep_open(&a) || ep_open(&b) || ep_pair(&a, &b, a.qp.rq_entries))
		return 1;
	sigaction(SIGBUS, &sa, &old);
	if (sigsetjmp(bus_error, 1)) {
		/*
		 * The CQ being polled went with the adapter. Unbind takes the
		 * mappings first and the hardware next: posts fail with -ENODEV
		 * from then on (a few may still go through, or find the queue
		 * full, in between).
		 */
		int len = build_send(wqe, 32, 5, 0, 0);

		for (int i = 0; i < 5000; i++) {
			err = post_send(a.fd, a.qp.qp_handle, wqe, len, 0, NULL);
			if (err && err != -EAGAIN)
				break;
			usleep(1000);
		}
	} else {
		err = ping_until_error(&a, &b, ready);
	}
	sigaction(SIGBUS, &old, NULL);
	if (err != -ENODEV) {
		printf("# ping-pong ended with %s\n", strerror(-err));
		return 1;
	}
	/* the receive side is gone from the process with the adapter */
	if (!ram_gone(a.cq) || !ram_gone(b.bufs)) {
		printf("# the receive side is still mapped after unbind\n");
		return 1;
	}
	ep_close(&a);
	ep_close(&b);
	return 0;
}

/* A context sleeping in poll() on an armed CQ: woken by unbind with POLLHUP. */
static int sleeper(int ready)
{
	struct endpoint a, b;
	struct pollfd p;

	if (ep_open(&a) || ep_open(&b) || ep_pair(&a, &b, 1) || arm_cq(b.fd, b.qp.qp_handle, 0))
		return 1;
	p = (struct pollfd){ .fd = b.fd, .events = POLLIN };
	if (write(ready, "x", 1) != 1 || poll(&p, 1, 20000) != 1)
		return 1;
	return (p.revents & (POLLERR | POLLHUP)) == (POLLERR | POLLHUP) ? 0 : 1;
}

TEST(unbind_during_ping_pong_and_poll)
{
	int ready[2], status;
	pid_t pids[2];
	char bdf[64], c;

	if (bound_device(bdf, sizeof(bdf)))
		SKIP(return, "no adapter bound to mlx4_bf");
	ASSERT_EQ(0, pipe(ready));
	pids[0] = fork();
	ASSERT_LE(0, pids[0]);
	if (!pids[0])
		_exit(pinger(ready[1]));
	pids[1] = fork();
	ASSERT_LE(0, pids[1]);
	if (!pids[1])
		_exit(sleeper(ready[1]));
	ASSERT_EQ(1, read(ready[0], &c, 1));
	ASSERT_EQ(1, read(ready[0], &c, 1));
	usleep(50000);
	ASSERT_EQ(0, write_file(DRIVER_DIR "/unbind", bdf));
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(pids[i], waitpid(pids[i], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("%s did not end cleanly", i ? "the poller" : "the ping-pong");
	}
	ASSERT_EQ(0, write_file("/sys/bus/pci/drivers_probe", bdf));
}

/* Opens, creates a QP, registers a sink, posts and closes in a loop until killed. */
static void churn(void)
{
	struct mlx4_bf_qp_info qp;
	struct sink sink = {};
	uint8_t wqe[MAX_WQE + 64];

	for (;;) {
		int fd = open(DEV_PATH, O_RDWR);

		if (fd < 0)
			continue;
		if (!create_qp(fd, &qp) && !sink_open(fd, &sink)) {
			int len = build_rdma_write(wqe, 30, 1, sink_addr(&sink), sink.mr.rkey);

			post_send(fd, qp.qp_handle, wqe, len, 0, NULL);
		}
		close(fd);
	}
}

#define RACE_MIN_CYCLES 5
#define RACE_BUDGET_S 60

/* open() and close() racing unbind and bind must not hurt the kernel. */
TEST_F_TIMEOUT(rebinds, open_and_close_race_unbind_and_bind, 180)
{
	struct timespec t0, t1;
	pid_t pids[POSTERS];
	char bdf[64];
	int cycle, fd;

	if (bound_device(bdf, sizeof(bdf)))
		SKIP(return, "no adapter bound to mlx4_bf");
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
	 * RACE_MIN_CYCLES: a debug kernel under load takes up to 9 s a cycle.
	 */
	for (cycle = 0; cycle < 20; cycle++) {
		if (cycle >= RACE_MIN_CYCLES && t1.tv_sec - t0.tv_sec >= RACE_BUDGET_S)
			break;
		usleep(20000);
		ASSERT_EQ(0, write_file(DRIVER_DIR "/unbind", bdf)) TH_LOG("cycle %d", cycle);
		usleep(5000);
		ASSERT_EQ(0, write_file("/sys/bus/pci/drivers_probe", bdf)) TH_LOG("cycle %d", cycle);
		clock_gettime(CLOCK_MONOTONIC, &t1);
	}
	printf("# %d unbind/bind cycles in %.1f s\n", cycle,
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	for (int i = 0; i < POSTERS; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
	}
	/* all contexts are gone: the adapter works as before */
	fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	close(fd);
}

TEST_HARNESS_MAIN
