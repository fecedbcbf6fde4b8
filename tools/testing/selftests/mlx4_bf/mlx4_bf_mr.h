/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The fixture of the memory-region selftests that register without posting
 * (mlx4_bf_mr_reg_test, mlx4_bf_mr_limit_test): a context without QPs and
 * BUF_PAGES pages of this process to register. Include it after
 * kselftest_harness.h.
 */
#ifndef MLX4_BF_MR_H
#define MLX4_BF_MR_H

#include "mlx4_bf_model.h"

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

#endif /* MLX4_BF_MR_H */
