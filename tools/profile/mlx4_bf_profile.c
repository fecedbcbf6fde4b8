// SPDX-License-Identifier: GPL-2.0
/*
 * mlx4_bf_profile: the guest side of `make profile`. For each configuration
 * it makes the same call over and over on one context, each call measured
 * by tools/profile/insn_profile.c (the TCG plugin) between window markers.
 *
 *   mlx4_bf_profile [-n CALLS] [-w WARMUP] [-s SPIN] [-t FACTOR] CONFIG...
 *
 *   noop        QUERY_CONTEXT without outputs (bench's no-op)
 *   bf:BYTES    POST_SEND of an RDMA write with BYTES inline, REQUIRE_BF
 *   db:BYTES    the same WQE with FORCE_DOORBELL
 *   auto:BYTES  the same WQE without a path flag
 *   sbf:BYTES, sdb:BYTES  as bf and db, the WQE staged in the QP's WQE page
 *               (MLX4_BF_ATTR_WQE_LEN) and no POST_RESULT: what bench times
 *
 * The posts are the helper's (`mlx4-bf bench`): an RDMA-write WQE with the
 * payload inline (build_rdma_write() of mlx4_bf_lib.h) into a registered page
 * of the program's own (the QP is its own peer), the QP handle and the
 * WQE as attributes, the path flag inline and a POST_RESULT output. -EAGAIN
 * (send queue full) is retried inside the call's measurement.
 *
 * Per call: read the clock, start counting, copy the call from its template
 * and make it, pause counting, read the clock; a call whose guest clock
 * exceeds FACTOR (default 1.5) times the fastest call so far is dropped
 * (counted apart: it slept waiting for the send queue, or took a timer
 * interrupt), the others kept. Under -icount shift=0 the guest clock counts
 * instructions, except that an idle vCPU's clock jumps ahead.
 *
 * Between calls, outside the measurement, the program spins SPIN (default
 * 50000) loop iterations: under -icount the guest's clock runs on
 * instructions while the device model runs in real time, and a guest that
 * posts back to back fills the 16-entry send queue faster than the model
 * completes it; the driver's poll-and-sleep then warps the idle guest clock
 * to its timeout without giving the model any real time. Spinning does.
 *
 * The process pins itself to CPU 0. One line per configuration on stdout:
 *   profile: window K config CONFIG calls N kept K dropped D retries R
 *            min_ns M kept_ns T clock_ns C
 * (one line), kept_ns being the kept calls' guest clock in total: under
 * -icount shift=0 the instructions they executed, a cross-check of the
 * plugin's count; clock_ns is what two back-to-back clock reads measure
 * (the reads' own share of each call's clock).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/mman.h>
#include <time.h>

#include "markers.h"
#include "misc_ioctl.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void usage(void)
{
	fprintf(stderr, "usage: mlx4_bf_profile [-n CALLS] [-w WARMUP] [-s SPIN] [-t FACTOR] "
		"noop|bf:BYTES|db:BYTES|auto:BYTES...\n");
	exit(2);
}

/* n iterations of a one- or two-instruction loop the compiler cannot fold. */
static void spin(long n)
{
	if (n <= 0)
		return;
#if defined(__x86_64__)
	asm volatile("1: dec %0; jnz 1b" : "+r"(n));
#elif defined(__s390x__)
	asm volatile("1: brctg %0,1b" : "+d"(n));
#else
	while (n--)
		asm volatile("" : "+r"(n));
#endif
}

/* The QP's WQE page, for the staged configurations. */
static uint8_t *wqe_page;
/* The registered page the RDMA writes land in (the QP is its own peer). */
static struct sink sink;

/* Makes @c the call of configuration @conf; returns 0 or -1. */
static int make_call(struct call *c, const char *conf, __u32 qp, uint8_t *wqe,
		     struct mlx4_bf_post_result *res)
{
	const char *colon = strchr(conf, ':');
	int bytes, len, staged = conf[0] == 's';
	__u32 flags;

	if (!strcmp(conf, "noop")) {
		call_init(c, MLX4_BF_OBJECT_CONTEXT, MLX4_BF_METHOD_QUERY_CONTEXT);
		return 0;
	}
	if (!colon)
		return -1;
	bytes = atoi(colon + 1);
	if (bytes < 0 || bytes > 900)
		return -1;
	conf += staged;
	if (!strncmp(conf, "bf:", 3))
		flags = MLX4_BF_POST_F_REQUIRE_BF;
	else if (!strncmp(conf, "db:", 3))
		flags = MLX4_BF_POST_F_FORCE_DOORBELL;
	else if (!strncmp(conf, "auto:", 5))
		flags = 0;
	else
		return -1;
	len = build_rdma_write(wqe, bytes, 0, sink_addr(&sink), sink.mr.rkey);
	if (staged) {
		/* the kernel copies the page on every call: its content stays */
		memcpy(wqe_page, wqe, len);
		call_init(c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_POST_SEND);
		call_inline_u32(c, MLX4_BF_ATTR_QP_HANDLE, qp);
		call_inline_u32(c, MLX4_BF_ATTR_WQE_LEN, len);
		call_inline_u32(c, MLX4_BF_ATTR_POST_FLAGS, flags);
		return 0;
	}
	post_call(c, qp, wqe, len, flags, res);
	return 0;
}

struct stats {
	long kept, dropped, retries;
	uint64_t min_ns, kept_ns;
};

/* The guest clock between two reads with nothing in between: the smallest of 50. */
static uint64_t clock_cost(void)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 50; i++) {
		uint64_t t0 = now_ns(), dt;

		asm volatile(TWO_NOPS ::: "memory");	/* where the markers are */
		dt = now_ns() - t0;
		if (dt < best)
			best = dt;
	}
	return best;
}

/*
 * One call: the kernel marks the outputs it wrote in the call
 * (VALID_OUTPUT), so each call starts from a fresh copy of @tmpl, as a
 * caller building it would.
 */
static int one_call(int fd, const struct call *tmpl, long *retries)
{
	struct call c = *tmpl;
	int ret;

	while ((ret = call_do(fd, &c)) == -EAGAIN) {
		++*retries;
		c = *tmpl;
	}
	return ret;
}

/* @n measured calls (warm-up: @counted false); 0 or -errno. */
static int run(int fd, const struct call *tmpl, long n, long spins, double factor,
	       int counted, struct stats *st)
{
	for (long i = 0; i < n; i++) {
		uint64_t t0, dt;
		int ret;

		spin(spins);
		t0 = now_ns();
		if (counted)
			asm volatile(COUNT_START ::: "memory");
		ret = one_call(fd, tmpl, &st->retries);
		if (counted)
			asm volatile(COUNT_PAUSE ::: "memory");
		dt = now_ns() - t0;
		if (ret)
			return ret;
		if (!st->min_ns || dt < st->min_ns)
			st->min_ns = dt;
		if (!counted)
			continue;
		if (factor > 0 && dt > factor * st->min_ns) {
			asm volatile(DROP ::: "memory");
			st->dropped++;
		} else {
			asm volatile(KEEP ::: "memory");
			st->kept++;
			st->kept_ns += dt;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	static uint8_t wqe[MAX_WQE + 64];
	struct mlx4_bf_post_result res;
	struct mlx4_bf_qp_info qp;
	long calls = 2000, warmup = 200, spins = 50000;
	double factor = 1.5;
	cpu_set_t cpus;
	int fd, opt, ret, window = 0;

	while ((opt = getopt(argc, argv, "n:w:s:t:")) != -1) {
		switch (opt) {
		case 'n':
			calls = atol(optarg);
			break;
		case 'w':
			warmup = atol(optarg);
			break;
		case 's':
			spins = atol(optarg);
			break;
		case 't':
			factor = atof(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind >= argc || calls <= 0 || warmup < 0)
		usage();

	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	if (sched_setaffinity(0, sizeof(cpus), &cpus))
		perror("sched_setaffinity (calls run on another vCPU are not counted)");
	mlockall(MCL_CURRENT | MCL_FUTURE);

	fd = open(DEV_PATH, O_RDWR);
	if (fd < 0) {
		perror(DEV_PATH);
		return 1;
	}
	ret = create_qp(fd, &qp);
	if (ret) {
		fprintf(stderr, "CREATE_QP: %s\n", strerror(-ret));
		return 1;
	}
	ret = sink_open(fd, &sink);
	if (ret) {
		fprintf(stderr, "REG_MR: %s\n", strerror(-ret));
		return 1;
	}
	wqe_page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, qp.wqe_offset);
	if (wqe_page == MAP_FAILED) {
		perror("mmap of the WQE page");
		return 1;
	}
	for (int i = optind; i < argc; i++) {
		const char *conf = argv[i];
		struct stats st = { 0 };
		struct call tmpl;

		if (make_call(&tmpl, conf, qp.qp_handle, wqe, &res)) {
			fprintf(stderr, "mlx4_bf_profile: bad configuration '%s'\n", conf);
			usage();
		}
		ret = run(fd, &tmpl, warmup, spins, factor, 0, &st);
		if (!ret) {
			st.retries = 0;
			ret = run(fd, &tmpl, calls, spins, factor, 1, &st);
		}
		asm volatile(WINDOW_END ::: "memory");
		if (ret) {
			fprintf(stderr, "%s: call failed: %s\n", conf, strerror(-ret));
			return 1;
		}
		printf("profile: window %d config %s calls %ld kept %ld dropped %ld retries %ld "
		       "min_ns %llu kept_ns %llu clock_ns %llu\n", ++window, conf, calls, st.kept,
		       st.dropped, st.retries, (unsigned long long)st.min_ns,
		       (unsigned long long)st.kept_ns, (unsigned long long)clock_cost());
		fflush(stdout);
	}
	close(fd);
	return 0;
}
