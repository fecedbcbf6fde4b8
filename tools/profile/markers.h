/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The markers of tools/profile/insn_profile.c (the TCG plugin) as asm
 * text, for the guest programs it counts (mlx4_bf_profile.c,
 * tools/vm/upstream/ibv_post_cost.c): nopl 0x4d4c42XX(%rax), XX one of the
 * plugin's letters. Each goes in asm volatile(MARKER ::: "memory"), a
 * compiler barrier too. TWO_NOPS stands where the markers are when a
 * program measures its clock's own cost.
 *
 * x86 only: elsewhere HAVE_MARKERS is 0 and each is empty (a program then
 * refuses to profile).
 */
#ifndef MARKERS_H
#define MARKERS_H

#if defined(__x86_64__)
#define HAVE_MARKERS	1
#define COUNT_START	"nopl 0x4d4c4253(%%rax)"	/* 'S': start or resume counting */
#define COUNT_PAUSE	"nopl 0x4d4c4250(%%rax)"	/* 'P': pause counting */
#define KEEP		"nopl 0x4d4c424b(%%rax)"	/* 'K': keep what was counted */
#define DROP		"nopl 0x4d4c4244(%%rax)"	/* 'D': drop it */
#define WINDOW_END	"nopl 0x4d4c4245(%%rax)"	/* 'E': end of the window */
#define TWO_NOPS	"nopl 0x0(%%rax); nopl 0x0(%%rax)"
#else
#define HAVE_MARKERS	0
#define COUNT_START	""
#define COUNT_PAUSE	""
#define KEEP		""
#define DROP		""
#define WINDOW_END	""
#define TWO_NOPS	""
#endif

#endif
