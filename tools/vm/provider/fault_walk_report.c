// SPDX-License-Identifier: GPL-2.0
/*
 * ibv_fault_walk's plan and report (see fault_walk.h): the failure points
 * a budget allows, a KTAP result per operation and kind of failure, the
 * table of failure points by operation, every line after a prefix.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fault_walk.h"

/* The model's opcodes (tools/mlx4-model/src/command.rs, mod op). */
const struct opcode opcodes[NR_OPCODES] = {
	{ 0x003, "QUERY_DEV_CAP" }, { 0x004, "QUERY_FW" },
	{ 0x006, "QUERY_ADAPTER" }, { 0x007, "INIT_HCA" },
	{ 0x008, "CLOSE_HCA" }, { 0x009, "INIT_PORT" },
	{ 0x00a, "CLOSE_PORT" }, { 0x00c, "SET_PORT" },
	{ 0x00b, "QUERY_HCA" }, { 0x00d, "SW2HW_MPT" },
	{ 0x00f, "HW2SW_MPT" }, { 0x011, "WRITE_MTT" },
	{ 0x012, "MAP_EQ" }, { 0x013, "SW2HW_EQ" },
	{ 0x014, "HW2SW_EQ" }, { 0x016, "SW2HW_CQ" },
	{ 0x017, "HW2SW_CQ" }, { 0x019, "RST2INIT_QP" },
	{ 0x01a, "INIT2RTR_QP" }, { 0x01b, "RTR2RTS_QP" },
	{ 0x01e, "2ERR_QP" }, { 0x021, "2RST_QP" },
	{ 0x022, "QUERY_QP" }, { 0x023, "CONF_SPECIAL_QP" },
	{ 0x024, "MAD_IFC" }, { 0x02c, "MODIFY_CQ" },
	{ 0x030, "DIAG_RPRT" },
	{ 0x02f, "SYNC_TPT" }, { 0x031, "NOP" },
	{ 0x034, "MOD_STAT_CFG" }, { 0x043, "QUERY_PORT" },
	{ 0x035, "SW2HW_SRQ" }, { 0x036, "HW2SW_SRQ" },
	{ 0x037, "QUERY_SRQ" }, { 0x040, "ARM_SRQ" },
	{ 0xff6, "RUN_FW" }, { 0xff9, "UNMAP_ICM" },
	{ 0xffa, "MAP_ICM" }, { 0xffb, "UNMAP_ICM_AUX" },
	{ 0xffc, "MAP_ICM_AUX" }, { 0xffd, "SET_ICM_SIZE" },
	{ 0xffe, "UNMAP_FA" }, { 0xfff, "MAP_FA" },
};

_Static_assert(ARRAY_SIZE(opcodes) == NR_OPCODES, "opcodes");

const char *prefix = "";
static int results;
int failures;

/* stdout with the prefix before each line: write()'s of whole lines. */
ssize_t prefixed_write(void *cookie, const char *buf, size_t len)
{
	static int line_start = 1;
	const char *nl;
	size_t n, done = 0;

	(void)cookie;
	while (done < len) {
		nl = memchr(buf + done, '\n', len - done);
		n = nl ? (size_t)(nl - buf - done) + 1 : len - done;
		if (line_start && write(1, prefix, strlen(prefix)) < 0)
			return -1;
		if (write(1, buf + done, n) != (ssize_t)n)
			return -1;
		line_start = nl != NULL;
		done += n;
	}
	return len;
}

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void result(int ok, const char *fmt, const char *name, const char *text)
{
	printf("%s %d ", ok ? "ok" : "not ok", ++results);
	printf(fmt, name, text);
	printf("\n");
	failures += !ok;
}

/*
 * The stride past the first DENSE points of each count in COUNTS (N of
 * them) that keeps the points, at PER seconds each, within BUDGET seconds:
 * 1 if every point fits. Each count's last point is walked too.
 */
unsigned int stride_for(const unsigned int *counts, int n,
			unsigned int dense, double per, double budget)
{
	unsigned int stride = 1, most = 1;
	long points;
	int i;

	for (i = 0; i < n; i++)
		most = counts[i] > most ? counts[i] : most;
	/* At a stride of MOST: the dense points and each count's last. */
	for (;;) {
		points = 0;
		for (i = 0; i < n; i++) {
			points += counts[i] < dense ? counts[i] : dense;
			if (counts[i] > dense)
				points += (counts[i] - dense + stride - 1) / stride;
		}
		if (points * per <= budget || stride >= most)
			return stride;
		stride = stride < 8 ? stride + 1 : stride + stride / 4;
	}
}

/* After point I of COUNT: the next (every one to DENSE, then STRIDE). */
unsigned int next_point(unsigned int i, unsigned int count,
			       unsigned int dense, unsigned int stride)
{
	if (i + 1 < dense || stride == 1)
		return i + 1;
	if (i + 1 < count && i + stride >= count)
		return count - 1;	/* the last one */
	return i + stride;
}


int chosen(const char *only, const char *name)
{
	size_t len = strlen(name);
	const char *at;

	if (!only)
		return 1;
	for (at = only; at; at = strchr(at, ','), at = at ? at + 1 : NULL)
		if (!strncmp(at, name, len) && (at[len] == ',' || !at[len]))
			return 1;
	return 0;
}

void report(const struct op *op, struct tally *t, enum kind kind)
{
	char text[512], how[96] = "", by[320] = "";
	size_t i, at = 0;

	if (kind == ALLOC && t->stride > 1)
		snprintf(how, sizeof(how), " (every N to %u, then every %u-th to %ld)",
			 t->dense, t->stride, t->census);
	for (i = 0; i < NR_OPCODES; i++)
		if (t->by_opcode[i] && at < sizeof(by))
			at += snprintf(by + at, sizeof(by) - at, "%s%s %d",
				       at ? ", " : "", opcodes[i].name,
				       t->by_opcode[i]);
	if (!t->points)
		snprintf(text, sizeof(text), "%s", kind == ALLOC ?
			 "no failable allocation" : "no firmware command");
	else if (kind == ALLOC)
		snprintf(text, sizeof(text), "%d allocation failure%s walked%s",
			 t->points, t->points == 1 ? "" : "s", how);
	else
		snprintf(text, sizeof(text), "%d firmware command%s failed (%s)",
			 t->points, t->points == 1 ? "" : "s", by);
	at = strlen(text);
	if (t->unclean)
		snprintf(text + at, sizeof(text) - at, ", %d not clean", t->unclean);
	else if (t->points)
		snprintf(text + at, sizeof(text) - at, ", all clean");
	result(!t->unclean, "%s: %s", op->name, text);
}

void table(struct tally tallies[][2], const char *only, double seconds)
{
	int i, totals[5] = { 0 };
	size_t k, at;
	char by[320];

	printf("# the fault walk: failure points by operation (%.0f s)\n", seconds);
	printf("# %-26s %12s %-24s %4s %4s %5s %7s %8s %5s  %s\n", "operation",
	       "allocations", "their outcomes", "cmds", "kept", "leaks",
	       "reports", "protocol", "s", "commands failed, by opcode");
	for (i = 0; i < nr_ops; i++) {
		struct tally *a = &tallies[i][ALLOC], *c = &tallies[i][CMD];
		char walked[32];

		if (!chosen(only, ops[i].name))
			continue;
		at = 0;
		by[0] = 0;
		for (k = 0; k < NR_OPCODES; k++)
			if (c->by_opcode[k] && at < sizeof(by))
				at += snprintf(by + at, sizeof(by) - at, "%s%s %d/%u",
					       at ? ", " : "", opcodes[k].name,
					       c->by_opcode[k], c->sent[k]);
		snprintf(walked, sizeof(walked), "%d/%ld", a->points, a->census);
		printf("# %-26s %12s %-24s %4d %4d %5d %7d %8d %5.0f  %s\n",
		       ops[i].name, walked, a->errs[0] ? a->errs : "-",
		       c->points, c->kept, a->leaks + c->leaks,
		       a->reports + c->reports, a->protocol + c->protocol,
		       a->seconds + c->seconds,
		       by[0] ? by : c->census ? "-" : "(no command)");
		totals[0] += a->points;
		totals[1] += c->points;
		totals[2] += a->leaks + c->leaks;
		totals[3] += a->reports + c->reports;
		totals[4] += a->protocol + c->protocol;
	}
	printf("# %-26s %12d %-24s %4d %4s %5d %7d %8d\n", "all", totals[0], "",
	       totals[1], "", totals[2], totals[3], totals[4]);
	printf("# allocations: failure points walked / failable allocations of a run; commands failed: walked / sent in a run\n");
}
