// SPDX-License-Identifier: GPL-2.0
/*
 * What must hold once every selftest program has ended (run_guest.sh runs
 * it last, as the result "suite_invariants"): with every context closed
 * the adapter holds no memory region and no context (debugfs "mrs",
 * "contexts") and no page is pinned (the kernel's FOLL_PIN pins,
 * /proc/vmstat: pins taken less pins released, ib_umem's among them, back
 * at MLX4_BF_PINS_AT_START, which run_guest.sh read before the first
 * program); and the adapter never saw a local protection or remote access
 * fault (the device model's diag registers 0x5a0 and 0x5a8, version 4,
 * never reset) other than those a test declared (DECLARED_FAULTS: WQEs
 * that the adapter alone checks, libmlx4's own posts or a fuzzed WQE's
 * remote address).
 *
 * Prints what it read as "#" lines and exits 0 if all of it holds, 1 if not,
 * 4 (SKIP) without a version 4 diagnostic block and nothing failed.
 */
#include "mlx4_bf_model.h"

/* The faults tests declared, by kind. */
static void declared(uint64_t *local, uint64_t *remote)
{
	FILE *f = fopen(DECLARED_FAULTS, "r");
	char line[32];

	*local = *remote = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "local", 5))
			++*local;
		else if (!strncmp(line, "remote", 6))
			++*remote;
	}
	fclose(f);
}

/*
 * Pages pinned now by anyone: the counters are per CPU and folded into
 * /proc/vmstat lazily, so stat_refresh folds them first. -1 if unknown.
 */
static long pins_now(void)
{
	int fd = open("/proc/sys/vm/stat_refresh", O_RDONLY);
	char c;
	long taken, released;

	if (fd >= 0) {
		if (read(fd, &c, 1) < 0)
			printf("# stat_refresh: %s\n", strerror(errno));
		close(fd);
	}
	taken = file_key_value("/proc/vmstat", "nr_foll_pin_acquired");
	released = file_key_value("/proc/vmstat", "nr_foll_pin_released");
	return taken < 0 || released < 0 ? -1 : taken - released;
}

int main(void)
{
	long contexts = debugfs_counter("device", "contexts");
	long mrs = debugfs_counter("device", "mrs");
	const char *at_start = getenv("MLX4_BF_PINS_AT_START");
	long pins = pins_now();
	int failed = 0, v4 = 0;
	struct model m;

	if (!at_start || !*at_start || pins < 0) {
		printf("# pins: none counted before the suite, or no nr_foll_pin_* in /proc/vmstat: not checked\n");
	} else {
		printf("# pages pinned %ld, before the suite %s\n", pins, at_start);
		if (pins != atol(at_start)) {
			printf("# pages are pinned that were not before the suite\n");
			failed = 1;
		}
	}

	if (contexts < 0 || mrs < 0) {
		printf("# no contexts or mrs in " DEBUGFS_DIR "/device/stats: not checked\n");
	} else {
		printf("# contexts %ld, mrs %ld\n", contexts, mrs);
		if (contexts || mrs) {
			printf("# the adapter still holds a context or a region with every program ended\n");
			failed = 1;
		}
	}
	if (model_open(&m)) {
		printf("# %s\n", NO_ANALYZER);
	} else if (model_version(&m) < 4) {
		printf("# diag block version %u: no fault counters\n", model_version(&m));
		model_close(&m);
	} else {
		uint64_t local = model_read(&m, MODEL_LOCAL_PROT_FAULTS);
		uint64_t remote = model_read(&m, MODEL_REMOTE_ACCESS_FAULTS);
		uint64_t want_local, want_remote;

		declared(&want_local, &want_remote);
		v4 = 1;
		printf("# local protection faults %llu (%llu declared), remote access faults %llu (%llu declared)\n",
		       (unsigned long long)local, (unsigned long long)want_local,
		       (unsigned long long)remote, (unsigned long long)want_remote);
		if (local != want_local || remote != want_remote) {
			printf("# the adapter saw a protection fault\n");
			failed = 1;
		}
		model_close(&m);
	}
	if (failed)
		return 1;
	return v4 ? 0 : 4;
}
