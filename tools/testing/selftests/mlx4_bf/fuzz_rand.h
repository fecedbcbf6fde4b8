/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The fuzzer's random numbers (mlx4_bf_qp_post_fuzz.c): xorshift64*,
 * seeded by setting rng_state (not to 0), so that a seed replays the same
 * calls; and the pointers user space may hand the kernel.
 */
#ifndef FUZZ_RAND_H
#define FUZZ_RAND_H

#include <stdint.h>

static uint64_t rng_state;

static inline uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static inline uint32_t below(uint32_t n)
{
	return n ? rnd() % n : 0;
}

/* A pointer user space may hand in: valid, NULL, kernel, unmapped, odd. */
static inline uint64_t random_pointer(void *valid, void *unmapped)
{
	switch (below(6)) {
	case 0:
		return 0;
	case 1:
		return 0xffff888000000000ULL + (rnd() & 0xffffff);
	case 2:
		return (uintptr_t)unmapped + below(4096);
	case 3:
		return rnd();
	case 4:
		return (uintptr_t)valid + below(64);
	default:
		return (uintptr_t)valid;
	}
}

#endif
