// SPDX-License-Identifier: GPL-2.0
/*
 * What must hold once every selftest program has ended (run_guest.sh runs
 * it last, as the result "suite_invariants"): with every context closed the
 * device has no page pinned (debugfs pinned_pages), and the adapter never
 * saw a local protection or remote access fault (the device model's diag
 * registers 0x5a0 and 0x5a8, version 4, never reset).
 *
 * Prints what it read as "#" lines and exits 0 if all of it holds, 1 if not,
 * 4 (SKIP) without a version 4 diagnostic block and nothing failed.
 */
#include "mlx4_bf_model.h"

int main(void)
{
	long pinned = debugfs_counter("device", "pinned_pages");
	long mrs = debugfs_counter("device", "mrs");
	int failed = 0, v4 = 0;
	struct model m;

	if (pinned < 0) {
		printf("# no pinned_pages in " DEBUGFS_DIR "/device/stats: not checked\n");
	} else {
		printf("# pinned_pages %ld, mrs %ld\n", pinned, mrs);
		if (pinned || mrs > 0) {
			printf("# pages are still pinned with every context closed\n");
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

		v4 = 1;
		printf("# local protection faults %llu, remote access faults %llu\n",
		       (unsigned long long)local, (unsigned long long)remote);
		if (local || remote) {
			printf("# the adapter saw a protection fault\n");
			failed = 1;
		}
		model_close(&m);
	}
	if (failed)
		return 1;
	return v4 ? 0 : 4;
}
