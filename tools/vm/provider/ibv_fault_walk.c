// SPDX-License-Identifier: GPL-2.0
/*
 * ibv_fault_walk: every failure of the RDMA provider's operations walked
 * (issue 43). For each operation (fault_walk_ops.c: alloc_ucontext,
 * alloc_pd, reg_mr, create_cq, create_qp, the three modify_qp steps to
 * RTS, QP_POST, dereg_mr, destroy_qp, destroy_cq, dealloc_pd, close of the
 * context bare and with objects, unbind, bind), with what it needs made
 * first without faults:
 *
 *   allocations: for N = 1, 2, ...: N written to /proc/thread-self/fail-nth,
 *   the operation, fail-nth read back (not 0: the operation made fewer
 *   than N failable allocations, its walk ends) and 0 written;
 *   firmware commands: for each opcode of the model's (tools/mlx4-model/
 *   src/command.rs), the 1st, 2nd, ... command with it failed (the model's
 *   CMD_FAULT with a skip), until the operation sends no more of them.
 *
 * When the fault fired, the operation must have returned a clean error (an
 * errno) and left nothing (this process's VmPin and VmLck, the kernel's
 * pinned pages, the driver's debugfs counters and the model's gauges as
 * before it), or succeeded; a retry without the fault must succeed, and
 * once everything is given back all of it must be at its idle value. A
 * destroy whose command failed returns success and the driver keeps the
 * memory the adapter may still write until unbind resets it: the pins
 * must then be gone after unbind and rebind. A bind that fails must leave
 * the adapter reset; a bind whose RDMA registration alone failed (the
 * driver serves without mlx4_bf0) counts as a clean failure, and the next
 * one must give mlx4_bf0 back with port 1 ACTIVE. Every step also reads
 * the kernel log for reports (WARNING, BUG, KASAN, lockdep, ...).
 *
 * An operation with more failable allocations than the time allows (bind:
 * the RDMA core's sysfs files) is walked at every N up to -D, then at a
 * stride that keeps it within -T seconds, and at its last allocation; its
 * commands (bind: a MAD_IFC per GID and P_Key block) likewise, each
 * opcode's at every one up to -d, then at a stride within -C seconds.
 *
 * KTAP: one result per operation and kind of failure, a "#" line per
 * failure point, then the table of failure points by operation.
 *
 * Usage: ibv_fault_walk [-o OP[,OP...]] [-F FIRST] [-D DENSE] [-T SECONDS]
 *                       [-d DENSE] [-C SECONDS] [-p PREFIX]
 * -F: allocations from the FIRST-th (1), to walk a stretch again;
 * -D, -T: allocations every N to DENSE (100), SECONDS (900) an operation;
 * -d, -C: commands of an opcode every one to DENSE (16), SECONDS (300);
 * -p: every line after PREFIX (KTAP nested in a parent's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fault_walk.h"

#define HW2SW_CQ	0x017
#define CENSUS_N	1000000000u

static struct tally tallies[32][2];
static unsigned int first = 1, dense = 100, cmd_dense = 16;
static double budget = 900, cmd_budget = 300;
/* dma-debug's checks: on (1) until a step turns them off, off, not built. */
static int dma_debug;

void die(const char *what, int err)
{
	printf("# ibv_fault_walk: %s: %s\n", what, strerror(err));
	result(0, "%s%s", "setup", "");
	exit(1);
}

static void arm(const struct fault *f)
{
	if (f->kind == ALLOC)
		fail_nth_arm(f->n);
	else
		cmd_fault_arm(opcodes[f->opcode].op, f->skip);
}

static int disarm(const struct fault *f)
{
	return f->kind == ALLOC ? !fail_nth_disarm() : cmd_fault_disarm(NULL);
}

static void note_err(struct tally *t, int err)
{
	const char *name = err_name(err);
	size_t at = strlen(t->errs);

	if (!strstr(t->errs, name) && at + strlen(name) + 3 < sizeof(t->errs))
		snprintf(t->errs + at, sizeof(t->errs) - at, "%s%s",
			 at ? ", " : "", name);
}

/* The operation and what comes after it (QP_POST's completion). */
static int run(const struct op *op, struct world *w)
{
	int err = op->run(w);

	return op->settle ? op->settle(w, err) : err;
}

/*
 * One failure point: F armed around OP. Returns 1 if it fired (the walk
 * goes on), 0 if not (the operation made no such failure: done).
 */
static int step(const struct op *op, const struct fault *f, struct tally *t)
{
	struct world w = { .fd = -1 };
	struct held before, h;
	char at[48], left[512] = "", d[384];
	int err, first, fired, ok = 1, reports;
	uint64_t protocol;
	size_t n;

	if (f->kind == ALLOC)
		snprintf(at, sizeof(at), "allocation %u", f->n);
	else
		snprintf(at, sizeof(at), "%s #%u", opcodes[f->opcode].name,
			 f->skip + 1);
	err = op->setup(&w);
	if (err)
		die(op->name, err);
	held_now(&before);
	protocol = model_protocol_errors();
	arm(f);
	err = op->run(&w);
	fired = disarm(f);
	if (op->settle)
		err = op->settle(&w, err);
	if (!fired) {
		if (!err && op->undo)
			op->undo(&w);
		ok = !err && !world_free(&w) &&
		     back_to_idle(0, t, left, sizeof(left)) &&
		     (op->device != DEV_BIND ||
		      unbound_again(t, left, sizeof(left))) &&
		     model_protocol_errors() == protocol;
		if (!ok) {
			printf("# %s %s did not fire, yet %s; %s\n", op->name, at,
			       err_name(err), left);
			t->unclean++;
		}
		return 0;
	}
	t->points++;
	first = err;
	note_err(t, err);
	if (err) {
		t->errors++;
		ok = err > 0 || err == ERR_NO_IBDEV;
		held_now(&h);
		if (held_diff(&before, &h, d, sizeof(d))) {
			snprintf(left, sizeof(left), "after it: %s; ", d);
			ok = 0;
		}
		err = run(op, &w);
		if (err) {
			n = strlen(left);
			snprintf(left + n, sizeof(left) - n,
				 "the retry without a fault: %s; ", err_name(err));
			ok = 0;
		} else if (op->undo) {
			op->undo(&w);
		}
	} else {
		/* Unbind: whatever failed in it, the adapter must be down. */
		if (op->device && !is_bound()) {
			held_now(&h);
			if (held_diff(&unbound, &h, d, sizeof(d))) {
				snprintf(left, sizeof(left), "unbound: %s; ", d);
				ok = 0;
			}
		}
		if (op->undo)
			op->undo(&w);
	}
	if (world_free(&w))
		ok = 0;
	n = strlen(left);
	if (!back_to_idle(f->kind == CMD && op->keeps, t, left + n,
			  sizeof(left) - n))
		ok = 0;
	n = strlen(left);
	if (op->device == DEV_BIND && !unbound_again(t, left + n, sizeof(left) - n))
		ok = 0;
	reports = kmsg_reports();
	if (dma_debug == 1 && dma_debug_on() != 1) {
		/* Off for the rest of the boot: only bind's own is expected. */
		n = strlen(left);
		snprintf(left + n, sizeof(left) - n,
			 "%sdma-debug turned itself off", n ? "; " : "");
		dma_debug = 0;
		reports += op->device != DEV_BIND;
	}
	t->reports += reports;
	if (reports)
		ok = 0;
	protocol = model_protocol_errors() - protocol;
	if (protocol) {
		n = strlen(left);
		snprintf(left + n, sizeof(left) - n,
			 "%sthe model logged %llu protocol error(s)",
			 n ? "; " : "", (unsigned long long)protocol);
		t->protocol += protocol;
		ok = 0;
	}
	t->unclean += !ok;
	printf("# %s %s: %s, %s%s%s\n", op->name, at, err_name(first),
	       ok ? "clean" : "NOT CLEAN", left[0] ? ": " : "", left);
	return 1;
}

/*
 * A run of OP without a fault: its failable allocations (ALLOC), or its
 * commands (CMD), all (OPCODE < 0) or those with opcodes[OPCODE] (a fault
 * armed past them: what it had left when the run ended says how many).
 */
static long census(const struct op *op, enum kind k, int opcode,
		   double *seconds, struct tally *t)
{
	struct world w = { .fd = -1 };
	double start = now();
	uint64_t cmds;
	unsigned int left = 0;
	long count;
	int err, fired = 0;

	err = op->setup(&w);
	if (err)
		die(op->name, err);
	cmds = model_commands();
	if (k == ALLOC)
		fail_nth_arm(CENSUS_N);
	else if (opcode >= 0)
		cmd_fault_arm(opcodes[opcode].op, CMD_SKIP_MAX);
	err = op->run(&w);
	if (k == ALLOC)
		left = fail_nth_disarm();
	else if (opcode >= 0)
		fired = cmd_fault_disarm(&left);
	cmds = model_commands() - cmds;
	if (op->settle)
		err = op->settle(&w, err);
	if (err && !fired)
		die(op->name, err < 0 ? EIO : err);
	if (!err && op->undo)
		op->undo(&w);
	world_free(&w);
	if (bind_now())
		die("bind", EIO);
	*seconds = now() - start;
	t->reports += kmsg_reports();
	if (k == ALLOC)
		count = CENSUS_N - left;
	else if (opcode >= 0)
		count = fired ? CMD_SKIP_MAX + 1 : CMD_SKIP_MAX - left;
	else
		count = cmds;
	return count;
}

/*
 * Allocation failures at N = 1, 2, ...; past DENSE, if every N would
 * overrun the budget at the time the dense ones took a point, at the
 * stride that keeps within it, and at the last.
 */
static void walk_alloc(const struct op *op, struct tally *t)
{
	struct fault f = { .kind = ALLOC, .n = first };
	double start = now(), run_s;
	unsigned int count;
	long steps = 0;

	t->census = census(op, ALLOC, -1, &run_s, t);
	t->stride = 1;
	t->dense = dense;
	count = t->census;
	printf("# %s: %ld failable allocations, %.2f s a run; its errors: %s\n",
	       op->name, t->census, run_s, op->reports);
	while (step(op, &f, t)) {
		steps++;
		t->step_s = (now() - start) / steps;
		if (f.n == dense && count > dense) {
			t->stride = stride_for(&count, 1, dense, t->step_s,
					       budget - (now() - start) + dense * t->step_s);
			if (t->stride > 1)
				printf("# %s: every N to %u took %.0f s (%.2f s a point): every %u-th from here to %u\n",
				       op->name, dense, now() - start, t->step_s,
				       t->stride, count);
		}
		/* Past the census: every N again, until one does not fire. */
		f.n = f.n >= count ? f.n + 1 :
		      next_point(f.n - 1, count, dense, t->stride) + 1;
	}
	t->seconds += now() - start;
}

/*
 * Each opcode's commands failed in turn, the 1st, 2nd, ...: each opcode's
 * count first (a run with the fault armed past them), then, if every one
 * would overrun the budget, every one of the first CMD_DENSE and the
 * stride that keeps within it past them, and the last.
 */
static void walk_cmd(const struct op *op, struct tally *t, double per)
{
	struct fault f = { .kind = CMD };
	double start = now(), run_s;
	long total = 0;

	t->census = census(op, CMD, -1, &run_s, t);
	if (!t->census) {
		printf("# %s: no firmware command\n", op->name);
		return;
	}
	for (f.opcode = 0; f.opcode < NR_OPCODES; f.opcode++) {
		t->sent[f.opcode] = census(op, CMD, f.opcode, &run_s, t);
		total += t->sent[f.opcode];
	}
	t->dense = cmd_dense;
	t->stride = stride_for(t->sent, NR_OPCODES, cmd_dense, per ?: 2 * run_s,
			       cmd_budget);
	printf("# %s: %ld commands (%ld in the census run)%s\n", op->name,
	       total, t->census, t->stride > 1 ? ", strided" : "");
	for (f.opcode = 0; f.opcode < NR_OPCODES; f.opcode++)
		for (f.skip = 0; f.skip < t->sent[f.opcode];
		     f.skip = next_point(f.skip, t->sent[f.opcode], cmd_dense,
					 t->stride)) {
			if (step(op, &f, t))
				t->by_opcode[f.opcode]++;
			else
				printf("# %s: %s #%u did not fire\n", op->name,
				       opcodes[f.opcode].name, f.skip + 1);
		}
	t->seconds += now() - start;
}

/*
 * The acceptance test of issue 43: HW2SW_CQ failed by the model, the CQ's
 * destroy returns success and its pages stay pinned; once the adapter is
 * unbound they are released, and everything is at idle after the rebind.
 */
static void hw2sw_cq_kept_until_unbind(const struct op *destroy_cq)
{
	struct world w = { .fd = -1 };
	struct held h;
	char d[384] = "", line[512];
	int err, fired, kept, ok;

	err = destroy_cq->setup(&w);
	if (err)
		die("a CQ", err);
	cmd_fault_arm(HW2SW_CQ, 0);
	err = destroy_cq->run(&w);
	fired = cmd_fault_disarm(NULL);
	world_free(&w);
	held_now(&h);
	kept = h.pins - idle.pins;
	if (unbind_now())
		die("unbind", EIO);
	held_now(&h);
	ok = fired && !err && kept > 0 && !held_diff(&unbound, &h, d, sizeof(d));
	snprintf(line, sizeof(line),
		 "HW2SW_CQ failed: %s, destroy: %s, %d page(s) kept, after unbind: %s",
		 fired ? "yes" : "no", err_name(err), kept, d[0] ? d : "as unbound");
	printf("# %s\n", line);
	if (bind_now())
		die("bind", EIO);
	held_now(&h);
	if (held_diff(&idle, &h, d, sizeof(d))) {
		printf("# after the rebind: %s\n", d);
		rebaseline();
		ok = 0;
	}
	ok = ok && !kmsg_reports();
	result(ok, "%s%s", "a failed HW2SW_CQ (model knob) leaves no pinned page after unbind", "");
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	double start, t;
	int opt, i, selected = 0;

	while ((opt = getopt(argc, argv, "o:F:D:T:d:C:p:")) != -1) {
		switch (opt) {
		case 'o':
			only = optarg;
			break;
		case 'F':
			first = strtoul(optarg, NULL, 0) ?: 1;
			break;
		case 'D':
			dense = strtoul(optarg, NULL, 0);
			break;
		case 'T':
			budget = strtod(optarg, NULL);
			break;
		case 'd':
			cmd_dense = strtoul(optarg, NULL, 0);
			break;
		case 'C':
			cmd_budget = strtod(optarg, NULL);
			break;
		case 'p':
			prefix = optarg;
			break;
		default:
			fprintf(stderr, "usage: %s [-o OP[,OP...]] [-F FIRST] [-D DENSE] [-T SECONDS] [-d DENSE] [-C SECONDS] [-p PREFIX]\n",
				argv[0]);
			return 2;
		}
	}
	if (prefix[0]) {
		cookie_io_functions_t io = { .write = prefixed_write };

		stdout = fopencookie(NULL, "w", io);
		if (!stdout)
			return 1;
	}
	/* Every line at once, in order, whoever reads the pipe. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < nr_ops; i++)
		selected += chosen(only, ops[i].name);
	printf("KTAP version 1\n1..%d\n", 2 * selected + 1);
	state_open();
	kmsg_open();
	if (bind_now())
		die("mlx4_bf0 with port 1 ACTIVE", ENODEV);
	dma_debug = dma_debug_on();
	printf("# dma-debug: %s\n", dma_debug < 0 ? "not built" :
	       dma_debug ? "on" : "OFF before the walk");
	start = now();
	rebaseline();
	printf("# %s on %s: unbind and bind %.1f s; %d operations; allocations every N to %u, then within %.0f s; commands every one to %u, then within %.0f s\n",
	       DEV_NAME, bdf, now() - start, selected, dense, budget,
	       cmd_dense, cmd_budget);
	for (i = 0; i < nr_ops; i++) {
		if (!chosen(only, ops[i].name))
			continue;
		t = now();
		spare(ops[i].spare ?: SPARE);
		walk_alloc(&ops[i], &tallies[i][ALLOC]);
		report(&ops[i], &tallies[i][ALLOC], ALLOC);
		walk_cmd(&ops[i], &tallies[i][CMD], tallies[i][ALLOC].step_s);
		report(&ops[i], &tallies[i][CMD], CMD);
		if (bind_now())
			die("bind", EIO);
		printf("# %s: %.0f s\n", ops[i].name, now() - t);
	}
	for (i = 0; i < nr_ops && strcmp(ops[i].name, "destroy_cq"); i++)
		;
	hw2sw_cq_kept_until_unbind(&ops[i]);
	table(tallies, only, now() - start);
	return failures ? 1 : 0;
}
