// SPDX-License-Identifier: GPL-2.0
/*
 * Registered memory (ABI 3), the regions themselves: REG_MR and DEREG_MR,
 * their keys and handles, the arguments they refuse, and what a region
 * holds while it lives: its pages pinned and accounted, an MPT in the
 * adapter. The device model's analyzer (diagnostic block version 4) counts
 * the MPTs it owns and the pages they translate; the driver's debugfs stats
 * count MRs and pinned pages, and /proc/self/status (VmLck) the pages
 * accounted to the process. Checks on one of those are left out where it is
 * missing (real hardware, a model older than version 4, no debugfs); a test
 * that is nothing else SKIPs. The limits are mlx4_bf_mr_limit_test's, posts
 * naming regions mlx4_bf_mr_post_test's.
 */
#include "kselftest_harness.h"
#include "mlx4_bf_mr.h"

#define NO_DEBUGFS	"no pinned_pages in the debugfs stats (debugfs not mounted?)"

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

TEST_HARNESS_MAIN
