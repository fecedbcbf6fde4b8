// SPDX-License-Identifier: GPL-2.0
/*
 * Registered memory (ABI 3), its limits: the regions and pages a context may
 * have (struct mlx4_bf_device_info), and RLIMIT_MEMLOCK, which REG_MR
 * charges as VFIO does unless the process has CAP_IPC_LOCK. The memlock
 * tests run in a child process that lowers its own limit.
 */
#include <sys/resource.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "mlx4_bf_mr.h"

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

TEST_HARNESS_MAIN
