// SPDX-License-Identifier: GPL-2.0
/*
 * Registered memory (ABI 3): REG_MR and DEREG_MR and their limits; gather
 * segments, which must name an MR of the same context by its lkey with the
 * range inside it; RDMA writes, which must name by its rkey a
 * remote-writable MR of the context that owns the connected peer QP, with
 * the whole message inside it. What arrives is checked in the receiver's
 * memory. The device model's analyzer (diagnostic block version 4) counts
 * the MPTs it owns, the pages they translate, RDMA writes and protection
 * faults; the driver's debugfs stats count MRs and pinned pages, and
 * /proc/self/status (VmLck) the pages accounted to the process. Checks on
 * one of those are left out where it is missing (real hardware, a model
 * older than version 4, no debugfs); a test that is nothing else SKIPs.
 */
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "mlx4_bf_queue.h"
#include "mlx4_bf_model.h"

#define PAGE		4096
#define BUF_PAGES	16
#define BUF_BYTES	(BUF_PAGES * PAGE)
/* The adapter's reserved lkey (the model's QUERY_DEV_CAP 0x98). */
#define RESERVED_LKEY	0x00000008
#define NO_V4		NO_ANALYZER " (diag version 4)"
#define NO_DEBUGFS	"no pinned_pages in the debugfs stats (debugfs not mounted?)"

/*
 * The analyzer: 1 with @m mapped on a version 4 block; 0 without one (real
 * hardware, or an older model: the tests run, their analyzer checks not).
 */
static int analyzer_v4(struct model *m)
{
	if (model_open(m))
		return 0;
	if (model_version(m) >= 4)
		return 1;
	model_close(m);
	return 0;
}

static uint8_t *map_pages(int pages, int prot)
{
	uint8_t *p = mmap(NULL, (size_t)pages * PAGE, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * The model's fault counters when the program started: no test may make
 * the adapter see a protection fault (the last test compares). Read before
 * the harness forks its tests; the tests' processes inherit them.
 */
static struct {
	int v4;
	uint64_t local, remote;
} faults_at_start;

static void __attribute__((constructor)) read_faults_at_start(void)
{
	struct model m;

	if (!analyzer_v4(&m))
		return;
	faults_at_start.v4 = 1;
	faults_at_start.local = model_read(&m, MODEL_LOCAL_PROT_FAULTS);
	faults_at_start.remote = model_read(&m, MODEL_REMOTE_ACCESS_FAULTS);
	model_close(&m);
}

/* One context without QPs, and BUF_PAGES pages of this process. */
FIXTURE(mr) {
	int fd;
	int v4;
	struct model m;
	struct mlx4_bf_device_info dev;
	uint8_t *buf;
	struct mlx4_bf_mr_info info;
};

FIXTURE_SETUP(mr)
{
	self->fd = -1;
	self->buf = NULL;
	if (access(DEV_PATH, F_OK))
		SKIP(return, NO_DEVICE);
	self->v4 = analyzer_v4(&self->m);
	self->fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, query_device(self->fd, &self->dev));
	self->buf = map_pages(BUF_PAGES, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, self->buf);
	memset(self->buf, 0x5a, BUF_BYTES);
}

FIXTURE_TEARDOWN(mr)
{
	if (self->fd >= 0)
		close(self->fd);
	if (self->buf)
		munmap(self->buf, BUF_BYTES);
	if (self->v4)
		model_close(&self->m);
}

/* REG_MR of @len bytes at @off into the fixture's pages, its MR in self->info. */
#define reg(self, off, len, access) \
	reg_mr((self)->fd, (uintptr_t)(self)->buf + (off), len, access, &(self)->info)

TEST_F(mr, reg_and_dereg_round_trip)
{
	struct mlx4_bf_mr_info info;
	struct call c;

	memset(&info, 0xff, sizeof(info));
	call_init(&c, MLX4_BF_OBJECT_MR, MLX4_BF_METHOD_REG_MR);
	call_inline_u64(&c, MLX4_BF_ATTR_MR_ADDR, (uintptr_t)self->buf);
	call_inline_u64(&c, MLX4_BF_ATTR_MR_LENGTH, 3 * PAGE);
	call_inline_u32(&c, MLX4_BF_ATTR_MR_ACCESS, MLX4_BF_ACCESS_LOCAL_WRITE);
	call_attr(&c, MLX4_BF_ATTR_MR_INFO, sizeof(info), (uintptr_t)&info);
	ASSERT_EQ(0, call_do(self->fd, &c));
	EXPECT_TRUE(c.attrs[3].flags & MLX4_BF_ATTR_F_VALID_OUTPUT);
	EXPECT_EQ(0, info.reserved);
	EXPECT_EQ(0, dereg_mr(self->fd, info.mr_handle));
}

TEST_F(mr, lkey_and_rkey_are_one_key_not_the_reserved_one)
{
	ASSERT_EQ(0, reg(self, 0, PAGE, ACCESS_RDMA));
	EXPECT_EQ(self->info.lkey, self->info.rkey);
	EXPECT_NE(RESERVED_LKEY, self->info.lkey);
}

TEST_F(mr, live_mrs_have_their_own_handles_and_mpts)
{
	struct mlx4_bf_mr_info a, b;

	ASSERT_EQ(0, reg_mr(self->fd, (uintptr_t)self->buf, PAGE, 0, &a));
	/* the same pages again: an MR is a registration, not a range */
	ASSERT_EQ(0, reg_mr(self->fd, (uintptr_t)self->buf, PAGE, 0, &b));
	EXPECT_NE(a.mr_handle, b.mr_handle);
	/* a key is the MPT index << 8 | an 8-bit tag */
	EXPECT_NE(a.lkey >> 8, b.lkey >> 8) TH_LOG("keys %#x and %#x", a.lkey, b.lkey);
}

TEST_F(mr, key_changes_every_time_an_mpt_is_reused)
{
	__u32 keys[32];
	int reused = 0;

	for (int i = 0; i < 32; i++) {
		ASSERT_EQ(0, reg(self, 0, PAGE, 0)) TH_LOG("cycle %d", i);
		keys[i] = self->info.lkey;
		ASSERT_EQ(0, dereg_mr(self->fd, self->info.mr_handle));
		for (int j = 0; j < i; j++) {
			EXPECT_NE(keys[j], keys[i]) TH_LOG("cycles %d and %d: key %#x", j, i, keys[i]);
			reused += (keys[j] >> 8) == (keys[i] >> 8);
		}
	}
	TH_LOG("%d reuses of an MPT index in 32 registrations", reused);
}

TEST_F(mr, zero_length_is_einval)
{
	EXPECT_EQ(-EINVAL, reg(self, 0, 0, 0));
}

TEST_F(mr, length_above_max_mr_size_is_einval)
{
	ASSERT_NE(0, self->dev.max_mr_size);
	EXPECT_EQ(-EINVAL, reg(self, 0, self->dev.max_mr_size + 1, 0));
	EXPECT_EQ(-EINVAL, reg(self, 0, 1ull << 62, 0));
	EXPECT_EQ(-EINVAL, reg(self, 0, ~0ull, 0));
}

TEST_F(mr, range_wrapping_the_address_space_is_einval)
{
	EXPECT_EQ(-EINVAL, reg_mr(self->fd, ~0ull - PAGE + 1, 2 * PAGE, 0, &self->info));
	EXPECT_EQ(-EINVAL, reg_mr(self->fd, ~0ull, 2, 0, &self->info));
}

TEST_F(mr, missing_address_or_length_is_einval)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_MR, MLX4_BF_METHOD_REG_MR);
	call_inline_u64(&c, MLX4_BF_ATTR_MR_LENGTH, PAGE);
	call_attr(&c, MLX4_BF_ATTR_MR_INFO, sizeof(self->info), (uintptr_t)&self->info);
	EXPECT_EQ(-EINVAL, call_do(self->fd, &c)) TH_LOG("no address");
	call_init(&c, MLX4_BF_OBJECT_MR, MLX4_BF_METHOD_REG_MR);
	call_inline_u64(&c, MLX4_BF_ATTR_MR_ADDR, (uintptr_t)self->buf);
	call_attr(&c, MLX4_BF_ATTR_MR_INFO, sizeof(self->info), (uintptr_t)&self->info);
	EXPECT_EQ(-EINVAL, call_do(self->fd, &c)) TH_LOG("no length");
}

TEST_F(mr, unknown_access_bits_are_einval)
{
	EXPECT_EQ(-EINVAL, reg(self, 0, PAGE, 1u << 3));
	EXPECT_EQ(-EINVAL, reg(self, 0, PAGE, MLX4_BF_ACCESS_LOCAL_WRITE | 1u << 31));
	EXPECT_EQ(-EINVAL, reg(self, 0, PAGE, ACCESS_RDMA | MLX4_BF_ACCESS_REMOTE_READ | 1u << 3));
}

/* Remote read needs no local write (ib_check_mr_access()). */
TEST_F(mr, remote_read_registers_without_local_write)
{
	EXPECT_EQ(0, reg(self, 0, PAGE, MLX4_BF_ACCESS_REMOTE_READ));
	EXPECT_EQ(0, reg(self, 0, PAGE, ACCESS_RDMA | MLX4_BF_ACCESS_REMOTE_READ));
}

TEST_F(mr, remote_write_without_local_write_is_einval)
{
	EXPECT_EQ(-EINVAL, reg(self, 0, PAGE, MLX4_BF_ACCESS_REMOTE_WRITE));
}

TEST_F(mr, unmapped_range_is_efault)
{
	/* the second half of the fixture's pages gone: a hole after them */
	ASSERT_EQ(0, munmap(self->buf + BUF_BYTES / 2, BUF_BYTES / 2));
	EXPECT_EQ(-EFAULT, reg(self, BUF_BYTES / 2 - PAGE, 2 * PAGE, 0)) TH_LOG("into the hole");
	EXPECT_EQ(-EFAULT, reg(self, BUF_BYTES / 2, PAGE, 0)) TH_LOG("inside the hole");
	EXPECT_EQ(-EFAULT, reg_mr(self->fd, 0, PAGE, 0, &self->info)) TH_LOG("page 0");
	EXPECT_EQ(0, reg(self, 0, BUF_BYTES / 2, 0)) TH_LOG("what is still mapped");
}

TEST_F(mr, read_only_mapping_with_local_write_is_efault)
{
	uint8_t *ro = map_pages(2, PROT_READ);

	ASSERT_NE(NULL, ro);
	EXPECT_EQ(-EFAULT, reg_mr(self->fd, (uintptr_t)ro, 2 * PAGE, MLX4_BF_ACCESS_LOCAL_WRITE,
				  &self->info));
	EXPECT_EQ(-EFAULT, reg_mr(self->fd, (uintptr_t)ro, 2 * PAGE, ACCESS_RDMA, &self->info));
	munmap(ro, 2 * PAGE);
}

TEST_F(mr, read_only_mapping_registers_without_local_write)
{
	ASSERT_EQ(0, mprotect(self->buf, 2 * PAGE, PROT_READ));
	EXPECT_EQ(0, reg(self, 0, 2 * PAGE, 0));
}

TEST_F(mr, unaligned_range_pins_and_accounts_every_page_it_touches)
{
	long pinned = debugfs_counter("device", "pinned_pages"), locked = vm_locked_kb();

	ASSERT_LE(0, locked);
	/* 200 bytes across a page boundary: two pages; 3 pages + 2 bytes: five */
	ASSERT_EQ(0, reg(self, PAGE - 100, 200, 0));
	ASSERT_EQ(0, reg(self, 5 * PAGE - 1, 3 * PAGE + 2, MLX4_BF_ACCESS_LOCAL_WRITE));
	EXPECT_EQ(locked + 7 * 4, vm_locked_kb()) TH_LOG("VmLck");
	if (pinned >= 0)
		EXPECT_EQ(pinned + 7, debugfs_counter("device", "pinned_pages"));
	ASSERT_EQ(0, dereg_mr(self->fd, self->info.mr_handle));
	EXPECT_EQ(locked + 2 * 4, vm_locked_kb()) TH_LOG("VmLck after one DEREG_MR");
	if (pinned >= 0)
		EXPECT_EQ(pinned + 2, debugfs_counter("device", "pinned_pages"));
}

TEST_F(mr, debugfs_counts_mrs_and_pinned_pages)
{
	long mrs = debugfs_counter("device", "mrs");
	long pinned = debugfs_counter("device", "pinned_pages");

	if (mrs < 0 || pinned < 0)
		SKIP(return, NO_DEBUGFS);
	ASSERT_EQ(0, reg(self, 0, 4 * PAGE, 0));
	ASSERT_EQ(0, reg(self, 0, BUF_BYTES, ACCESS_RDMA));
	EXPECT_EQ(mrs + 2, debugfs_counter("device", "mrs"));
	EXPECT_EQ(pinned + 4 + BUF_PAGES, debugfs_counter("device", "pinned_pages"));
	ASSERT_EQ(0, dereg_mr(self->fd, self->info.mr_handle));
	EXPECT_EQ(mrs + 1, debugfs_counter("device", "mrs"));
	EXPECT_EQ(pinned + 4, debugfs_counter("device", "pinned_pages"));
}

TEST_F(mr, adapter_owns_an_mpt_per_mr_translating_its_pages)
{
	uint64_t mpts, pages;

	if (!self->v4)
		SKIP(return, NO_V4);
	mpts = model_read(&self->m, MODEL_MPTS);
	pages = model_read(&self->m, MODEL_MR_PAGES);
	/*
	 * The MTT entries go straight into ICM, as mlx4_core writes them (no
	 * WRITE_MTT): the pages count only if SW2HW_MPT translated them there.
	 */
	ASSERT_EQ(0, reg(self, 100, 2 * PAGE, 0));	/* three pages */
	ASSERT_EQ(0, reg(self, 0, BUF_BYTES, ACCESS_RDMA));
	EXPECT_EQ(mpts + 2, model_read(&self->m, MODEL_MPTS));
	EXPECT_EQ(pages + 3 + BUF_PAGES, model_read(&self->m, MODEL_MR_PAGES));
	ASSERT_EQ(0, dereg_mr(self->fd, self->info.mr_handle));
	EXPECT_EQ(mpts + 1, model_read(&self->m, MODEL_MPTS)) TH_LOG("after DEREG_MR");
	EXPECT_EQ(pages + 3, model_read(&self->m, MODEL_MR_PAGES)) TH_LOG("after DEREG_MR");
}

TEST_F(mr, mr_count_limit_is_enospc)
{
	__u32 first = 0;

	ASSERT_LT(0, self->dev.max_mrs_per_context);
	for (__u32 i = 0; i < self->dev.max_mrs_per_context; i++) {
		ASSERT_EQ(0, reg(self, 0, PAGE, 0)) TH_LOG("MR %u", i);
		if (!i)
			first = self->info.mr_handle;
	}
	EXPECT_EQ(-ENOSPC, reg(self, 0, PAGE, 0));
	ASSERT_EQ(0, dereg_mr(self->fd, first));
	EXPECT_EQ(0, reg(self, 0, PAGE, 0)) TH_LOG("after a DEREG_MR");
}

/* max_mr_pages in as few MRs as max_mr_size allows, over the same pages. */
TEST_F_TIMEOUT(mr, page_limit_is_enospc, 180)
{
	__u64 max_pages = self->dev.max_mr_pages, left = max_pages, per;
	__u32 mrs = self->dev.max_mrs_per_context, n = 0;
	uint8_t *big;

	ASSERT_LT(0, max_pages);
	if (mrs < 2)
		SKIP(return, "one MR per context: the count limit comes first");
	per = (max_pages + mrs - 2) / (mrs - 1);
	if (per * PAGE > self->dev.max_mr_size)
		SKIP(return, "%u MRs of at most %llu bytes cannot reach %llu pages", mrs - 1,
		     (unsigned long long)self->dev.max_mr_size, (unsigned long long)max_pages);
	big = map_pages(per, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, big);
	memset(big, 1, per * PAGE);
	while (left) {
		__u64 chunk = left < per ? left : per;

		ASSERT_EQ(0, reg_mr(self->fd, (uintptr_t)big, chunk * PAGE, 0, &self->info))
			TH_LOG("MR %u of %llu pages, %llu pages left", n,
			       (unsigned long long)chunk, (unsigned long long)left);
		left -= chunk;
		n++;
	}
	EXPECT_EQ(-ENOSPC, reg_mr(self->fd, (uintptr_t)big, PAGE, 0, &self->info))
		TH_LOG("%llu pages in %u MRs registered", (unsigned long long)max_pages, n);
	ASSERT_EQ(0, dereg_mr(self->fd, self->info.mr_handle));
	EXPECT_EQ(0, reg_mr(self->fd, (uintptr_t)big, PAGE, 0, &self->info)) TH_LOG("after DEREG");
	munmap(big, per * PAGE);
}

static int capabilities(struct __user_cap_data_struct *d)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };

	return syscall(SYS_capget, &h, d) ? -errno : 0;
}

static int has_cap_ipc_lock(void)
{
	struct __user_cap_data_struct d[2];

	return !capabilities(d) &&
	       (d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK));
}

/* Clears CAP_IPC_LOCK from this process's effective set; 0 or -errno. */
static int drop_cap_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (capabilities(d))
		return -errno;
	d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

#define LIMIT_PAGES	8

/*
 * In a child: RLIMIT_MEMLOCK LIMIT_PAGES pages above what the process has
 * locked, CAP_IPC_LOCK dropped if @drop, and a context. Returns its fd, or
 * -1 after saying why.
 */
static int limited_context(int drop)
{
	long locked = vm_locked_kb();
	struct rlimit rl;
	int ret, fd;

	if (drop) {
		ret = drop_cap_ipc_lock();
		if (ret || has_cap_ipc_lock()) {
			printf("# dropping CAP_IPC_LOCK: %s\n", strerror(-ret));
			return -1;
		}
	}
	if (locked < 0) {
		printf("# no VmLck in /proc/self/status\n");
		return -1;
	}
	rl.rlim_cur = rl.rlim_max = locked * 1024 + LIMIT_PAGES * PAGE;
	if (setrlimit(RLIMIT_MEMLOCK, &rl)) {
		printf("# setrlimit: %s\n", strerror(errno));
		return -1;
	}
	fd = open(DEV_PATH, O_RDWR);
	if (fd < 0)
		printf("# open: %s\n", strerror(errno));
	return fd;
}

/* Runs @fn in a child process: its exit status, or -1. */
static int in_child(int (*fn)(uint8_t *), uint8_t *buf)
{
	int status;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		int ret = fn(buf);

		fflush(stdout);
		_exit(ret);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* In a child: 0 if @got is @want, else 1 after saying so. */
static int unexpected(int got, int want, const char *what)
{
	if (got == want)
		return 0;
	printf("# %s: %s, expected %s\n", what, strerror(-got), strerror(-want));
	return 1;
}

static int memlock_exceeded(uint8_t *buf)
{
	struct mlx4_bf_mr_info mr;
	int fd = limited_context(1);

	if (fd < 0)
		return 2;
	if (unexpected(reg_mr(fd, (uintptr_t)buf, 4 * PAGE, 0, &mr), 0, "4 pages of 8") ||
	    unexpected(reg_mr(fd, (uintptr_t)buf, 8 * PAGE, 0, &mr), -ENOMEM, "8 more pages"))
		return 1;
	close(fd);
	fd = open(DEV_PATH, O_RDWR);
	if (fd < 0)
		return 2;
	return unexpected(reg_mr(fd, (uintptr_t)buf, (LIMIT_PAGES + 1) * PAGE, 0, &mr),
			  -ENOMEM, "9 pages in one MR");
}

TEST_F(mr, memlock_limit_is_enomem_without_cap_ipc_lock)
{
	EXPECT_EQ(0, in_child(memlock_exceeded, self->buf));
}

static int memlock_given_back(uint8_t *buf)
{
	struct mlx4_bf_mr_info a, b;
	int fd = limited_context(1);

	if (fd < 0)
		return 2;
	if (unexpected(reg_mr(fd, (uintptr_t)buf, 4 * PAGE, 0, &a), 0, "4 pages of 8") ||
	    unexpected(reg_mr(fd, (uintptr_t)buf, 5 * PAGE, 0, &b), -ENOMEM, "5 more") ||
	    /* the refused registration accounted nothing */
	    unexpected(reg_mr(fd, (uintptr_t)buf, 4 * PAGE, 0, &b), 0, "4 more, to the limit") ||
	    unexpected(reg_mr(fd, (uintptr_t)buf, PAGE, 0, &b), -ENOMEM, "one page above it") ||
	    unexpected(dereg_mr(fd, a.mr_handle), 0, "DEREG_MR") ||
	    unexpected(reg_mr(fd, (uintptr_t)buf, 4 * PAGE, 0, &a), 0, "4 pages again"))
		return 1;
	/* closing the context gives back the rest */
	close(fd);
	fd = open(DEV_PATH, O_RDWR);
	if (fd < 0)
		return 2;
	return unexpected(reg_mr(fd, (uintptr_t)buf, LIMIT_PAGES * PAGE, 0, &a), 0,
			  "8 pages after close");
}

TEST_F(mr, memlock_accounting_is_given_back_by_dereg_and_close)
{
	EXPECT_EQ(0, in_child(memlock_given_back, self->buf));
}

static int memlock_exempt(uint8_t *buf)
{
	struct mlx4_bf_mr_info mr;
	int fd = limited_context(0);

	if (fd < 0)
		return 2;
	return unexpected(reg_mr(fd, (uintptr_t)buf, BUF_BYTES, 0, &mr), 0,
			  "16 pages over a limit of 8, with CAP_IPC_LOCK");
}

TEST_F(mr, cap_ipc_lock_is_exempt_from_the_memlock_limit)
{
	if (!has_cap_ipc_lock())
		SKIP(return, "the test runs without CAP_IPC_LOCK");
	EXPECT_EQ(0, in_child(memlock_exempt, self->buf));
}

TEST_F(mr, dereg_of_an_unknown_handle_is_enoent)
{
	EXPECT_EQ(-ENOENT, dereg_mr(self->fd, 0));
	EXPECT_EQ(-ENOENT, dereg_mr(self->fd, 0x12345));
	EXPECT_EQ(-ENOENT, dereg_mr(self->fd, ~0u));
}

TEST_F(mr, dereg_twice_is_enoent)
{
	ASSERT_EQ(0, reg(self, 0, PAGE, 0));
	ASSERT_EQ(0, dereg_mr(self->fd, self->info.mr_handle));
	EXPECT_EQ(-ENOENT, dereg_mr(self->fd, self->info.mr_handle));
}

TEST_F(mr, dereg_of_another_files_mr_is_enoent)
{
	int other = open(DEV_PATH, O_RDWR);

	ASSERT_LE(0, other);
	ASSERT_EQ(0, reg(self, 0, PAGE, 0));
	EXPECT_EQ(-ENOENT, dereg_mr(other, self->info.mr_handle));
	close(other);
	EXPECT_EQ(0, dereg_mr(self->fd, self->info.mr_handle)) TH_LOG("still its owner's");
}

TEST_F(mr, close_with_mrs_registered_unpins_them)
{
	long pinned = debugfs_counter("device", "pinned_pages");
	long mrs = debugfs_counter("device", "mrs"), locked = vm_locked_kb();
	uint64_t mpts = 0, pages = 0;
	struct mlx4_bf_mr_info info;
	/* no mapping of it keeps the file open: close() releases it */
	int fd = open(DEV_PATH, O_RDWR);

	ASSERT_LE(0, fd);
	if (self->v4) {
		mpts = model_read(&self->m, MODEL_MPTS);
		pages = model_read(&self->m, MODEL_MR_PAGES);
	}
	ASSERT_EQ(0, reg_mr(fd, (uintptr_t)self->buf, 4 * PAGE, 0, &info));
	ASSERT_EQ(0, reg_mr(fd, (uintptr_t)self->buf + 100, 2 * PAGE, MLX4_BF_ACCESS_LOCAL_WRITE,
			    &info));
	ASSERT_EQ(0, reg_mr(fd, (uintptr_t)self->buf, BUF_BYTES, ACCESS_RDMA, &info));
	if (pinned >= 0)
		EXPECT_EQ(pinned + 4 + 3 + BUF_PAGES, debugfs_counter("device", "pinned_pages"));
	ASSERT_EQ(0, close(fd));
	EXPECT_EQ(locked, vm_locked_kb()) TH_LOG("VmLck after close");
	if (self->v4) {
		EXPECT_EQ(mpts, model_read(&self->m, MODEL_MPTS));
		EXPECT_EQ(pages, model_read(&self->m, MODEL_MR_PAGES));
	}
	if (pinned < 0 || mrs < 0)
		SKIP(return, NO_DEBUGFS);
	EXPECT_EQ(pinned, debugfs_counter("device", "pinned_pages"));
	EXPECT_EQ(mrs, debugfs_counter("device", "mrs"));
}

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

TEST_F(pair, gather_send_lands_byte_exact_in_the_receivers_buffer)
{
	struct pair *p = &self->p;
	/* 700 bytes across a page boundary of the MR */
	struct sge sg = { (uintptr_t)p->abuf + PAGE - 300, 700, p->amr.lkey };
	uint64_t recvs = 0, bytes = 0, refused = 0;

	if (p->v4) {
		recvs = model_read(&p->m, MODEL_RECV_WQES);
		bytes = model_read(&p->m, MODEL_PAYLOAD_BYTES);
		refused = model_read(&p->m, MODEL_REFUSED_SEGS);
	}
	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, p->abuf + PAGE - 300, 700);
	if (p->v4) {
		EXPECT_EQ(recvs + 1, model_read(&p->m, MODEL_RECV_WQES));
		EXPECT_EQ(bytes + 700, model_read(&p->m, MODEL_PAYLOAD_BYTES));
		EXPECT_EQ(refused, model_read(&p->m, MODEL_REFUSED_SEGS));
	}
}

TEST_F(pair, gather_from_two_mrs_arrives_in_segment_order)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info second;
	struct sge sg[2];
	uint8_t want[300];

	ASSERT_EQ(0, reg_mr(p->a.fd, (uintptr_t)p->abuf + 9 * PAGE, PAGE, 0, &second));
	sg[0] = (struct sge){ (uintptr_t)p->abuf + 9 * PAGE + 50, 100, second.lkey };
	sg[1] = (struct sge){ (uintptr_t)p->abuf + 3, 200, p->amr.lkey };
	memcpy(want, p->abuf + 9 * PAGE + 50, 100);
	memcpy(want + 100, p->abuf + 3, 200);
	ASSERT_EQ(0, send_gather(p, sg, 2));
	expect_received(_metadata, p, want, 300);
}

TEST_F(pair, unregistered_address_is_refused_and_nothing_is_posted)
{
	struct pair *p = &self->p;
	struct sge sg = { 0xffff888000000000ull, 64, 0x1234 };

	build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1);
	expect_refused(_metadata, p, 32, 0, MLX4_BF_REJECT_LKEY);
}

TEST_F(pair, reserved_lkey_is_refused)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf, 64, RESERVED_LKEY };

	build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1);
	expect_refused(_metadata, p, 32, 0, MLX4_BF_REJECT_LKEY);
}

TEST_F(pair, another_files_lkey_is_refused)
{
	struct pair *p = &self->p;
	/* b's MR, in the same process: a key of another open file all the same */
	struct sge sg = { (uintptr_t)p->bbuf, 64, p->bmr.lkey };

	build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1);
	expect_refused(_metadata, p, 32, 0, MLX4_BF_REJECT_LKEY);
}

TEST_F(pair, stale_lkey_after_dereg_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info gone;
	struct sge sg;

	ASSERT_EQ(0, reg_mr(p->a.fd, (uintptr_t)p->abuf, PAGE, 0, &gone));
	ASSERT_EQ(0, dereg_mr(p->a.fd, gone.mr_handle));
	sg = (struct sge){ (uintptr_t)p->abuf, 64, gone.lkey };
	build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1);
	expect_refused(_metadata, p, 32, 0, MLX4_BF_REJECT_LKEY);
}

/* An MR of a over 3000 bytes from abuf + 100, not page-aligned at either end. */
#define PART_OFF	100
#define PART_LEN	3000

static __u32 reg_part(struct __test_metadata *_metadata, struct pair *p)
{
	struct mlx4_bf_mr_info part;

	EXPECT_EQ(0, reg_mr(p->a.fd, (uintptr_t)p->abuf + PART_OFF, PART_LEN, 0, &part));
	return part.lkey;
}

TEST_F(pair, gather_one_byte_past_the_mrs_end_is_refused)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf + PART_OFF + PART_LEN - 64, 65,
			  reg_part(_metadata, p) };

	build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1);
	expect_refused(_metadata, p, 32, 0, MLX4_BF_REJECT_RANGE);
}

TEST_F(pair, gather_ending_at_the_mrs_last_byte_is_accepted)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf + PART_OFF + PART_LEN - 64, 64,
			  reg_part(_metadata, p) };

	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, p->abuf + PART_OFF + PART_LEN - 64, 64);
}

TEST_F(pair, gather_starting_before_the_mr_is_refused)
{
	struct pair *p = &self->p;
	/* in the MR's first page, one byte before the MR */
	struct sge sg = { (uintptr_t)p->abuf + PART_OFF - 1, 10, reg_part(_metadata, p) };

	build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1);
	expect_refused(_metadata, p, 32, 0, MLX4_BF_REJECT_RANGE);
}

TEST_F(pair, gather_segment_past_the_end_after_a_good_one_is_refused)
{
	struct pair *p = &self->p;
	struct sge sg[2] = {
		{ (uintptr_t)p->abuf, 64, p->amr.lkey },
		{ (uintptr_t)p->abuf + BUF_BYTES - 10, 11, p->amr.lkey },
	};

	build_gather(p->wqe, OP_SEND, 0, 0, sg, 2);
	expect_refused(_metadata, p, 48, 0, MLX4_BF_REJECT_RANGE);
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

TEST_F(pair, rdma_write_lands_exactly_in_the_peers_memory)
{
	struct pair *p = &self->p;
	uint8_t want[100];
	int len = build_rdma_write(p->wqe, 100, 0x40, (uintptr_t)p->bbuf + 1000,
				   p->bmr.rkey);

	rdma_write_pattern(want, 100, 0x40);
	expect_landed(_metadata, p, len, 0, p->bbuf + 1000, want, 100);
}

TEST_F(pair, rdma_write_by_doorbell_lands_exactly_in_the_peers_memory)
{
	struct pair *p = &self->p;
	uint8_t want[100];
	int len = build_rdma_write(p->wqe, 100, 0x41, (uintptr_t)p->bbuf + 1000,
				   p->bmr.rkey);

	rdma_write_pattern(want, 100, 0x41);
	expect_landed(_metadata, p, len, MLX4_BF_POST_F_FORCE_DOORBELL, p->bbuf + 1000,
		      want, 100);
}

TEST_F(pair, rdma_write_from_a_gather_source_lands_exactly)
{
	struct pair *p = &self->p;
	/* 3000 bytes, across a page boundary at both ends */
	struct sge sg = { (uintptr_t)p->abuf + 2 * PAGE - 1000, 3000, p->amr.lkey };
	int len = build_gather(p->wqe, OP_RDMA_WRITE, (uintptr_t)p->bbuf + 5 * PAGE - 7,
			       p->bmr.rkey, &sg, 1);

	expect_landed(_metadata, p, len, 0, p->bbuf + 5 * PAGE - 7,
		      p->abuf + 2 * PAGE - 1000, 3000);
}

TEST_F(pair, rdma_write_ending_at_the_peers_last_byte_lands)
{
	struct pair *p = &self->p;
	uint8_t want[100];
	uint8_t *dst = p->bbuf + BUF_BYTES - 100;
	int len = build_rdma_write(p->wqe, 100, 0x42, (uintptr_t)dst, p->bmr.rkey);
	uint64_t writes = 0;

	rdma_write_pattern(want, 100, 0x42);
	if (p->v4)
		writes = model_read(&p->m, MODEL_RDMA_WRITES);
	ASSERT_EQ(0, post_send(p->a.fd, p->a.qp.qp_handle, p->wqe, len, 0, NULL));
	if (p->v4)
		EXPECT_EQ(writes + 1, model_read(&p->m, MODEL_RDMA_WRITES));
	EXPECT_EQ(0, wait_landed(dst, want, 100));
}

TEST_F(pair, rdma_write_imm_gives_the_peer_a_receive_cqe)
{
	struct pair *p = &self->p;
	uint8_t want[48];
	const struct mlx4_bf_cqe *cqe;
	int len = build_rdma_write(p->wqe, 48, 0x43, (uintptr_t)p->bbuf + 64,
				   p->bmr.rkey);

	put_be32(p->wqe, OP_RDMA_WRITE_IMM);
	put_be32(p->wqe + 12, 0xfeedf00d);
	rdma_write_pattern(want, 48, 0x43);
	ASSERT_EQ(0, post_send(p->a.fd, p->a.qp.qp_handle, p->wqe, len, 0, NULL));
	cqe = ep_wait(&p->b, 2000);
	ASSERT_NE(NULL, cqe) TH_LOG("b got no completion");
	EXPECT_EQ(MLX4_BF_CQE_OPCODE_RDMA_WRITE_IMM, cqe_opcode(cqe));
	EXPECT_EQ(0, cqe->owner_sr_opcode & MLX4_BF_CQE_IS_SEND) TH_LOG("a receive CQE has IS_SEND clear");
	EXPECT_EQ(0xfeedf00d, ntohl(cqe->immed)) TH_LOG("immediate");
	EXPECT_EQ(48, ntohl(cqe->byte_cnt)) TH_LOG("byte_cnt");
	EXPECT_EQ(p->b.qp.qpn, ntohl(cqe->my_qpn) & 0xffffff) TH_LOG("my_qpn");
	EXPECT_EQ(p->a.qp.qpn, ntohl(cqe->src_qpn) & 0xffffff) TH_LOG("source QPN");
	/* the receive CQE comes after the data: it is there already */
	EXPECT_EQ(0, memcmp(p->bbuf + 64, want, 48));
}

TEST_F(pair, rkey_without_remote_write_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info local;
	int len;

	ASSERT_EQ(0, reg_mr(p->b.fd, (uintptr_t)p->bbuf, BUF_BYTES,
			    MLX4_BF_ACCESS_LOCAL_WRITE, &local));
	len = build_rdma_write(p->wqe, 40, 1, (uintptr_t)p->bbuf + 8, local.rkey);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
	expect_refused(_metadata, p, len, MLX4_BF_POST_F_FORCE_DOORBELL, MLX4_BF_REJECT_RKEY);
	EXPECT_EQ(0, p->bbuf[8]);
}

TEST_F(pair, rkey_of_a_file_that_is_not_the_peer_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info own, third;
	int c = open(DEV_PATH, O_RDWR), len;

	ASSERT_LE(0, c);
	/* a's own remote-writable MR: a's QP is connected to b, not to itself */
	ASSERT_EQ(0, reg_mr(p->a.fd, (uintptr_t)p->bbuf, BUF_BYTES, ACCESS_RDMA, &own));
	ASSERT_EQ(0, reg_mr(c, (uintptr_t)p->bbuf, BUF_BYTES, ACCESS_RDMA, &third));
	len = build_rdma_write(p->wqe, 40, 1, (uintptr_t)p->bbuf + 8, own.rkey);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
	len = build_rdma_write(p->wqe, 40, 1, (uintptr_t)p->bbuf + 8, third.rkey);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
	EXPECT_EQ(0, p->bbuf[8]);
	close(c);
}

TEST_F(pair, rdma_write_one_byte_past_the_peers_end_is_refused)
{
	struct pair *p = &self->p;
	int len = build_rdma_write(p->wqe, 100, 1, (uintptr_t)p->bbuf + BUF_BYTES - 99,
				   p->bmr.rkey);

	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
	expect_refused(_metadata, p, len, MLX4_BF_POST_F_FORCE_DOORBELL, MLX4_BF_REJECT_RKEY);
}

TEST_F(pair, rdma_write_gathered_past_the_peers_end_is_refused)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf, 2 * PAGE, p->amr.lkey };
	int len = build_gather(p->wqe, OP_RDMA_WRITE,
			       (uintptr_t)p->bbuf + BUF_BYTES - 2 * PAGE + 1, p->bmr.rkey,
			       &sg, 1);

	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
}

TEST_F(pair, rdma_write_starting_before_the_peers_mr_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info part;
	int len;

	ASSERT_EQ(0, reg_mr(p->b.fd, (uintptr_t)p->bbuf + 200, 1000, ACCESS_RDMA, &part));
	len = build_rdma_write(p->wqe, 16, 1, (uintptr_t)p->bbuf + 199, part.rkey);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
}

TEST_F(pair, stale_rkey_after_the_peer_deregisters_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info gone;
	int len;

	ASSERT_EQ(0, reg_mr(p->b.fd, (uintptr_t)p->bbuf, PAGE, ACCESS_RDMA, &gone));
	ASSERT_EQ(0, dereg_mr(p->b.fd, gone.mr_handle));
	len = build_rdma_write(p->wqe, 16, 1, (uintptr_t)p->bbuf, gone.rkey);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
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

TEST_F(pair, rdma_read_lands_exactly_in_the_requesters_memory)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info readable;
	/* 3000 bytes, across page boundaries at both ends, on both sides */
	uint8_t *src = p->bbuf + 3 * PAGE - 500, *dst = p->abuf + 6 * PAGE - 7;
	struct sge sg = { (uintptr_t)dst, 3000, p->amr.lkey };
	uint64_t reads = 0, bytes = 0;
	int v8 = p->v4 && model_version(&p->m) >= 8;
	int len;

	readable_source(_metadata, p, &readable, src, 3000);
	memset(dst - 1, 0, 3002);
	len = build_gather(p->wqe, OP_RDMA_READ, (uintptr_t)src, readable.rkey, &sg, 1);
	if (v8) {
		reads = model_read(&p->m, MODEL_RDMA_READS);
		bytes = model_read(&p->m, MODEL_RDMA_READ_BYTES);
	}
	ASSERT_EQ(0, post_send(p->a.fd, p->a.qp.qp_handle, p->wqe, len, 0, NULL));
	if (v8) {
		/* the read waits for the post's writes; the model ran the WQE */
		EXPECT_EQ(reads + 1, model_read(&p->m, MODEL_RDMA_READS));
		EXPECT_EQ(bytes + 3000, model_read(&p->m, MODEL_RDMA_READ_BYTES));
	}
	EXPECT_EQ(0, wait_landed(dst, src, 3000)) TH_LOG("byte %ld differs",
							 first_difference(dst, src, 3000));
	EXPECT_EQ(0, dst[-1]) TH_LOG("the byte before the target was written");
	EXPECT_EQ(0, dst[3000]) TH_LOG("the byte after the target was written");
}

TEST_F(pair, rdma_read_into_a_region_without_local_write_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info readable, read_only;
	struct sge sg;
	int len;

	readable_source(_metadata, p, &readable, p->bbuf, 64);
	ASSERT_EQ(0, reg_mr(p->a.fd, (uintptr_t)p->abuf, BUF_BYTES, 0, &read_only));
	sg = (struct sge){ (uintptr_t)p->abuf + 64, 64, read_only.lkey };
	len = build_gather(p->wqe, OP_RDMA_READ, (uintptr_t)p->bbuf, readable.rkey, &sg, 1);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_LKEY);
	/* the same region gathers for a SEND: local read is always allowed */
	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, p->abuf + 64, 64);
}

TEST_F(pair, rdma_read_of_a_region_without_remote_read_is_refused)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf, 64, p->amr.lkey };
	/* b's region takes remote writes, not reads */
	int len = build_gather(p->wqe, OP_RDMA_READ, (uintptr_t)p->bbuf, p->bmr.rkey, &sg, 1);

	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
}

TEST_F(pair, rdma_read_one_byte_past_the_peers_end_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info readable;
	struct sge sg = { (uintptr_t)p->abuf, 100, p->amr.lkey };
	int len;

	readable_source(_metadata, p, &readable, p->bbuf, 16);
	len = build_gather(p->wqe, OP_RDMA_READ, (uintptr_t)p->bbuf + BUF_BYTES - 99,
			   readable.rkey, &sg, 1);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
}

TEST_F(pair, rdma_read_with_inline_data_is_einval)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info readable;
	int len;

	readable_source(_metadata, p, &readable, p->bbuf, 16);
	len = build_rdma_write(p->wqe, 16, 1, (uintptr_t)p->bbuf, readable.rkey);
	put_be32(p->wqe, OP_RDMA_READ);
	EXPECT_EQ(-EINVAL, post_send(p->a.fd, p->a.qp.qp_handle, p->wqe, len, 0, NULL));
}

TEST_F(pair, dereg_with_sends_outstanding_is_ebusy_until_they_complete)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf, BUF_BYTES, 0 };
	int busy = 0, ret, len;

	/* RDMA writes of 64 KiB each: the adapter takes a while for them */
	for (int round = 0; round < 10 && !busy; round++) {
		struct mlx4_bf_mr_info src;
		uint64_t end;

		ASSERT_EQ(0, reg_mr(p->a.fd, (uintptr_t)p->abuf, BUF_BYTES, 0, &src));
		sg.lkey = src.lkey;
		len = build_gather(p->wqe, OP_RDMA_WRITE, (uintptr_t)p->bbuf, p->bmr.rkey,
				   &sg, 1);
		for (__u32 i = 0; i < p->dev.sq_entries; i++) {
			ASSERT_EQ(0, post_send(p->a.fd, p->a.qp.qp_handle, p->wqe, len,
					       0, NULL)) TH_LOG("round %d, post %u", round, i);
		}
		ret = dereg_mr(p->a.fd, src.mr_handle);
		if (!ret)
			continue;	/* all completed already: nothing outstanding */
		ASSERT_EQ(-EBUSY, ret) TH_LOG("round %d", round);
		busy = 1;
		/* each DEREG_MR reaps completions first: it succeeds once they are in */
		end = now_ns() + 5000000000ull;
		while ((ret = dereg_mr(p->a.fd, src.mr_handle)) == -EBUSY && now_ns() < end)
			usleep(1000);
		EXPECT_EQ(0, ret) TH_LOG("DEREG_MR after the sends completed");
	}
	if (!busy)
		SKIP(return, "the adapter completed every send before DEREG_MR looked");
}

TEST_F(pair, fork_keeps_the_parents_mr_and_its_pages)
{
	struct pair *p = &self->p;
	long pinned = debugfs_counter("device", "pinned_pages"), locked = vm_locked_kb();
	struct sge sg = { (uintptr_t)p->abuf, 256, p->amr.lkey };
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
	/* the parent writes its pages while the child shares the rest */
	for (int i = 0; i < 256; i++)
		p->abuf[i] = want[i] = (uint8_t)(0x31 + 5 * i);
	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, want, 256);
	ASSERT_EQ(1, write(go[1], &c, 1));
	ASSERT_EQ(1, read(done[0], &c, 1));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* what the child wrote is not what the adapter reads for the parent */
	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, want, 256);
	EXPECT_EQ(locked, vm_locked_kb()) TH_LOG("the parent's VmLck");
	if (pinned >= 0)
		EXPECT_EQ(pinned, debugfs_counter("device", "pinned_pages"));
}

/* Last: the fault counters over every test before. */
FIXTURE(program) {};
FIXTURE_SETUP(program) {}
FIXTURE_TEARDOWN(program) {}

TEST_F(program, adapter_saw_no_protection_fault_in_any_test)
{
	struct model m;

	if (!faults_at_start.v4 || !analyzer_v4(&m))
		SKIP(return, NO_V4);
	EXPECT_EQ(faults_at_start.local, model_read(&m, MODEL_LOCAL_PROT_FAULTS))
		TH_LOG("local protection faults");
	EXPECT_EQ(faults_at_start.remote, model_read(&m, MODEL_REMOTE_ACCESS_FAULTS))
		TH_LOG("remote access faults");
	model_close(&m);
}

TEST_HARNESS_MAIN
