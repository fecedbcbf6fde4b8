/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The markers of tools/profile/insn_profile.c (the TCG plugin) as asm
 * text, for the guest program it counts
 * (tools/vm/upstream/ibv_post_cost.c): no-ops whose operand no compiler
 * emits, 0x4d4c42XX with XX one of the plugin's letters. Each goes in
 * asm volatile(MARKER ::: "memory"), a compiler barrier too. TWO_NOPS
 * stands where the markers are when a program measures its clock's own
 * cost.
 *
 * x86: nopl 0x4d4c42XX(%rax) (0f 1f 80 XX 42 4c 4d). s390x: brcl 0 with
 * 0x4d4c42XX as its halfword offset (c0 04 4d 4c 42 XX), a branch on no
 * condition: as the operand is relative, it is written as bytes.
 * Elsewhere HAVE_MARKERS is 0 and each is empty (a program then refuses
 * to profile).
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
#elif defined(__s390x__)
#define HAVE_MARKERS	1
#define COUNT_START	".byte 0xc0,0x04,0x4d,0x4c,0x42,0x53"
#define COUNT_PAUSE	".byte 0xc0,0x04,0x4d,0x4c,0x42,0x50"
#define KEEP		".byte 0xc0,0x04,0x4d,0x4c,0x42,0x4b"
#define DROP		".byte 0xc0,0x04,0x4d,0x4c,0x42,0x44"
#define WINDOW_END	".byte 0xc0,0x04,0x4d,0x4c,0x42,0x45"
#define TWO_NOPS	".byte 0xc0,0x04,0,0,0,0\n\t.byte 0xc0,0x04,0,0,0,0"
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
