// SPDX-License-Identifier: GPL-2.0
/*
 * Randomized and mutated MLX4_BF_IOCTL calls from several processes: valid
 * WQEs with flipped bits, random headers and attributes, random pointers,
 * QP and context churn, memory regions registered and deregistered over
 * random ranges (mapped, read-only, unmapped, huge, empty, overlapping) with
 * random access flags, and gathers and RDMA writes naming them by good,
 * stale, foreign and random keys, in range and one byte out. The kernel must
 * survive (the runner checks its log for oops/BUG/WARN/lockdep/KFENCE
 * reports), the device must still post correctly afterwards: the device
 * model's analyzer must have executed exactly the expected WQE from the
 * BlueFlame bytes of the context's page (without the model that check
 * SKIPs), and with every process gone no page may stay pinned (debugfs).
 *
 * Usage: mlx4_bf_fuzz [-n total_calls] [-p processes] [-s seed]
 * The seed is printed; the same seed replays the same calls.
 */
#include <getopt.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "fuzz_rand.h"
#include "mlx4_bf_model.h"

/*
 * The memory regions of one fuzzing process: a pool of read-write pages
 * followed by a PROT_NONE guard page, a read-only page, and what it
 * registered in its current context (live) or before (stale keys). Its
 * sink (mlx4_bf_lib.h) is one more, registered in every context it opens.
 */
#define POOL_PAGES	32
#define POOL_BYTES	(POOL_PAGES * 4096)
#define FUZZ_MRS	24

struct fuzz_mr {
	__u64 addr, len;
	__u32 handle, key, access;
	int live;
};

static struct {
	uint8_t *pool, *readonly;
	void *unmapped;
	__u64 max_mr_size;
	struct fuzz_mr mrs[FUZZ_MRS];
	int next;
	struct sink sink;
} mem;

static int mem_init(int fd, void *unmapped)
{
	struct mlx4_bf_device_info dev;
	uint8_t *p = mmap(NULL, POOL_BYTES + 2 * 4096, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || mprotect(p + POOL_BYTES, 4096, PROT_NONE) ||
	    mprotect(p + POOL_BYTES + 4096, 4096, PROT_READ))
		return -1;
	for (int i = 0; i < POOL_BYTES; i++)
		p[i] = (uint8_t)(i * 13);
	mem.pool = p;
	mem.readonly = p + POOL_BYTES + 4096;
	mem.unmapped = unmapped;
	mem.max_mr_size = query_device(fd, &dev) ? 1ull << 30 : dev.max_mr_size;
	return 0;
}

/* A new context: every MR of the old one is stale; the sink is registered again. */
static void mem_new_context(int fd)
{
	for (int i = 0; i < FUZZ_MRS; i++)
		mem.mrs[i].live = 0;
	sink_open(fd, &mem.sink);
}

/* A range to register: inside the pool or across its end, read-only, unmapped, huge, ... */
static void random_range(__u64 *addr, __u64 *len)
{
	__u64 off = below(POOL_BYTES);
	struct fuzz_mr *m = &mem.mrs[below(FUZZ_MRS)];

	*addr = (uintptr_t)mem.pool + off;
	switch (below(9)) {
	case 0:				/* inside the pool */
		*len = 1 + below(POOL_BYTES - off);
		break;
	case 1:				/* whole pages, maybe into the guard */
		*addr = (uintptr_t)mem.pool + 4096 * below(POOL_PAGES);
		*len = 4096 * (1 + below(6));
		break;
	case 2:				/* small, maybe empty, maybe across the end */
		*len = below(3 * 4096);
		break;
	case 3:				/* the read-only page */
		*addr = (uintptr_t)mem.readonly + below(4096);
		*len = 1 + below(4096);
		break;
	case 4:				/* nothing mapped */
		*addr = (uintptr_t)mem.unmapped + below(4096);
		*len = 1 + below(8192);
		break;
	case 5:				/* around the largest MR, or any length */
		*len = below(2) ? mem.max_mr_size - 1 + below(3) : rnd();
		break;
	case 6:				/* any address: kernel, wrapping, zero */
		*addr = below(2) ? rnd() : 0xffff888000000000ULL + (rnd() & 0xffffff);
		*len = below(2) ? 1 + below(8192) : rnd();
		if (below(4) == 0)
			*addr = ~0ULL - below(4096);
		break;
	default:			/* overlapping one registered before */
		if (m->len && m->len < POOL_BYTES) {
			*addr = m->addr + below(m->len);
			*len = 1 + below(m->len + 4096);
		} else {
			*len = 1 + below(4096);
		}
		break;
	}
}

/* REG_MR of a random range with random access, attributes sometimes missing or odd. */
static void random_reg_mr(struct call *c, struct mlx4_bf_mr_info *out)
{
	__u64 addr, len;
	__u32 access = below(8) ? below(4) : rnd();

	random_range(&addr, &len);
	call_init(c, MLX4_BF_OBJECT_MR, MLX4_BF_METHOD_REG_MR);
	if (below(32))
		call_attr(c, MLX4_BF_ATTR_MR_ADDR, below(32) ? 8 : below(9), addr);
	if (below(32))
		call_inline_u64(c, MLX4_BF_ATTR_MR_LENGTH, len);
	if (below(4))
		call_inline_u32(c, MLX4_BF_ATTR_MR_ACCESS, access);
	call_attr(c, MLX4_BF_ATTR_MR_INFO, below(32) ? sizeof(*out) : below(24), (uintptr_t)out);
}

/* After a REG_MR that worked: remember the MR, over the oldest stale one. */
static void remember_mr(const struct call *c, const struct mlx4_bf_mr_info *info)
{
	struct fuzz_mr *m = &mem.mrs[mem.next];
	__u32 access = 0;

	for (int i = 0; i < c->hdr.num_attrs; i++) {
		const struct mlx4_bf_attr *a = &c->attrs[i];

		if (a->attr_id == MLX4_BF_ATTR_MR_ADDR)
			m->addr = a->data;
		else if (a->attr_id == MLX4_BF_ATTR_MR_LENGTH)
			m->len = a->data;
		else if (a->attr_id == MLX4_BF_ATTR_MR_ACCESS)
			memcpy(&access, &a->data, 4);
	}
	m->handle = info->mr_handle;
	m->key = info->lkey;
	m->access = access;
	m->live = 1;
	mem.next = (mem.next + 1) % FUZZ_MRS;
}

/* DEREG_MR of a live, stale or random handle. */
static void random_dereg_mr(struct call *c, __u32 *handle)
{
	struct fuzz_mr *m = &mem.mrs[below(FUZZ_MRS)];

	switch (below(4)) {
	case 0:
		*handle = rnd();
		break;
	case 1:
		*handle = mem.sink.mr.mr_handle;
		break;
	default:
		*handle = m->handle;
		break;
	}
	call_init(c, MLX4_BF_OBJECT_MR, MLX4_BF_METHOD_DEREG_MR);
	call_inline_u32(c, MLX4_BF_ATTR_MR_HANDLE, *handle);
}

/* After a DEREG_MR that worked: the key is stale now; the sink comes back. */
static void forget_mr(int fd, __u32 handle)
{
	for (int i = 0; i < FUZZ_MRS; i++)
		if (mem.mrs[i].live && mem.mrs[i].handle == handle)
			mem.mrs[i].live = 0;
	if (handle == mem.sink.mr.mr_handle)
		sink_open(fd, &mem.sink);
}

/*
 * An address and key for @n bytes: mostly inside a live MR (remote-writable
 * if @remote: the sink, or one of ours), else one byte out at either end,
 * a stale key, the reserved lkey, a random key, or a good key with any
 * address.
 */
static void random_key(int remote, __u32 n, __u64 *addr, __u32 *key)
{
	struct fuzz_mr *m = &mem.mrs[below(FUZZ_MRS)];
	__u64 start = sink_addr(&mem.sink), len = SINK_BYTES;

	*key = mem.sink.mr.lkey;
	if (m->live && m->len && (!remote || m->access == ACCESS_RDMA) && below(2)) {
		start = m->addr;
		len = m->len;
		*key = m->key;
	}
	switch (below(10)) {
	case 0:				/* one byte past the end */
		*addr = start + len - n + 1;
		break;
	case 1:				/* one byte before the start */
		*addr = start - 1;
		break;
	case 2:				/* a stale key (or a live one) */
		*key = m->key;
		*addr = m->addr;
		break;
	case 3:
		*key = below(2) ? RESERVED_LKEY : rnd();
		*addr = start;
		break;
	case 4:				/* a good key, any address */
		*addr = below(2) ? rnd() : (uintptr_t)mem.pool + below(POOL_BYTES);
		break;
	default:			/* inside */
		*addr = start + (n <= len ? below(len - n + 1) : 0);
		break;
	}
}

/*
 * A WQE naming memory by key: an RDMA write (with immediate sometimes) of
 * inline bytes or of up to 3 gathered segments, or a SEND of gathered
 * segments; now and then a bit flipped. Returns its length.
 */
static int keyed_wqe(uint8_t *wqe)
{
	static const __u32 opcodes[] = { OP_RDMA_WRITE, OP_RDMA_WRITE, OP_RDMA_WRITE_IMM, OP_SEND };
	__u32 opcode = opcodes[below(4)], rkey, n = 0;
	int nsegs = below(4), len;
	struct sge sg[3];
	__u64 raddr;

	for (int i = 0; i < nsegs; i++) {
		sg[i].length = below(16) ? 1 + below(3000) : rnd();
		random_key(0, sg[i].length, &sg[i].addr, &sg[i].lkey);
		n += sg[i].length;
	}
	if (!nsegs && opcode == OP_SEND)
		opcode = OP_RDMA_WRITE;
	if (!nsegs)
		n = 1 + below(200);
	random_key(1, n, &raddr, &rkey);
	if (nsegs) {
		len = build_gather(wqe, opcode, raddr, rkey, sg, nsegs);
	} else {
		len = build_rdma_write(wqe, n, rnd(), raddr, rkey);
		put_be32(wqe, opcode);
	}
	if (opcode == OP_RDMA_WRITE_IMM)
		put_be32(wqe + 12, rnd());
	if (below(4) == 0)
		wqe[below(len)] ^= 1 << below(8);
	return len;
}

static long fuzz(int seed_index, uint64_t seed, long calls, void *unmapped)
{
	static uint8_t wqe[MAX_WQE + 64], out[4096];
	struct mlx4_bf_qp_info qp = {};
	struct mlx4_bf_mr_info mr;
	long ok = 0;
	int fd = -1;

	rng_state = seed + seed_index * 0x9E3779B97F4A7C15ULL;
	if (!rng_state)
		rng_state = 1;
	for (long i = 0; i < calls; i++) {
		int len, what = below(13);
		__u32 handle = 0;
		struct call c;

		if (fd < 0 || below(20000) == 0) {
			if (fd >= 0)
				close(fd);
			fd = open(DEV_PATH, O_RDWR);
			if (fd < 0 || (!mem.pool && mem_init(fd, unmapped)))
				return -1;
			create_qp(fd, &qp);
			mem_new_context(fd);
		}
		switch (what) {
		case 0:
		case 1:
		case 2: {			/* a valid WQE, mutated */
			int payload = 1 + below(300);
			__u64 raddr = sink_addr(&mem.sink) + below(SINK_BYTES - payload + 1);
			__u32 rkey = mem.sink.mr.rkey;

			if (below(8) == 0)
				random_key(1, payload, &raddr, &rkey);
			len = build_rdma_write(wqe, payload, rnd(), raddr, rkey);
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
					c.attrs[k].attr_id = 1 + below(MLX4_BF_ATTR_MR_HANDLE);
					c.attrs[k].len = below(300);
					c.attrs[k].data = random_pointer(out, unmapped);
				}
			}
			c.hdr.object_id = below(6);
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
		case 7:				/* memory regions: register */
			random_reg_mr(&c, &mr);
			break;
		case 8:				/* and deregister */
			random_dereg_mr(&c, &handle);
			break;
		case 9:
		case 10:			/* gathers and RDMA writes by key */
			len = keyed_wqe(wqe);
			post_call(&c, qp.qp_handle, wqe, len, below(4) ? 0 : rnd() & 3,
				  below(2) ? (void *)out : NULL);
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
			if (what == 7)
				remember_mr(&c, &mr);
			else if (what == 8)
				forget_mr(fd, handle);
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

/*
 * After the campaign: a fresh context still posts exactly, as @model saw it,
 * and (diag version 4) its RDMA write landed in its sink.
 */
static int device_still_works(struct model *model)
{
	struct mlx4_bf_device_info dev;
	struct mlx4_bf_context_info info;
	struct mlx4_bf_qp_info qp;
	struct sink sink = {};
	uint8_t wqe[MAX_WQE + 64], want[MAX_WQE + 64];
	struct model_posts before;
	int fd = open(DEV_PATH, O_RDWR), len, burst, ret;

	if (fd < 0 || query_device(fd, &dev) || query_context(fd, &info) || create_qp(fd, &qp) ||
	    sink_open(fd, &sink))
		return 0;
	model_posts(model, &before);
	len = build_rdma_write(wqe, 77, 5, sink_addr(&sink) + 100, sink.mr.rkey);
	burst = expected_bf(want, wqe, len, qp.qpn, 0, dev.sq_entries);
	ret = !post_send(fd, qp.qp_handle, wqe, len, 0, NULL) &&
	      analyzer_saw(model, &before, qp.qpn, info.uar_index, want, burst);
	if (ret && model_version(model) >= 4) {
		/* the analyzer's read waited for the burst: the bytes are there */
		rdma_write_pattern(want, 77, 5);
		ret = !memcmp(sink.buf + 100, want, 77);
		printf("# the RDMA write %s its sink\n", ret ? "landed in" : "did not land in");
	}
	close(fd);
	return ret;
}

/* With every context closed, no page may stay pinned: 1 if so, 0 if not, -1 unknown. */
static int nothing_pinned(void)
{
	long pinned = debugfs_counter("device", "pinned_pages");
	long mrs = debugfs_counter("device", "mrs");

	if (pinned < 0)
		return -1;
	printf("# after the campaign: %ld MRs, %ld pages pinned\n", mrs, pinned);
	return pinned == 0 && mrs <= 0;
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
	printf("TAP version 13\n1..3\n");
	printf("# seed %llu, %ld calls, %d processes (replay: -s %llu -n %ld -p %d)\n",
	       (unsigned long long)seed, total, procs, (unsigned long long)seed, total, procs);
	if (access(DEV_PATH, F_OK)) {
		printf("ok 1 fuzz # SKIP %s missing\nok 2 device_still_works # SKIP\n"
		       "ok 3 nothing_left_pinned # SKIP\n", DEV_PATH);
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
	switch (nothing_pinned()) {
	case -1:
		printf("ok 3 nothing_left_pinned # SKIP no pinned_pages in debugfs\n");
		break;
	case 0:
		printf("not ok 3 nothing_left_pinned\n");
		failed++;
		break;
	default:
		printf("ok 3 nothing_left_pinned\n");
	}
	return failed ? 1 : 0;
}
