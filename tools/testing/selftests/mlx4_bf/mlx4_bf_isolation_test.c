// SPDX-License-Identifier: GPL-2.0
/*
 * Nothing of one process reaches another: a context's mappings of its
 * shared area show only bytes it wrote or received itself, whichever
 * context held the area before, and only for the QPs it has.
 */
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "mlx4_bf_model.h"

#define MARK 0xa5

/* Every region of @q that user space may map, with its length. */
struct region {
	__u64 offset;
	size_t len;
};

static int regions(const struct mlx4_bf_qp_info *q, struct region *r)
{
	r[0] = (struct region){ q->cq_offset, (size_t)q->cq_entries * q->cqe_size };
	r[1] = (struct region){ q->cq_db_offset, 4096 };
	r[2] = (struct region){ q->recv_offset, (size_t)q->rq_entries * q->recv_buf_size };
	r[3] = (struct region){ q->wqe_offset, 4096 };
	return 4;
}

/* How many bytes of @len at @p are @v. */
static size_t count_of(const uint8_t *p, size_t len, uint8_t v)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += p[i] == v;
	return n;
}

static size_t nonzero(const uint8_t *p, size_t len)
{
	return len - count_of(p, len, 0);
}

/*
 * A child process opens a context, creates two QPs, fills the writable
 * pages of its second QP (its WQE page and CQ doorbell page) and exits:
 * its context closes and its area goes back. Returns the second QP's
 * offsets, as the child saw them.
 */
static int leave_bytes_behind(struct mlx4_bf_qp_info *second)
{
	struct mlx4_bf_qp_info *shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE,
					      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int status;
	pid_t pid;

	if (shared == MAP_FAILED)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		struct mlx4_bf_qp_info first;
		int fd = open(DEV_PATH, O_RDWR);
		uint8_t *wqe, *db;

		if (fd < 0 || create_qp(fd, &first) || create_qp(fd, shared))
			_exit(1);
		wqe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, shared->wqe_offset);
		db = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
			  shared->cq_db_offset);
		if (wqe == MAP_FAILED || db == MAP_FAILED)
			_exit(2);
		memset(wqe, MARK, 4096);
		memset(db + 4, MARK, 4092);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return -ECHILD;
	*second = *shared;
	munmap(shared, sizeof(*shared));
	return 0;
}

TEST(a_new_context_never_sees_what_the_last_one_left_in_its_area)
{
	struct mlx4_bf_qp_info left = {}, first, second;
	struct region r[4];
	int fd, n;

	if (access(DEV_PATH, F_OK))
		SKIP(return, NO_DEVICE);
	ASSERT_EQ(0, leave_bytes_behind(&left));
	fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, create_qp(fd, &first));
	/* the child's second QP is no QP of ours: none of its regions maps */
	n = regions(&left, r);
	for (int i = 0; i < n; i++) {
		void *p = mmap(NULL, r[i].len, PROT_READ, MAP_SHARED, fd, r[i].offset);

		EXPECT_EQ(MAP_FAILED, p) TH_LOG("region %d of a QP index this context never created", i);
		EXPECT_EQ(EINVAL, p == MAP_FAILED ? errno : 0);
		if (p != MAP_FAILED)
			munmap(p, r[i].len);
	}
	/*
	 * Created now, none of its regions holds a byte of the child's; the
	 * pages the child wrote are all zero (the CQ ring may hold what the
	 * adapter put there for this QP).
	 */
	ASSERT_EQ(0, create_qp(fd, &second));
	ASSERT_EQ(left.wqe_offset, second.wqe_offset) TH_LOG("QP indices are taken in order");
	n = regions(&second, r);
	for (int i = 0; i < n; i++) {
		uint8_t *p = mmap(NULL, r[i].len, PROT_READ, MAP_SHARED, fd, r[i].offset);

		ASSERT_NE(MAP_FAILED, p) TH_LOG("region %d", i);
		EXPECT_EQ(0, count_of(p, r[i].len, MARK)) TH_LOG("region %d", i);
		if (r[i].offset == second.wqe_offset || r[i].offset == second.cq_db_offset)
			EXPECT_EQ(0, nonzero(p, r[i].len)) TH_LOG("region %d", i);
		munmap(p, r[i].len);
	}
	close(fd);
}

TEST(a_destroyed_qp_maps_no_more_and_a_kept_mapping_shows_own_memory)
{
	struct mlx4_bf_qp_info first, second, again;
	uint8_t *kept;
	void *p;
	int fd;

	if (access(DEV_PATH, F_OK))
		SKIP(return, NO_DEVICE);
	fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, create_qp(fd, &first));
	ASSERT_EQ(0, create_qp(fd, &second));
	kept = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, second.wqe_offset);
	ASSERT_NE(MAP_FAILED, kept);
	memset(kept, MARK, 4096);
	ASSERT_EQ(0, destroy_qp(fd, second.qp_handle));
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, second.wqe_offset);
	EXPECT_EQ(MAP_FAILED, p) TH_LOG("the WQE page of a destroyed QP");
	EXPECT_EQ(EINVAL, errno);
	/* the mapping made before stays: the context's own bytes */
	EXPECT_EQ(MARK, kept[4095]);
	ASSERT_EQ(0, create_qp(fd, &again));
	ASSERT_EQ(second.wqe_offset, again.wqe_offset);
	EXPECT_EQ(0, nonzero(kept, 4096)) TH_LOG("a new QP at the index starts cleared");
	munmap(kept, 4096);
	close(fd);
}

TEST_HARNESS_MAIN
