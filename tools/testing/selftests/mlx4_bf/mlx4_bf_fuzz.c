// SPDX-License-Identifier: GPL-2.0
/*
 * Randomized and mutated MLX4_BF_IOCTL calls from several processes: valid
 * WQEs with flipped bits, random headers and attributes, random pointers,
 * QP and context churn. The kernel must survive (the runner checks its log
 * for oops/BUG/WARN/lockdep/KFENCE reports) and the device must still post
 * correctly afterwards: the device model's analyzer must have executed
 * exactly the expected WQE from the BlueFlame bytes of the context's page
 * (without the model that check SKIPs).
 *
 * Usage: mlx4_bf_fuzz [-n total_calls] [-p processes] [-s seed]
 * The seed is printed; the same seed replays the same calls.
 */
#include <getopt.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "mlx4_bf_model.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static uint32_t below(uint32_t n)
{
	return n ? rnd() % n : 0;
}

/* A pointer user space may hand in: valid, NULL, kernel, unmapped, odd. */
static uint64_t random_pointer(void *valid, void *unmapped)
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

static long fuzz(int seed_index, uint64_t seed, long calls, void *unmapped)
{
	static uint8_t wqe[MAX_WQE + 64], out[4096];
	struct mlx4_bf_qp_info qp = {};
	long ok = 0;
	int fd = -1;

	rng_state = seed + seed_index * 0x9E3779B97F4A7C15ULL;
	if (!rng_state)
		rng_state = 1;
	for (long i = 0; i < calls; i++) {
		struct call c;
		int len;

		if (fd < 0 || below(20000) == 0) {
			if (fd >= 0)
				close(fd);
			fd = open(DEV_PATH, O_RDWR);
			if (fd < 0)
				return -1;
			create_qp(fd, &qp);
		}
		switch (below(9)) {
		case 0:
		case 1:
		case 2: {			/* a valid WQE, mutated */
			len = build_rdma_write(wqe, 1 + below(300), rnd());
			for (int k = below(4); k > 0; k--)
				wqe[below(len)] ^= 1 << below(8);
			if (below(8) == 0)
				len = below(MAX_WQE + 32);
			post_call(&c, below(16) ? qp.qp_handle : rnd(), wqe, len,
				  below(4) ? 0 : rnd() & 7, below(2) ? (void *)out : NULL);
			break;
		}
		case 3: {			/* random header, random attributes */
			uint8_t *raw = (uint8_t *)&c;

			for (size_t k = 0; k < sizeof(c); k++)
				raw[k] = rnd();
			c.hdr.num_attrs = below(MLX4_BF_MAX_ATTRS + 2);
			if (below(2))
				c.hdr.length = sizeof(c.hdr) + c.hdr.num_attrs * sizeof(c.attrs[0]);
			if (below(2))
				c.hdr.reserved1 = c.hdr.driver_id = c.hdr.reserved2 = 0;
			for (int k = 0; k < MLX4_BF_MAX_ATTRS; k++) {
				if (below(2)) {
					c.attrs[k].reserved = 0;
					c.attrs[k].flags &= 1;
					c.attrs[k].attr_id = 1 + below(10);
					c.attrs[k].len = below(300);
					c.attrs[k].data = random_pointer(out, unmapped);
				}
			}
			c.hdr.object_id = below(5);
			c.hdr.method_id = below(5);
			break;
		}
		case 4:				/* a valid call with a bad pointer */
			post_call(&c, qp.qp_handle, (void *)(uintptr_t)random_pointer(wqe, unmapped),
				  16 * (1 + below(20)), 0, (void *)(uintptr_t)random_pointer(out, unmapped));
			break;
		case 5:				/* QP churn */
			if (below(2)) {
				destroy_qp(fd, qp.qp_handle);
				create_qp(fd, &qp);
			}
			call_init(&c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_CREATE_QP);
			call_attr(&c, MLX4_BF_ATTR_QP_INFO, 8, random_pointer(out, unmapped));
			break;
		case 6:				/* the receive side: counts, peers, arm flags */
			call_init(&c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_POST_RECV + below(3));
			call_inline_u32(&c, MLX4_BF_ATTR_QP_HANDLE, below(16) ? qp.qp_handle : rnd());
			if (below(2))
				call_inline_u32(&c, MLX4_BF_ATTR_RECV_COUNT + below(3),
						below(2) ? below(20) : (below(2) ? qp.qpn : rnd()));
			break;
		default:			/* queries, some with odd outputs */
			call_init(&c, 1 + below(2), 1 + below(2));
			call_attr(&c, 1 + below(4), below(2) ? sizeof(struct mlx4_bf_stats) : below(200),
				  random_pointer(out, unmapped));
			break;
		}
		if (below(64) == 0) {
			/* the header itself at a bad address */
			if (!ioctl(fd, MLX4_BF_IOCTL, (void *)(uintptr_t)random_pointer(&c, unmapped)))
				ok++;
		} else if (!ioctl(fd, MLX4_BF_IOCTL, &c)) {
			ok++;
		}
	}
	close(fd);
	return ok;
}

/* The analyzer executed one WQE, @want, from the BF bytes of page @page, half 0. */
static int analyzer_saw(struct model *m, const struct model_posts *before, uint32_t qpn,
			uint32_t page, uint8_t *want, int burst)
{
	static struct model_wqe got;
	struct model_posts after;

	stamp_cq_update(want);
	model_posts(m, &after);
	model_last_wqe(m, &got);
	printf("# analyzer saw %llu WQE(s) from BlueFlame, %llu by DMA; the last: qp %#x, index %u, from %s, page %u half %u, %u bytes\n",
	       (unsigned long long)(after.wqe_bf - before->wqe_bf),
	       (unsigned long long)(after.wqe_dma - before->wqe_dma), got.qpn, got.index,
	       model_source_str(got.source), got.page, got.half, got.len);
	return after.wqe_bf - before->wqe_bf == 1 && after.wqe_dma == before->wqe_dma &&
	       got.source == MODEL_SOURCE_BF && got.qpn == qpn && got.index == 0 &&
	       got.page == page && got.half == 0 && got.len == (uint32_t)burst &&
	       first_difference(got.bytes, want, burst) == -1;
}

/* After the campaign: a fresh context still posts exactly, as @model saw it. */
static int device_still_works(struct model *model)
{
	struct mlx4_bf_device_info dev;
	struct mlx4_bf_context_info info;
	struct mlx4_bf_qp_info qp;
	uint8_t wqe[MAX_WQE + 64], want[MAX_WQE + 64];
	struct model_posts before;
	int fd = open(DEV_PATH, O_RDWR), len, burst, ret;

	if (fd < 0 || query_device(fd, &dev) || query_context(fd, &info) || create_qp(fd, &qp))
		return 0;
	model_posts(model, &before);
	len = build_rdma_write(wqe, 77, 5);
	burst = expected_bf(want, wqe, len, qp.qpn, 0, dev.sq_entries);
	ret = !post_send(fd, qp.qp_handle, wqe, len, 0, NULL) &&
	      analyzer_saw(model, &before, qp.qpn, info.uar_index, want, burst);
	close(fd);
	return ret;
}

int main(int argc, char **argv)
{
	long total = 1000000, per;
	uint64_t seed = time(NULL);
	int procs = 4, opt, status, failed = 0;
	struct timespec t0, t1;
	struct model model;
	void *unmapped;

	while ((opt = getopt(argc, argv, "n:p:s:")) != -1) {
		switch (opt) {
		case 'n':
			total = atol(optarg);
			break;
		case 'p':
			procs = atoi(optarg);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, "usage: %s [-n calls] [-p processes] [-s seed]\n", argv[0]);
			return 2;
		}
	}
	if (procs < 1 || procs > 64 || total < procs) {
		fprintf(stderr, "mlx4_bf_fuzz: need 1..64 processes and at least one call each\n");
		return 2;
	}
	printf("TAP version 13\n1..2\n");
	printf("# seed %llu, %ld calls, %d processes (replay: -s %llu -n %ld -p %d)\n",
	       (unsigned long long)seed, total, procs, (unsigned long long)seed, total, procs);
	if (access(DEV_PATH, F_OK)) {
		printf("ok 1 fuzz # SKIP %s missing\nok 2 device_still_works # SKIP\n", DEV_PATH);
		return 4;
	}
	unmapped = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(unmapped, 4096);
	per = total / procs;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fflush(stdout);
	for (int i = 0; i < procs; i++) {
		if (fork() == 0) {
			long ok = fuzz(i, seed, per, unmapped);

			printf("# process %d: %ld calls, %ld accepted\n", i, per, ok);
			fflush(stdout);
			_exit(ok < 0);
		}
	}
	while (wait(&status) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			failed++;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("# %ld calls in %.1f s, %d processes failed\n", per * procs,
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, failed);
	printf("%sok 1 fuzz\n", failed ? "not " : "");
	if (model_open(&model)) {
		printf("ok 2 device_still_works # SKIP " NO_ANALYZER "\n");
	} else {
		if (device_still_works(&model)) {
			printf("ok 2 device_still_works\n");
		} else {
			printf("not ok 2 device_still_works\n");
			failed++;
		}
		model_close(&model);
	}
	return failed ? 1 : 0;
}
