// SPDX-License-Identifier: GPL-2.0
/*
 * The test bed itself: mlx4_bf is bound to the emulated adapter and its BAR2
 * can be read by user space through sysfs, the observer the other tests use.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mlx4_bf_lib.h"

TEST(driver_is_bound_to_the_adapter)
{
	char bdf[64], path[128], buf[16] = {};
	int fd;

	if (access(DRIVER_DIR, F_OK))
		SKIP(return, "mlx4_bf is not loaded");
	ASSERT_EQ(0, bound_device(bdf, sizeof(bdf)));
	snprintf(path, sizeof(path), DRIVER_DIR "/%s/driver_override", bdf);
	fd = open(path, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_LT(0, read(fd, buf, sizeof(buf) - 1));
	close(fd);
	EXPECT_STREQ("mlx4_bf\n", buf);
}

TEST(bar2_is_readable_through_sysfs)
{
	char bdf[64], path[160];
	struct stat st;
	volatile unsigned char *bar2;
	int fd;

	if (bound_device(bdf, sizeof(bdf)))
		SKIP(return, "no device bound to mlx4_bf");
	snprintf(path, sizeof(path), DRIVER_DIR "/%s/resource2", bdf);
	fd = open(path, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, fstat(fd, &st));
	ASSERT_LE(2 * 4096, st.st_size);
	bar2 = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, bar2);
	/* Touch the first and the last byte: the whole BAR is backed. */
	(void)bar2[0];
	(void)bar2[st.st_size - 1];
	munmap((void *)bar2, st.st_size);
	close(fd);
}

TEST_HARNESS_MAIN
