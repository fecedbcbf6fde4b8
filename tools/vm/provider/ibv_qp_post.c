// SPDX-License-Identifier: GPL-2.0
/*
 * ibv_qp_post: our RDMA device's QP_POST method (uapi/mlx4_bf.h), called
 * the way the patched libmlx4 calls it, on the verbs context's command file
 * (RDMA_VERBS_IOCTL), with WQEs this program builds in the send queue of a
 * QP that libmlx4 created (mlx4dv gives the queue), as libmlx4 builds them:
 * owner bit, WQE counter and QP number stamped. One KTAP result each:
 *
 *  - the good path: RDMA writes with inline data of 4, 64, 128 and 208
 *    bytes take the BlueFlame path (the result says so, with the bytes
 *    written and the store blocks), complete, and land in the target;
 *  - the doorbell: an inline WQE longer than a BlueFlame buffer and a
 *    gathered one are posted with the send doorbell, and complete;
 *  - every refusal, and that nothing of a refused WQE was posted: a data
 *    segment naming a region of another PD, a WQE of 40 bytes, one of 1024,
 *    one naming another QP's number, unknown and contradicting flags,
 *    REQUIRE_BF of a gathered WQE, a WQE the kernel cannot read, an unknown
 *    handle, the QP of another context, a QP in RESET, a destroyed QP, a
 *    closed command file.
 *
 * With -w FILE it sets up, prints "# ready", waits until FILE exists (the
 * suite unbinds the adapter meanwhile) and then expects the method to fail
 * with EIO: the device is gone.
 *
 * With -f CALLS it fuzzes the method instead: valid WQEs with flipped bits,
 * random attribute IDs, lengths, flags and pointers (NULL, kernel,
 * unmapped, odd), random handles, the QP destroyed and made again now and
 * then; the seed (-s) is printed and replays the calls. The kernel must
 * survive (the suite reads its log) and a new QP must still post.
 *
 * Usage: ibv_qp_post [-d DEV] [-w FILE | -f CALLS [-s SEED]]
 * (exit status 0 if all ok)
 */
#include <endian.h>
#include <errno.h>
#include <infiniband/mlx4dv.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_user_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../../../uapi/mlx4_bf.h"

#define BUF_SIZE 4096
#define MAX_INLINE 208
#define POLL_TRIES 2000000

static struct ibv_context *ctx;
static struct ibv_pd *pd, *other_pd;
static struct ibv_cq *cq;
/* mr: the target (dst), src_mr: what gathered writes read (src) */
static struct ibv_mr *mr, *src_mr, *other_mr;
static struct ibv_qp *qp;
static struct mlx4dv_qp dv;
static uint32_t head;
static uint8_t *src, *dst;
static int results, failures;

static void die(const char *what, int err)
{
	printf("# ibv_qp_post: %s: %s\n", what, strerror(err));
	printf("not ok %d setup\n", ++results);
	exit(1);
}

static void result(int ok, const char *name)
{
	printf("%s %d %s\n", ok ? "ok" : "not ok", ++results, name);
	failures += !ok;
}

static struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *c = NULL;
	int i;

	if (!list)
		die("ibv_get_device_list", errno);
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			c = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!c)
		die(name, ENODEV);
	return c;
}

static struct ibv_qp *create_qp(void)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = 16,
			.max_recv_wr = 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = 512,
		},
	};
	struct ibv_qp *q = ibv_create_qp(pd, &a);

	if (!q)
		die("ibv_create_qp", errno);
	return q;
}

/* RESET -> INIT -> RTR -> RTS, the destination being the QP itself. */
static void connect_to_self(struct ibv_qp *q)
{
	struct ibv_port_attr port;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};

	if (ibv_query_port(ctx, 1, &port))
		die("ibv_query_port", errno);
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT", errno);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = q->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = port.lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR", errno);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			  IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS", errno);
}

/* The method's call; returns 0 or the errno. */
struct post {
	int fd;
	uint32_t handle;
	const void *wqe;
	uint32_t len;
	int with_flags;
	uint32_t flags;
	struct mlx4_bf_post_result *result;
};

static int qp_post(const struct post *p)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[4];
	} cmd;
	struct ib_uverbs_attr *a = cmd.attrs;

	memset(&cmd, 0, sizeof(cmd));
	/* An object's handle: in data, len 0. */
	a->attr_id = MLX4_BF_IB_ATTR_QP_POST_HANDLE;
	a->data = p->handle;
	a++;
	a->attr_id = MLX4_BF_IB_ATTR_QP_POST_WQE;
	a->len = p->len;
	a->data = (uintptr_t)p->wqe;
	a++;
	if (p->with_flags) {
		a->attr_id = MLX4_BF_IB_ATTR_QP_POST_FLAGS;
		a->len = sizeof(uint32_t);
		a->data = p->flags;
		a++;
	}
	if (p->result) {
		a->attr_id = MLX4_BF_IB_ATTR_QP_POST_RESULT;
		a->len = sizeof(*p->result);
		a->data = (uintptr_t)p->result;
		a++;
	}
	cmd.hdr.num_attrs = a - cmd.attrs;
	cmd.hdr.length = sizeof(cmd.hdr) + cmd.hdr.num_attrs * sizeof(*a);
	cmd.hdr.object_id = UVERBS_OBJECT_QP;
	cmd.hdr.method_id = MLX4_BF_IB_METHOD_QP_POST;
	cmd.hdr.driver_id = RDMA_DRIVER_MLX4;
	return ioctl(p->fd, RDMA_VERBS_IOCTL, &cmd) ? errno : 0;
}

/* The next send-queue slot. */
static uint8_t *slot(void)
{
	return (uint8_t *)dv.buf.buf + dv.sq.offset +
	       ((head & (dv.sq.wqe_cnt - 1)) << dv.sq.wqe_shift);
}

static void put32(uint8_t *at, uint32_t v)
{
	v = htobe32(v);
	memcpy(at, &v, 4);
}

/*
 * An RDMA write of LEN bytes of src to dst, in the next slot, as libmlx4's
 * mlx4_post_send() builds it: inline (segments split at 64 bytes of the
 * queue) or gathered from LKEY, signaled, owner bit and counter of the
 * slot, the QP's number; returns its length.
 */
static uint32_t build_write(uint32_t len, int inline_data, uint32_t lkey)
{
	uint8_t *w = slot(), *seg;
	uint32_t size, off, done = 0, seg_len = 0, segs = 0;

	memset(w, 0, 1 << dv.sq.wqe_shift);
	/* raddr segment */
	*(uint64_t *)(w + 16) = htobe64((uintptr_t)dst);
	put32(w + 24, mr->rkey);
	if (inline_data) {
		seg = w + 32;
		off = 36;
		while (done < len) {
			uint32_t n = len - done;

			if (n > 64 - off % 64)
				n = 64 - off % 64;
			memcpy(w + off, src + done, n);
			done += n;
			seg_len += n;
			off += n;
			if (off % 64 == 0 && done < len) {
				put32(seg, 1u << 31 | seg_len);
				segs++;
				seg = w + off;
				off += 4;
				seg_len = 0;
			}
		}
		put32(seg, 1u << 31 | seg_len);
		segs++;
		size = 2 + (len + 4 * segs + 15) / 16;
	} else {
		put32(w + 32, len);
		put32(w + 36, lkey);
		*(uint64_t *)(w + 40) = htobe64((uintptr_t)src);
		size = 3;
	}
	put32(w + 8, 3 << 2); /* srcrb_flags: CQ_UPDATE */
	put32(w + 4, be32toh(dv.doorbell_qpn) | size);
	put32(w, 0x08 | (head & 0xffff) << 8 |
	      (head & dv.sq.wqe_cnt ? 1u << 31 : 0));
	return size * 16;
}

/* One completion within POLL_TRIES polls: 0, or -1 and a "#" line. */
static int completion(void)
{
	struct ibv_wc wc;
	long i;

	for (i = 0; i < POLL_TRIES; i++) {
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n < 0)
			break;
		if (n == 1) {
			if (wc.status != IBV_WC_SUCCESS) {
				printf("# completion: %s\n",
				       ibv_wc_status_str(wc.status));
				return -1;
			}
			return 0;
		}
	}
	printf("# no completion\n");
	return -1;
}

/* Nothing completes: a refused WQE was not posted. */
static int nothing_posted(void)
{
	struct ibv_wc wc;
	int i;

	for (i = 0; i < 1000; i++)
		if (ibv_poll_cq(cq, 1, &wc) != 0)
			return -1;
	return 0;
}

static void fill(uint32_t len, uint8_t seed)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		src[i] = (uint8_t)(seed + i * 7);
	memset(dst, 0, BUF_SIZE);
}

/* An RDMA write posted through the method and its outcome. */
static void good_write(uint32_t len, int inline_data, uint32_t want_path)
{
	struct mlx4_bf_post_result r = { 0 };
	struct post p = { .fd = ctx->cmd_fd, .handle = qp->handle };
	char name[64];
	int err, ok;

	fill(len, (uint8_t)len);
	p.len = build_write(len, inline_data, src_mr->lkey);
	p.wqe = slot();
	p.result = &r;
	err = qp_post(&p);
	ok = !err && r.path == want_path && !completion() &&
	     !memcmp(src, dst, len);
	if (!err)
		head++;
	printf("# %u bytes %s: errno %d, path %u, wqe_index %u, bf_offset %#llx, %u bytes written, %u store blocks\n",
	       len, inline_data ? "inline" : "gathered", err, r.path,
	       r.wqe_index, (unsigned long long)r.bf_offset,
	       r.bytes_written, r.store_blocks);
	ok = ok && r.wqe_index == ((head - 1) & 0xffff);
	if (want_path == MLX4_BF_PATH_BLUEFLAME)
		ok = ok && r.bytes_written == (p.len + 63) / 64 * 64;
	snprintf(name, sizeof(name), "%s_%u_%s",
		 want_path == MLX4_BF_PATH_BLUEFLAME ? "blueflame" : "doorbell",
		 len, inline_data ? "inline" : "gathered");
	result(ok, name);
}

/* A call that must fail with WANT and post nothing. */
static void refused(const char *name, const struct post *p, int want)
{
	int err = qp_post(p);
	int ok = err == want && !nothing_posted();

	printf("# %s: errno %d (%s); want %d (%s)\n", name, err,
	       strerror(err), want, strerror(want));
	result(ok, name);
}

static void refusals(void)
{
	struct post p = { .fd = ctx->cmd_fd, .handle = qp->handle };
	struct ibv_context *other;
	struct ibv_qp *reset_qp;
	uint8_t *w;

	/* A data segment naming a region of another protection domain. */
	p.len = build_write(64, 0, other_mr->lkey);
	p.wqe = slot();
	refused("other_pd_lkey", &p, EACCES);

	p.len = build_write(64, 1, 0);
	p.wqe = slot();
	w = slot();
	/* 40 bytes: not whole 16-byte units. */
	p.len = 40;
	refused("unaligned_40", &p, EINVAL);
	/* Longer than the longest WQE (the core checks the attribute). */
	p.len = 1024;
	refused("oversized_1024", &p, EINVAL);
	p.len = build_write(64, 1, 0);

	/* Another QP's number where the kernel stamps this one's. */
	put32(w + 4, ((be32toh(dv.doorbell_qpn) >> 8) ^ 1) << 8 | p.len / 16);
	refused("other_qpn", &p, EINVAL);
	p.len = build_write(64, 1, 0);

	p.with_flags = 1;
	p.flags = 1u << 7;
	refused("unknown_flag", &p, EINVAL);
	p.flags = MLX4_BF_POST_F_FORCE_DOORBELL | MLX4_BF_POST_F_REQUIRE_BF;
	refused("contradicting_flags", &p, EINVAL);
	p.flags = MLX4_BF_POST_F_REQUIRE_BF;
	p.len = build_write(64, 0, src_mr->lkey);
	refused("require_bf_gathered", &p, EINVAL);
	p.with_flags = 0;

	p.len = build_write(64, 1, 0);
	p.wqe = (void *)16;
	refused("unreadable_wqe", &p, EFAULT);
	p.wqe = slot();

	p.handle = 4242;
	refused("unknown_handle", &p, ENOENT);
	p.handle = qp->handle;

	/* The QP of another context: that context's file knows no such QP. */
	other = open_device(ibv_get_device_name(ctx->device));
	p.fd = other->cmd_fd;
	refused("other_context_qp", &p, ENOENT);
	ibv_close_device(other);
	p.fd = ctx->cmd_fd;

	reset_qp = create_qp();
	p.handle = reset_qp->handle;
	refused("qp_in_reset", &p, EINVAL);
	ibv_destroy_qp(reset_qp);
	refused("destroyed_qp", &p, ENOENT);
	p.handle = qp->handle;

	/* A command file that was closed. */
	p.fd = dup(ctx->cmd_fd);
	close(p.fd);
	refused("closed_file", &p, EBADF);
}

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

static uint16_t random_attr_id(void)
{
	static const uint16_t ids[] = {
		MLX4_BF_IB_ATTR_QP_POST_HANDLE, MLX4_BF_IB_ATTR_QP_POST_WQE,
		MLX4_BF_IB_ATTR_QP_POST_FLAGS, MLX4_BF_IB_ATTR_QP_POST_RESULT,
	};

	return below(8) ? ids[below(4)] : (uint16_t)rnd();
}

static void new_qp(void)
{
	struct mlx4dv_obj obj = { .qp = { .out = &dv } };

	if (qp)
		ibv_destroy_qp(qp);
	qp = create_qp();
	connect_to_self(qp);
	obj.qp.in = qp;
	if (mlx4dv_init_obj(&obj, MLX4DV_OBJ_QP))
		die("mlx4dv_init_obj", errno);
	head = 0;
}

/* One random call; returns the errno. */
static int fuzz_call(void *unmapped)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[6];
	} cmd;
	/* Room for what a random result pointer near it makes the kernel write. */
	static uint8_t r[256];
	uint32_t i, n, len = build_write(1 + below(MAX_INLINE), below(4), src_mr->lkey);
	uint8_t *w = slot();

	for (i = below(4); i; i--)
		w[below(len)] ^= 1 << below(8);
	memset(&cmd, 0, sizeof(cmd));
	n = below(4) ? 2 + below(3) : below(7);
	for (i = 0; i < n; i++) {
		struct ib_uverbs_attr *a = &cmd.attrs[i];

		a->attr_id = i < 2 && below(8) ? (i ? MLX4_BF_IB_ATTR_QP_POST_WQE :
					      MLX4_BF_IB_ATTR_QP_POST_HANDLE) :
						 random_attr_id();
		switch (a->attr_id) {
		case MLX4_BF_IB_ATTR_QP_POST_HANDLE:
			a->len = below(8) ? 0 : below(16);
			a->data = below(8) ? qp->handle : rnd() & 0xff;
			break;
		case MLX4_BF_IB_ATTR_QP_POST_WQE:
			a->len = below(8) ? len : below(1100);
			a->data = below(8) ? (uintptr_t)w : random_pointer(w, unmapped);
			break;
		case MLX4_BF_IB_ATTR_QP_POST_FLAGS:
			a->len = below(4) ? 4 : below(16);
			a->data = below(4) ? below(4) : rnd();
			break;
		default:
			a->len = below(4) ? sizeof(struct mlx4_bf_post_result) : below(64);
			a->data = below(4) ? (uintptr_t)r : random_pointer(r, unmapped);
			break;
		}
		if (!below(16))
			a->flags = rnd();
	}
	cmd.hdr.num_attrs = n;
	cmd.hdr.length = sizeof(cmd.hdr) + n * sizeof(cmd.attrs[0]);
	if (!below(32))
		cmd.hdr.length = below(sizeof(cmd));
	cmd.hdr.object_id = below(16) ? UVERBS_OBJECT_QP : below(32);
	cmd.hdr.method_id = below(16) ? MLX4_BF_IB_METHOD_QP_POST : (uint16_t)rnd();
	cmd.hdr.driver_id = below(16) ? RDMA_DRIVER_MLX4 : below(32);
	return ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &cmd) ? errno : 0;
}

static void fuzz(unsigned long calls, uint64_t seed)
{
	void *unmapped = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned long i, posted = 0;
	struct ibv_wc wc[16];

	printf("# seed %llu, %lu calls\n", (unsigned long long)seed, calls);
	rng_state = seed | 1;
	for (i = 0; i < calls; i++) {
		if (!fuzz_call(unmapped)) {
			posted++;
			head++;
		}
		while (ibv_poll_cq(cq, 16, wc) > 0)
			;
		/* A posted mutation may have put the QP in error. */
		if (!below(256))
			new_qp();
	}
	printf("# %lu calls posted\n", posted);
	result(1, "fuzz_survived");
	new_qp();
	good_write(64, 1, MLX4_BF_PATH_BLUEFLAME);
}

static void setup(const char *dev)
{
	ctx = open_device(dev);
	pd = ibv_alloc_pd(ctx);
	other_pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	src = aligned_alloc(4096, BUF_SIZE);
	dst = aligned_alloc(4096, BUF_SIZE);
	if (!pd || !other_pd || !cq || !src || !dst)
		die("resources", errno);
	mr = ibv_reg_mr(pd, dst, BUF_SIZE,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	src_mr = ibv_reg_mr(pd, src, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	other_mr = ibv_reg_mr(other_pd, src, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!mr || !src_mr || !other_mr)
		die("ibv_reg_mr", errno);
	new_qp();
}

int main(int argc, char **argv)
{
	const char *dev = "mlx4_bf0", *wait_file = NULL;
	unsigned long fuzz_calls = 0;
	uint64_t seed = time(NULL);
	int opt;

	while ((opt = getopt(argc, argv, "d:w:f:s:")) != -1) {
		switch (opt) {
		case 'd':
			dev = optarg;
			break;
		case 'w':
			wait_file = optarg;
			break;
		case 'f':
			fuzz_calls = strtoul(optarg, NULL, 0);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, "usage: %s [-d DEV] [-w FILE | -f CALLS [-s SEED]]\n",
				argv[0]);
			return 2;
		}
	}
	setup(dev);
	if (fuzz_calls) {
		fuzz(fuzz_calls, seed);
		return failures != 0;
	}
	if (wait_file) {
		struct post p = { .fd = ctx->cmd_fd, .handle = qp->handle };

		printf("# ready\n");
		fflush(stdout);
		while (access(wait_file, F_OK))
			usleep(100000);
		p.len = build_write(64, 1, 0);
		p.wqe = slot();
		refused("after_unbind", &p, EIO);
		return failures != 0;
	}
	good_write(4, 1, MLX4_BF_PATH_BLUEFLAME);
	good_write(64, 1, MLX4_BF_PATH_BLUEFLAME);
	good_write(128, 1, MLX4_BF_PATH_BLUEFLAME);
	good_write(MAX_INLINE, 1, MLX4_BF_PATH_BLUEFLAME);
	good_write(400, 1, MLX4_BF_PATH_DOORBELL);
	good_write(1024, 0, MLX4_BF_PATH_DOORBELL);
	refusals();
	/* Still posting after every refusal. */
	good_write(64, 1, MLX4_BF_PATH_BLUEFLAME);
	printf("# %d of %d failed\n", failures, results);
	return failures != 0;
}
