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
	unsigned char last_page[4096];
	const unsigned char *bar2;
	struct stat st;
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
	/* The whole BAR is backed: its last page reads, twice alike. */
	memcpy(last_page, bar2 + st.st_size - sizeof(last_page), sizeof(last_page));
	EXPECT_EQ(0, memcmp(last_page, bar2 + st.st_size - sizeof(last_page), sizeof(last_page)));
	munmap((void *)bar2, st.st_size);
	close(fd);
}

TEST_HARNESS_MAIN
