// SPDX-License-Identifier: GPL-2.0
/*
 * insn_profile: a QEMU TCG plugin that counts executed guest instructions per
 * instruction address, inside windows the guest program opens and closes.
 *
 *   qemu-system-x86_64 ... -plugin insn_profile.so,out=FILE
 *   qemu-system-s390x ... -plugin insn_profile.so,out=FILE
 *
 * The guest marks its windows with no-ops whose operand no compiler emits:
 * on x86 "nopl 0x4d4c42XX(%rax)" (0f 1f 80 XX 42 4c 4d), on s390x a branch
 * on no condition with 0x4d4c42XX as its offset, "brcl 0" (c0 04 4d 4c 42
 * XX); the program runs the same without the plugin (markers.h). XX is one
 * of:
 *
 *   'S' 0x53  start (or resume) counting
 *   'P' 0x50  pause counting; what was counted since the last K/D is pending
 *   'K' 0x4b  keep: add the pending counts to the window's kept counts
 *   'D' 0x44  drop: add them to the window's dropped counts instead
 *   'E' 0x45  end of the window: write its kept and dropped counts to FILE
 *             and reset them
 *
 * so a program can measure each call (S call P), look at the call (its guest
 * clock, for instance) and keep or drop it (K or D), and end the window
 * after the last one (E). tools/vm/upstream/ibv_post_cost.c does this, with
 * the markers' asm text of tools/profile/markers.h.
 *
 * Between S and P every instruction the guest executes (user space, the
 * system call, the kernel, interrupts) is counted at its virtual address,
 * whichever vCPU runs it: run the guest with one vCPU (make profile boots
 * with -smp 1). The callbacks' vcpu_index cannot tell the vCPUs apart here:
 * without MTTCG (and -icount runs one TCG thread) QEMU 11.1 compiles the
 * index of the vCPU that translated a block into the block as a constant
 * (plugin-gen.c, gen_cpu_index()), and blocks are shared, so with two vCPUs
 * a block translated by one reports that one when the other runs it.
 *
 * FILE gets, per window end, two sections:
 *
 *   # window N kept insns TOTAL addrs COUNT
 *   ADDRESS_HEX COUNT
 *   ...
 *   # window N dropped insns TOTAL addrs COUNT
 *   ...
 *
 * Every instruction gets an unconditional callback that tests the flag.
 * QEMU 11.1's conditional callbacks (..._insn_exec_cond_cb on a scoreboard
 * entry) would be cheaper outside the windows, but with them a two-vCPU x86
 * guest crashed at boot (an oops in memcpy, "initcall returned with disabled
 * interrupts"), differently each run. The plain callbacks make the boot about
 * 2.5 times slower under TCG; they do not change what the guest executes.
 * The callback runs before its instruction, so an instruction that faults
 * and is restarted counts twice; the one-instruction blocks QEMU re-executes
 * for an MMIO access under -icount are instrumented for memory only, so
 * those do not count twice. With one vCPU the count equals what -icount
 * charges the guest clock (checked: system calls, rep movsb, the posts).
 *
 * Built with gcc -shared -fPIC against our own declarations of the plugin ABI
 * (qemu_plugin_api.h): Debian's QEMU ships no plugin header. The x86 QEMU
 * (11.1) and the s390x one (10.2) take different API versions:
 * -DQEMU_PLUGIN_API=7 or 5 builds it for one of them.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu_plugin_api.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_API;

/* A marker of the guest's architecture: its bytes, with XX at [letter]. */
struct marker {
	const char *target;
	size_t len;
	size_t letter;
	uint8_t bytes[8];
};

static const struct marker markers[] = {
	/* nopl 0x4d4c42XX(%rax) */
	{ "x86_64", 7, 3, { 0x0f, 0x1f, 0x80, 0x00, 0x42, 0x4c, 0x4d } },
	/* brcl 0,.+2*0x4d4c42XX */
	{ "s390x", 6, 5, { 0xc0, 0x04, 0x4d, 0x4c, 0x42, 0x00 } },
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The guest's, chosen at install. */
static const struct marker *marker;

enum { KEPT, DROPPED };

/* One instruction address and how often it ran inside windows. */
struct rec {
	uint64_t vaddr;
	uint64_t pending;	/* since the last K/D */
	uint64_t acc[2];	/* this window's kept and dropped counts */
	uint8_t touched;	/* on the touched list (pending != 0) */
	uint8_t listed;		/* on the window list (acc != 0) */
};

/* Between 'S' and 'P'. */
static int counting;

/* Translation: vaddr -> rec, open addressing; recs never move. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rec **table;
static size_t table_cap, table_used;
static struct rec *chunk;
static size_t chunk_left;

/* Execution: the recs of the pending counts, and of the window's. */
struct list {
	struct rec **v;
	size_t n, cap;
};
static struct list touched, window;

static FILE *out;
static const char *out_path;
static unsigned int windows;

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p) {
		fprintf(stderr, "insn_profile: out of memory\n");
		abort();
	}
	return p;
}

static void push(struct list *l, struct rec *r)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 4096;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = r;
}

static size_t slot_of(uint64_t vaddr, size_t cap)
{
	return (size_t)((vaddr * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

static void table_grow(void)
{
	size_t cap = table_cap ? table_cap * 2 : 1 << 16;
	struct rec **t = xrealloc(NULL, cap * sizeof(*t));

	memset(t, 0, cap * sizeof(*t));
	for (size_t i = 0; i < table_cap; i++) {
		size_t s;

		if (!table[i])
			continue;
		for (s = slot_of(table[i]->vaddr, cap); t[s]; s = (s + 1) & (cap - 1))
			;
		t[s] = table[i];
	}
	free(table);
	table = t;
	table_cap = cap;
}

/* The record of @vaddr, made if new. Called with the lock held. */
static struct rec *rec_of(uint64_t vaddr)
{
	size_t s;

	if ((table_used + 1) * 2 > table_cap)
		table_grow();
	for (s = slot_of(vaddr, table_cap); table[s]; s = (s + 1) & (table_cap - 1))
		if (table[s]->vaddr == vaddr)
			return table[s];
	if (!chunk_left) {
		chunk_left = 4096;
		chunk = xrealloc(NULL, chunk_left * sizeof(*chunk));
		memset(chunk, 0, chunk_left * sizeof(*chunk));
	}
	chunk_left--;
	table[s] = chunk++;
	table[s]->vaddr = vaddr;
	table_used++;
	return table[s];
}

static void count_insn(unsigned int vcpu_index, void *userdata)
{
	struct rec *r = userdata;

	(void)vcpu_index;
	if (!counting)
		return;
	if (!r->touched) {
		r->touched = 1;
		push(&touched, r);
	}
	r->pending++;
}

/* Moves the pending counts into the window's kept or dropped counts. */
static void commit(int which)
{
	for (size_t i = 0; i < touched.n; i++) {
		struct rec *r = touched.v[i];

		r->acc[which] += r->pending;
		r->pending = 0;
		r->touched = 0;
		if (!r->listed) {
			r->listed = 1;
			push(&window, r);
		}
	}
	touched.n = 0;
}

static void write_section(int which)
{
	uint64_t total = 0;
	size_t addrs = 0;

	for (size_t i = 0; i < window.n; i++)
		if (window.v[i]->acc[which]) {
			total += window.v[i]->acc[which];
			addrs++;
		}
	fprintf(out, "# window %u %s insns %" PRIu64 " addrs %zu\n", windows,
		which == KEPT ? "kept" : "dropped", total, addrs);
	for (size_t i = 0; i < window.n; i++)
		if (window.v[i]->acc[which])
			fprintf(out, "%016" PRIx64 " %" PRIu64 "\n", window.v[i]->vaddr,
				window.v[i]->acc[which]);
}

static void end_window(void)
{
	commit(KEPT);	/* counted but neither kept nor dropped: kept */
	windows++;
	write_section(KEPT);
	write_section(DROPPED);
	fflush(out);
	for (size_t i = 0; i < window.n; i++) {
		window.v[i]->acc[KEPT] = window.v[i]->acc[DROPPED] = 0;
		window.v[i]->listed = 0;
	}
	window.n = 0;
}

static void on_marker(unsigned int vcpu_index, void *userdata)
{
	int what = (int)(uintptr_t)userdata;

	(void)vcpu_index;
	switch (what) {
	case 'S':
		counting = 1;
		break;
	case 'P':
		counting = 0;
		break;
	case 'K':
		commit(KEPT);
		break;
	case 'D':
		commit(DROPPED);
		break;
	case 'E':
		counting = 0;
		end_window();
		break;
	}
}

/* 'S', 'P', 'K', 'D' or 'E' if @insn is a marker, else 0. */
static int marker_of(struct qemu_plugin_insn *insn)
{
	const size_t len = marker->len, at = marker->letter;
	uint8_t b[sizeof(marker->bytes)];

	if (qemu_plugin_insn_size(insn) != len || qemu_plugin_insn_data(insn, b, len) != len ||
	    memcmp(b, marker->bytes, at) ||
	    memcmp(b + at + 1, marker->bytes + at + 1, len - at - 1) || !b[at] ||
	    !strchr("SPKDE", b[at]))
		return 0;
	return b[at];
}

#if QEMU_PLUGIN_API >= 7
static void tb_trans(struct qemu_plugin_tb *tb, void *userdata)
#else
static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
#endif
{
	size_t n = qemu_plugin_tb_n_insns(tb);

#if QEMU_PLUGIN_API >= 7
	(void)userdata;
#else
	(void)id;
#endif
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		int m = marker_of(insn);

		if (m)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker, QEMU_PLUGIN_CB_NO_REGS,
							       (void *)(uintptr_t)m);
		else
			qemu_plugin_register_vcpu_insn_exec_cb(insn, count_insn, QEMU_PLUGIN_CB_NO_REGS,
							       rec_of(qemu_plugin_insn_vaddr(insn)));
	}
	pthread_mutex_unlock(&lock);
}

#if QEMU_PLUGIN_API >= 7
static void at_exit(void *userdata)
#else
static void at_exit(qemu_plugin_id_t id, void *userdata)
#endif
{
#if QEMU_PLUGIN_API < 7
	(void)id;
#endif
	(void)userdata;
	if (counting || touched.n || window.n)
		fprintf(stderr, "insn_profile: a window was never ended ('E'): not written\n");
	fprintf(stderr, "insn_profile: %u window(s) written to %s (%zu addresses seen)\n",
		windows, out_path, table_used);
	fclose(out);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4)) {
			out_path = argv[i] + 4;
		} else {
			fprintf(stderr, "insn_profile: unknown argument '%s' (out=FILE)\n", argv[i]);
			return -1;
		}
	}
	if (!out_path) {
		fprintf(stderr, "insn_profile: out=FILE is required\n");
		return -1;
	}
	if (!info->system_emulation) {
		fprintf(stderr, "insn_profile: system emulation only\n");
		return -1;
	}
	for (size_t i = 0; i < ARRAY_SIZE(markers); i++)
		if (!strcmp(info->target_name, markers[i].target))
			marker = &markers[i];
	if (!marker) {
		fprintf(stderr, "insn_profile: no markers for %s (x86_64, s390x)\n",
			info->target_name);
		return -1;
	}
	out = fopen(out_path, "w");
	if (!out) {
		perror(out_path);
		return -1;
	}
	pthread_mutex_lock(&lock);
	table_grow();
	pthread_mutex_unlock(&lock);
#if QEMU_PLUGIN_API >= 7
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans, NULL);
#else
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
#endif
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
