// SPDX-License-Identifier: GPL-2.0
/*
 * ibv_fault_walk's view of the machine (see fault_walk.h): what this
 * process, the kernel, the driver and the device model hold, and whether
 * it is back at idle; the adapter bound and unbound through sysfs; the two
 * kinds of fault armed and disarmed; the kernel log's problem reports. The model's diagnostic block
 * is read through the PCI function's resource0, whoever has it bound
 * (tools/testing/selftests/mlx4_bf/mlx4_bf_model.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mlx4_bf_model.h"
#include "fault_walk.h"

#define STATS		"/sys/kernel/debug/" DEV_NAME "/device/stats"
#define FAIL_NTH	"/proc/thread-self/fail-nth"
#define MODEL_VERSION_SKIP	12
/* Records after a report's first line that belong to it (its dump). */
#define REPORT_RECORDS	60

char bdf[32];
struct held idle, unbound;
static struct model model;
static int fail_fd = -1, kmsg_fd = -1;

/* The first number in FILE after KEY, or -1. */
static long file_value(const char *file, const char *key)
{
	char line[256];
	size_t n = strlen(key);
	long v = -1;
	FILE *f = fopen(file, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && sscanf(line + n, " %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

static long pinned_pages_now(void)
{
	int fd = open("/proc/sys/vm/stat_refresh", O_WRONLY);

	/* vmstat's per-CPU counters are folded in lazily: fold them first. */
	if (fd >= 0) {
		if (write(fd, "1", 1) < 0)
			printf("# stat_refresh: %s\n", strerror(errno));
		close(fd);
	}
	return file_value("/proc/vmstat", "nr_foll_pin_acquired") -
	       file_value("/proc/vmstat", "nr_foll_pin_released");
}

/*
 * The driver's interrupt lines in /proc/interrupts (mlx4_bf-async,
 * mlx4_bf-comp<N>). A bind may get fewer MSI-X vectors than it asks for
 * (the MSI core hands back those it could set up) and then makes fewer
 * EQs, as mlx4_core does: the EQs are compared net of them.
 */
static long irq_lines(void)
{
	char line[512];
	long n = 0;
	FILE *f = fopen("/proc/interrupts", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, " mlx4_bf-"))
			n++;
	fclose(f);
	return n;
}

void held_now(struct held *h)
{
	uint64_t live = model_read(&model, MODEL_LIVE);

	h->vm_pin = file_value("/proc/self/status", "VmPin:");
	h->vm_lck = file_value("/proc/self/status", "VmLck:");
	h->pins = pinned_pages_now();
	h->contexts = file_value(STATS, "contexts");
	h->mrs = file_value(STATS, "mrs");
	h->mpts = model_read(&model, MODEL_MPTS);
	h->eqs_cqs = (uint32_t)live;
	h->qps = live >> 32;
	h->vectors = irq_lines();
	h->fw_phase = model_read(&model, MODEL_FW_PHASE);
	h->fw_pages = model_read(&model, MODEL_FW_PAGES);
	h->icm_pages = model_read(&model, MODEL_ICM_PAGES);
}

int held_diff(const struct held *want, const struct held *now, char *buf,
	      size_t len)
{
	const struct {
		const char *name;
		long long want, now;
	} f[] = {
		{ "VmPin kB", want->vm_pin, now->vm_pin },
		{ "VmLck kB", want->vm_lck, now->vm_lck },
		{ "pinned pages", want->pins, now->pins },
		{ "contexts", want->contexts, now->contexts },
		{ "mrs", want->mrs, now->mrs },
		{ "MPTs", want->mpts, now->mpts },
		{ "EQs+CQs less interrupts", (long long)want->eqs_cqs - want->vectors,
		  (long long)now->eqs_cqs - now->vectors },
		{ "QPs", want->qps, now->qps },
		{ "fw_phase", want->fw_phase, now->fw_phase },
		{ "fw_pages", want->fw_pages, now->fw_pages },
		{ "ICM pages", want->icm_pages, now->icm_pages },
	};
	size_t i, at = 0;
	int diffs = 0;

	buf[0] = 0;
	for (i = 0; i < ARRAY_SIZE(f); i++) {
		if (f[i].want == f[i].now)
			continue;
		diffs++;
		if (at < len)
			at += snprintf(buf + at, len - at, "%s%s %lld (was %lld)",
				       diffs > 1 ? ", " : "", f[i].name,
				       f[i].now, f[i].want);
	}
	return diffs;
}

/* The ConnectX-3 function (vendor 0x15b3) and the model's block. */
void state_open(void)
{
	char path[300];
	struct dirent *de;
	DIR *dir = opendir("/sys/bus/pci/devices");
	int fd;

	if (!dir)
		die("/sys/bus/pci/devices", errno);
	while ((de = readdir(dir))) {
		char vendor[16] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor",
			 de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(vendor, sizeof(vendor), f) &&
		    !strcmp(vendor, "0x15b3\n") && strlen(de->d_name) < sizeof(bdf))
			snprintf(bdf, sizeof(bdf), "%s", de->d_name);
		fclose(f);
	}
	closedir(dir);
	if (!bdf[0])
		die("no ConnectX-3 function", ENODEV);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource0", bdf);
	fd = open(path, O_RDWR | O_SYNC);
	if (fd < 0)
		die(path, errno);
	model.map_len = 4096;
	model.map = mmap(NULL, model.map_len, PROT_READ | PROT_WRITE,
			 MAP_SHARED, fd, MODEL_DIAG);
	close(fd);
	if (model.map == MAP_FAILED)
		die("mmap resource0", errno);
	model.diag = model.map;
	if ((uint32_t)model_read(&model, 0) != MODEL_MAGIC ||
	    model_version(&model) < MODEL_VERSION_SKIP)
		die("no device model with CMD_FAULT's skip (diag version 12)",
		    ENODEV);
	fail_fd = open(FAIL_NTH, O_RDWR);
	if (fail_fd < 0)
		die(FAIL_NTH " (CONFIG_FAULT_INJECTION)", errno);
}

int is_bound(void)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), DRV "/%s", bdf);
	return !lstat(path, &st);
}

int ibdev_present(void)
{
	struct stat st;

	return !stat(IB_DEV, &st);
}

/* mlx4_bf0's port 1 ACTIVE and LinkUp within TENTHS of a second. */
int port_active(int tenths)
{
	char state[64], phys[64];
	FILE *f;
	int i;

	for (i = 0; i < tenths; i++) {
		state[0] = phys[0] = 0;
		f = fopen(IB_DEV "/ports/1/state", "r");
		if (f) {
			if (!fgets(state, sizeof(state), f))
				state[0] = 0;
			fclose(f);
		}
		f = fopen(IB_DEV "/ports/1/phys_state", "r");
		if (f) {
			if (!fgets(phys, sizeof(phys), f))
				phys[0] = 0;
			fclose(f);
		}
		if (!strcmp(state, "4: ACTIVE\n") && !strcmp(phys, "5: LinkUp\n"))
			return 1;
		usleep(100000);
	}
	return 0;
}

int sysfs_bdf(const char *file)
{
	char path[128];
	int fd, err = 0;

	snprintf(path, sizeof(path), DRV "/%s", file);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return errno;
	if (write(fd, bdf, strlen(bdf)) < 0)
		err = errno;
	close(fd);
	return err;
}

int unbind_now(void)
{
	int err = is_bound() ? sysfs_bdf("unbind") : 0;

	return err ? err : is_bound() ? EBUSY : 0;
}

int bind_now(void)
{
	int err = is_bound() ? 0 : sysfs_bdf("bind");

	if (err)
		return err;
	if (!ibdev_present())
		return ERR_NO_IBDEV;
	return port_active(100) ? 0 : ETIMEDOUT;
}

/* Unbound and bound again, both measured: after a leak, the new idle. */
void rebaseline(void)
{
	if (unbind_now())
		die("unbind", EIO);
	held_now(&unbound);
	if (bind_now())
		die("bind", EIO);
	held_now(&idle);
}

/*
 * Everything given back: the adapter bound, everything at idle. What a
 * destroy kept (KEEPS) must be gone after unbind and rebind. Returns 1 if
 * so; else says what was left in LEFT.
 */
int back_to_idle(int keeps, struct tally *t, char *left, size_t len)
{
	struct held h;
	char d[384];
	int err = bind_now();

	held_now(&h);
	if (!err && !held_diff(&idle, &h, d, sizeof(d)))
		return 1;
	if (!err && h.contexts < 0) {
		/* Its debugfs directory failed, which the kernel tolerates. */
		if (unbind_now())
			die("unbind", EIO);
		err = bind_now();
		held_now(&h);
		if (!err && !held_diff(&idle, &h, d, sizeof(d))) {
			snprintf(left, len, "no debugfs (tolerated) until a rebind");
			return 1;
		}
	}
	if (err) {
		snprintf(left, len, "the adapter is not back: %s", err_name(err));
		t->leaks++;
		rebaseline();
		return 0;
	}
	if (keeps && h.pins > idle.pins) {
		int at = snprintf(left, len, "kept until unbind: %s", d);

		t->kept++;
		if (unbind_now())
			die("unbind", EIO);
		held_now(&h);
		if (held_diff(&unbound, &h, d, sizeof(d))) {
			snprintf(left + at, len - at, "; after unbind: %s", d);
			t->leaks++;
			rebaseline();
			return 0;
		}
		if (bind_now())
			die("bind", EIO);
		held_now(&h);
		if (!held_diff(&idle, &h, d, sizeof(d))) {
			snprintf(left + at, len - at, "; released by unbind");
			return 1;
		}
	}
	snprintf(left, len, "left: %s", d);
	t->leaks++;
	rebaseline();
	return 0;
}

/*
 * Bind's steps end unbound, as the next one starts: what the unbind of the
 * adapter a bind made reports belongs to that bind.
 */
int unbound_again(struct tally *t, char *left, size_t len)
{
	struct held h;
	char d[384];

	if (unbind_now())
		die("unbind", EIO);
	held_now(&h);
	if (!held_diff(&unbound, &h, d, sizeof(d)))
		return 1;
	snprintf(left, len, "after its unbind: %s", d);
	t->leaks++;
	rebaseline();
	return 0;
}

void fail_nth_arm(unsigned int n)
{
	char s[16];
	int len = snprintf(s, sizeof(s), "%u", n);

	if (pwrite(fail_fd, s, len, 0) != len)
		die("fail-nth", errno);
}

unsigned int fail_nth_disarm(void)
{
	char s[16] = "";
	ssize_t len = pread(fail_fd, s, sizeof(s) - 1, 0);

	/* The read makes no allocation: what it says is what was left. */
	if (len <= 0 || pwrite(fail_fd, "0", 1, 0) != 1)
		die("fail-nth", errno);
	return strtoul(s, NULL, 10);
}

static uint32_t fired_before;

void cmd_fault_arm(uint16_t opcode, unsigned int skip)
{
	uint32_t armed;

	model_cmd_fault_read(&model, &armed, &fired_before);
	model_cmd_fault_nth(&model, opcode, CMD_FAULT_FAIL, skip);
}

int cmd_fault_disarm(unsigned int *left)
{
	uint32_t armed, fired;

	model_cmd_fault_read(&model, &armed, &fired);
	if (armed)
		model_cmd_fault(&model, 0, 0);
	if (left)
		*left = armed >> CMD_FAULT_SKIP_SHIFT;
	return fired != fired_before;
}

uint64_t model_commands(void)
{
	return model_read(&model, MODEL_COMMANDS);
}

uint64_t model_resets(void)
{
	return model_read(&model, MODEL_RESETS);
}

uint64_t model_protocol_errors(void)
{
	return model_read(&model, MODEL_UNEXPECTED);
}

void kmsg_open(void)
{
	kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg_fd < 0 || lseek(kmsg_fd, 0, SEEK_END) < 0)
		die("/dev/kmsg", errno);
}

/*
 * A record that starts a report: the kernel's own checkers, and the
 * allocators' failure reports, whose stack dumps belong to them (an
 * injected failure of a vmalloc() without __GFP_NOWARN: not a report).
 */
static int report_start(const char *msg, int *counts)
{
	static const char *const problems[] = {
		"WARNING:", "BUG:", "KASAN:", "KFENCE:", "UBSAN:", "Oops",
		"general protection fault", "possible circular locking",
		"possible recursive locking", "inconsistent lock state",
		"suspicious RCU usage", "new suspected memory leak",
		"unreferenced object", "leak detector disabled",
		"Cannot allocate a kmemleak_object",
		"rust_panic", "panicked at", "kernel BUG at",
	};
	static const char *const alloc_failures[] = {
		"page allocation failure", "vmalloc error", "FAULT_INJECTION",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(problems); i++)
		if (strstr(msg, problems[i]))
			return *counts = 1;
	for (i = 0; i < ARRAY_SIZE(alloc_failures); i++)
		if (strstr(msg, alloc_failures[i])) {
			*counts = 0;
			return 1;
		}
	return 0;
}

int kmsg_reports(void)
{
	static int since_start = REPORT_RECORDS;
	char rec[8192], *msg, *end;
	int reports = 0, counts;
	ssize_t len;

	for (;;) {
		len = read(kmsg_fd, rec, sizeof(rec) - 1);
		if (len < 0 && errno == EPIPE)
			continue;	/* records overwritten: read on */
		if (len <= 0)
			break;
		rec[len] = 0;
		msg = strchr(rec, ';');
		if (!msg)
			continue;
		msg++;
		end = strchr(msg, '\n');
		if (end)
			*end = 0;
		since_start++;
		if (report_start(msg, &counts)) {
			since_start = 0;
		} else if (strstr(msg, "Call Trace:") &&
			   since_start > REPORT_RECORDS) {
			/* A stack dump of no report's: one of its own. */
			counts = 1;
		} else {
			continue;
		}
		if (counts && ++reports <= 3)
			printf("# kernel report: %.200s\n", msg);
	}
	return reports;
}
