// SPDX-License-Identifier: GPL-2.0
/*
 * ibv_qp_post's common part: see qp_post.h.
 */
#include "qp_post.h"

struct ibv_context *ctx;
struct ibv_pd *pd, *other_pd;
struct ibv_cq *cq;
/* mr: the target (dst), src_mr: what gathered writes read (src) */
struct ibv_mr *mr, *src_mr, *other_mr;
struct ibv_qp *qp;
struct mlx4dv_qp dv;
uint32_t head;
/* The BAR2 offsets of the good path's BlueFlame posts, in order. */
uint64_t bf_log[16];
unsigned int bf_posts;
uint8_t *src, *dst;
int results, failures;

void die(const char *what, int err)
{
	printf("# ibv_qp_post: %s: %s\n", what, strerror(err));
	printf("not ok %d setup\n", ++results);
	exit(1);
}

void result(int ok, const char *name)
{
	printf("%s %d %s\n", ok ? "ok" : "not ok", ++results, name);
	failures += !ok;
}

struct ibv_qp *create_qp(void)
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

int qp_post(const struct post *p)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[3];
	} cmd;
	struct ib_uverbs_attr *a = cmd.attrs;

	memset(&cmd, 0, sizeof(cmd));
	/* No handle: the WQE names its QP (bf_qpn). */
	a->attr_id = MLX4_BF_IB_ATTR_QP_POST_WQE;
	a->len = p->len;
	a->data = (uintptr_t)p->wqe;
	a++;
	if (p->with_flags) {
		a->attr_id = MLX4_BF_IB_ATTR_QP_POST_FLAGS;
		/*
		 * 8 bytes, as uverbs_get_flags32() wants from new user space:
		 * a 4-byte value is read from the first 4 bytes of data, which
		 * on a big-endian host is not where data = flags puts it.
		 */
		a->len = sizeof(uint64_t);
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
	cmd.hdr.object_id = UVERBS_OBJECT_DEVICE;
	cmd.hdr.method_id = MLX4_BF_IB_METHOD_QP_POST;
	cmd.hdr.driver_id = RDMA_DRIVER_MLX4;
	return ioctl(p->fd, RDMA_VERBS_IOCTL, &cmd) ? errno : 0;
}

/* The next send-queue slot. */
uint8_t *slot(void)
{
	return (uint8_t *)dv.buf.buf + dv.sq.offset +
	       ((head & (dv.sq.wqe_cnt - 1)) << dv.sq.wqe_shift);
}

void put32(uint8_t *at, uint32_t v)
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
uint32_t build_write(uint32_t len, int inline_data, uint32_t lkey)
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

/*
 * An inline RDMA write of LEN bytes (at most 28: one segment within 64
 * bytes of the queue) built in the first slot of the send queue of ON,
 * another QP (its queue from mlx4dv): its number stamped, counter 0; its
 * WQE in *WQE; returns its length.
 */
uint32_t build_write_on(struct ibv_qp *on, uint32_t len, void **wqe)
{
	struct mlx4dv_qp odv;
	struct mlx4dv_obj obj = { .qp = { .in = on, .out = &odv } };
	uint8_t *w;
	uint32_t size;

	if (mlx4dv_init_obj(&obj, MLX4DV_OBJ_QP))
		die("mlx4dv_init_obj", errno);
	w = (uint8_t *)odv.buf.buf + odv.sq.offset;
	memset(w, 0, 1 << odv.sq.wqe_shift);
	*(uint64_t *)(w + 16) = htobe64((uintptr_t)dst);
	put32(w + 24, mr->rkey);
	put32(w + 32, 1u << 31 | len);
	memcpy(w + 36, src, len);
	size = 2 + (len + 4 + 15) / 16;
	put32(w + 8, 3 << 2); /* srcrb_flags: CQ_UPDATE */
	put32(w + 4, be32toh(odv.doorbell_qpn) | size);
	put32(w, 0x08);
	*wqe = w;
	return size * 16;
}

/* One completion within POLL_TRIES polls: 0, or -1 and a "#" line. */
int await_completion(void)
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
int nothing_posted(void)
{
	struct ibv_wc wc;
	int i;

	for (i = 0; i < 1000; i++)
		if (ibv_poll_cq(cq, 1, &wc) != 0)
			return -1;
	return 0;
}

void fill(uint32_t len, uint8_t seed)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		src[i] = (uint8_t)(seed + i * 7);
	memset(dst, 0, BUF_SIZE);
}

/* An RDMA write posted through the method and its outcome. */
void good_write(uint32_t len, int inline_data, uint32_t want_path)
{
	struct mlx4_bf_post_result r = { 0 };
	struct post p = { .fd = ctx->cmd_fd };
	char name[64];
	int err, ok;

	fill(len, (uint8_t)len);
	p.len = build_write(len, inline_data, src_mr->lkey);
	p.wqe = slot();
	p.result = &r;
	err = qp_post(&p);
	ok = !err && r.path == want_path && !await_completion() &&
	     !memcmp(src, dst, len);
	if (!err)
		head++;
	printf("# %u bytes %s: errno %d, path %u, wqe_index %u, bf_offset %#llx, %u bytes written, %u store blocks\n",
	       len, inline_data ? "inline" : "gathered", err, r.path,
	       r.wqe_index, (unsigned long long)r.bf_offset,
	       r.bytes_written, r.store_blocks);
	ok = ok && r.wqe_index == ((head - 1) & 0xffff);
	if (want_path == MLX4_BF_PATH_BLUEFLAME) {
		ok = ok && r.bytes_written == (p.len + 63) / 64 * 64;
		if (!err && bf_posts < ARRAY_SIZE(bf_log))
			bf_log[bf_posts++] = r.bf_offset;
	}
	snprintf(name, sizeof(name), "%s_%u_%s",
		 want_path == MLX4_BF_PATH_BLUEFLAME ? "blueflame" : "doorbell",
		 len, inline_data ? "inline" : "gathered");
	result(ok, name);
}

/* A call that must fail with WANT and post nothing. */
void refused(const char *name, const struct post *p, int want)
{
	int err = qp_post(p);
	int ok = err == want && !nothing_posted();

	printf("# %s: errno %d (%s); want %d (%s)\n", name, err,
	       strerror(err), want, strerror(want));
	result(ok, name);
}

void new_qp(void)
{
	struct mlx4dv_obj obj = { .qp = { .out = &dv } };

	if (qp)
		ibv_destroy_qp(qp);
	qp = create_qp();
	connect_to_self(qp, port_lid(ctx));
	obj.qp.in = qp;
	if (mlx4dv_init_obj(&obj, MLX4DV_OBJ_QP))
		die("mlx4dv_init_obj", errno);
	head = 0;
}

void setup(const char *dev)
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
