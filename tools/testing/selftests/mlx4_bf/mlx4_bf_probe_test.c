// SPDX-License-Identifier: GPL-2.0
/*
 * What probe left behind: mlx4_bf bound to the adapter by its ID table (a
 * Mellanox function, nothing bound by hand), and BAR2 mapped with the memory
 * types the writer needs, as PAT itself records them.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mlx4_bf_lib.h"

/* The first line of sysfs file @name of the bound function, or "". */
static void bound_attr(const char *bdf, const char *name, char *buf, size_t len)
{
	char path[160];
	FILE *f;

	snprintf(path, sizeof(path), DRIVER_DIR "/%s/%s", bdf, name);
	buf[0] = 0;
	f = fopen(path, "r");
	if (!f)
		return;
	if (!fgets(buf, len, f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
}

TEST(driver_is_bound_to_a_mellanox_function_by_its_id_table)
{
	char bdf[64], vendor[16], override[32];

	if (access(DRIVER_DIR, F_OK))
		SKIP(return, "mlx4_bf is not loaded");
	ASSERT_EQ(0, bound_device(bdf, sizeof(bdf)));
	bound_attr(bdf, "vendor", vendor, sizeof(vendor));
	EXPECT_STREQ("0x15b3", vendor);
	bound_attr(bdf, "driver_override", override, sizeof(override));
	/* "(null)" or empty: no driver_override, the ID table matched */
	EXPECT_TRUE(!strcmp(override, "(null)") || !override[0])
		TH_LOG("%s was bound through driver_override \"%s\"", bdf, override);
}

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
