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
	unsigned char last_page[4096];
	struct bar2 bar2;
	char bdf[64];

	if (bound_device(bdf, sizeof(bdf)))
		SKIP(return, "no device bound to mlx4_bf");
	ASSERT_EQ(0, bar2_open(&bar2));
	ASSERT_LE(2 * 4096, bar2.len);
	/* The whole BAR is backed: its last page reads, twice alike. */
	memcpy(last_page, bar2.map + bar2.len - sizeof(last_page), sizeof(last_page));
	EXPECT_EQ(0, memcmp(last_page, bar2.map + bar2.len - sizeof(last_page), sizeof(last_page)));
	bar2_close(&bar2);
}

#define PAT_LIST "/sys/kernel/debug/x86/pat_memtype_list"

/* The physical start of BAR2, from sysfs; 0 if unknown. */
static unsigned long long bar2_start(const char *bdf)
{
	unsigned long long start = 0, end, flags;
	char path[160];
	FILE *f;

	snprintf(path, sizeof(path), DRIVER_DIR "/%s/resource", bdf);
	f = fopen(path, "r");
	if (!f)
		return 0;
	for (int bar = 0; bar <= 2; bar++)
		if (fscanf(f, "%llx %llx %llx", &start, &end, &flags) != 3)
			start = 0;
	fclose(f);
	return start;
}

/* The PAT memory type of the mapping that covers [start, end), or "". */
static void pat_type(unsigned long long start, unsigned long long end, char *type, size_t len)
{
	unsigned long long s, e;
	char line[160], name[32];
	FILE *f = fopen(PAT_LIST, "r");

	snprintf(type, len, "%s", "");
	if (!f)
		return;
	/* "PAT: [mem 0x00000000fe000000-0x00000000fe400000] uncached-minus" */
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "PAT: [mem 0x%llx-0x%llx] %31s", &s, &e, name) == 3 &&
		    s <= start && end <= e)
			snprintf(type, len, "%s", name);
	fclose(f);
}

/*
 * The UAR area is mapped uncached and the BlueFlame area write-combining
 * (writer=2) or uncached (writer=1), as PAT itself records it.
 */
TEST(bar2_areas_have_the_memory_type_of_the_writer)
{
	struct mlx4_bf_device_info dev;
	unsigned long long start, half;
	char bdf[64], type[32];
	int fd;

	if (bound_device(bdf, sizeof(bdf)) || access(PAT_LIST, R_OK))
		SKIP(return, "no device bound, or no " PAT_LIST " (x86 PAT, debugfs)");
	fd = open(DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, query_device(fd, &dev));
	close(fd);
	start = bar2_start(bdf);
	ASSERT_NE(0, start);
	half = (unsigned long long)dev.num_uars * 4096;

	pat_type(start, start + half, type, sizeof(type));
	EXPECT_STREQ("uncached-minus", type) TH_LOG("UAR area %#llx+%#llx", start, half);
	pat_type(start + half, start + 2 * half, type, sizeof(type));
	EXPECT_STREQ(dev.writer == MLX4_BF_WRITER_WRITE_COMBINING ? "write-combining" :
		     "uncached-minus", type)
		TH_LOG("BlueFlame area %#llx+%#llx", start + half, half);
}

TEST_HARNESS_MAIN
