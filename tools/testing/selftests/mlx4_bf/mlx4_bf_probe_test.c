// SPDX-License-Identifier: GPL-2.0
/*
 * What probe left behind: mlx4_bf bound to the adapter by its ID table (a
 * Mellanox function, nothing bound by hand), its RDMA device registered on
 * that function with a uverbs file to open, and BAR2 mapped with the
 * memory types the writer needs, as PAT itself records them.
 */
#include <dirent.h>
#include <libgen.h>
#include <limits.h>
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

/*
 * The adapter's RDMA device: an mlx4_bf<N> in /sys/class/infiniband whose
 * device is the bound function, and its uverbs character device (the one
 * of /sys/class/infiniband_verbs whose ibdev it is) in /dev/infiniband.
 */
TEST(rdma_device_is_registered_on_the_bound_function)
{
	char bdf[64], path[PATH_MAX], target[PATH_MAX], ibdev[NAME_MAX + 1] = "", name[64];
	struct dirent *de;
	int found = 0;
	DIR *dir;

	if (bound_device(bdf, sizeof(bdf)))
		SKIP(return, "no adapter bound to mlx4_bf");
	dir = opendir("/sys/class/infiniband");
	ASSERT_NE(NULL, dir) TH_LOG("no RDMA device at all");
	while ((de = readdir(dir)))
		if (!strncmp(de->d_name, "mlx4_bf", 7)) {
			ssize_t n;

			snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device", de->d_name);
			n = readlink(path, target, sizeof(target) - 1);
			if (n > 0) {
				target[n] = 0;
				if (!strcmp(basename(target), bdf))
					snprintf(ibdev, sizeof(ibdev), "%s", de->d_name);
			}
		}
	closedir(dir);
	ASSERT_STRNE("", ibdev) TH_LOG("no mlx4_bf<N> on %s", bdf);
	dir = opendir("/sys/class/infiniband_verbs");
	ASSERT_NE(NULL, dir) TH_LOG("no uverbs device at all");
	while (!found && (de = readdir(dir))) {
		FILE *f;

		if (strncmp(de->d_name, "uverbs", 6))
			continue;
		snprintf(path, sizeof(path), "/sys/class/infiniband_verbs/%s/ibdev", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f)) {
			name[strcspn(name, "\n")] = 0;
			if (!strcmp(name, ibdev)) {
				snprintf(path, sizeof(path), "/dev/infiniband/%s", de->d_name);
				found = 1;
			}
		}
		fclose(f);
	}
	closedir(dir);
	ASSERT_TRUE(found) TH_LOG("no uverbs device of %s", ibdev);
	EXPECT_EQ(0, access(path, R_OK | W_OK)) TH_LOG("%s", path);
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
 * (writer=2) or uncached (writer=1), as PAT itself records it. The areas
 * are BAR2's halves (the model's layout: as many BlueFlame pages as UAR
 * pages); the writer is the one the suite loaded the module with.
 */
TEST(bar2_areas_have_the_memory_type_of_the_writer)
{
	unsigned long long start, half;
	char bdf[64], type[32];

	if (bound_device(bdf, sizeof(bdf)) || access(PAT_LIST, R_OK))
		SKIP(return, "no device bound, or no " PAT_LIST " (x86 PAT, debugfs)");
	start = bar2_start(bdf);
	ASSERT_NE(0, start);
	half = bar2_resource_len() / 2;
	ASSERT_NE(0, half);

	pat_type(start, start + half, type, sizeof(type));
	EXPECT_STREQ("uncached-minus", type) TH_LOG("UAR area %#llx+%#llx", start, half);
	pat_type(start + half, start + 2 * half, type, sizeof(type));
	EXPECT_STREQ(store_block_writer() ? "uncached-minus" : "write-combining", type)
		TH_LOG("BlueFlame area %#llx+%#llx", start + half, half);
}

TEST_HARNESS_MAIN
