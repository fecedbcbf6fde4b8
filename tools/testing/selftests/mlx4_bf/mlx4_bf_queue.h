/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Connected QPs for the mlx4_bf selftests: an endpoint is a context with one
 * QP whose receive CQ, doorbell record and receive buffers are mapped, as a
 * verbs user would set them up.
 */
#ifndef MLX4_BF_QUEUE_H
#define MLX4_BF_QUEUE_H

#include <poll.h>
#include <sched.h>
#include <time.h>

#include "mlx4_bf_lib.h"

struct endpoint {
	int fd;
	struct mlx4_bf_qp_info qp;
	const uint8_t *cq;
	uint8_t *db;
	const uint8_t *bufs;
	uint32_t ci;		/* CQEs consumed */
};

static inline int post_recv(int fd, __u32 handle, __u32 count)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_POST_RECV);
	call_inline_u32(&c, MLX4_BF_ATTR_QP_HANDLE, handle);
	if (count)
		call_inline_u32(&c, MLX4_BF_ATTR_RECV_COUNT, count);
	return call_do(fd, &c);
}

static inline int connect_qp(int fd, __u32 handle, __u32 remote)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_CONNECT_QP);
	call_inline_u32(&c, MLX4_BF_ATTR_QP_HANDLE, handle);
	call_inline_u32(&c, MLX4_BF_ATTR_REMOTE_QPN, remote);
	return call_do(fd, &c);
}

static inline int arm_cq(int fd, __u32 handle, __u32 flags)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_ARM_CQ);
	call_inline_u32(&c, MLX4_BF_ATTR_QP_HANDLE, handle);
	if (flags)
		call_inline_u32(&c, MLX4_BF_ATTR_ARM_FLAGS, flags);
	return call_do(fd, &c);
}

/*
 * POST_SEND of a WQE without payload (ctrl only, built here: SEND) and
 * @len bytes of @msg that the kernel copies into its send buffer.
 */
static inline int post_send_payload(int fd, __u32 handle, const void *msg, __u16 len,
				    __u32 flags)
{
	uint8_t ctrl[16] = { 0 };
	struct call c;

	put_be32(ctrl, OP_SEND);
	put_be32(ctrl + 4, 1);
	post_call(&c, handle, ctrl, sizeof(ctrl), flags, NULL);
	call_attr(&c, MLX4_BF_ATTR_PAYLOAD, len, (uintptr_t)msg);
	return call_retry(fd, &c);
}

/* Opens a context with one QP and maps its receive side; 0 or -errno. */
static inline int ep_open(struct endpoint *e)
{
	struct mlx4_bf_qp_info *q = &e->qp;
	void *p;
	int ret;

	memset(e, 0, sizeof(*e));
	e->fd = open(DEV_PATH, O_RDWR);
	if (e->fd < 0)
		return -errno;
	ret = create_qp(e->fd, q);
	if (ret)
		return ret;
	p = mmap(NULL, q->cq_entries * q->cqe_size, PROT_READ, MAP_SHARED, e->fd, q->cq_offset);
	if (p == MAP_FAILED)
		return -errno;
	e->cq = p;
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, e->fd, q->cq_db_offset);
	if (p == MAP_FAILED)
		return -errno;
	e->db = p;
	p = mmap(NULL, q->rq_entries * q->recv_buf_size, PROT_READ, MAP_SHARED, e->fd,
		 q->recv_offset);
	if (p == MAP_FAILED)
		return -errno;
	e->bufs = p;
	return 0;
}

static inline void ep_close(struct endpoint *e)
{
	if (e->bufs)
		munmap((void *)e->bufs, e->qp.rq_entries * e->qp.recv_buf_size);
	if (e->db)
		munmap(e->db, 4096);
	if (e->cq)
		munmap((void *)e->cq, e->qp.cq_entries * e->qp.cqe_size);
	if (e->fd >= 0)
		close(e->fd);
	e->fd = -1;
	e->bufs = NULL;
	e->db = NULL;
	e->cq = NULL;
}

/* Connects two endpoints to each other and gives each @recvs receives. */
static inline int ep_pair(struct endpoint *a, struct endpoint *b, __u32 recvs)
{
	int ret = connect_qp(a->fd, a->qp.qp_handle, b->qp.qpn);

	if (!ret)
		ret = connect_qp(b->fd, b->qp.qp_handle, a->qp.qpn);
	if (!ret && recvs)
		ret = post_recv(a->fd, a->qp.qp_handle, recvs);
	if (!ret && recvs)
		ret = post_recv(b->fd, b->qp.qp_handle, recvs);
	return ret;
}

/*
 * The CQE at the consumer index if the device has written it, else NULL: the
 * last sizeof(struct mlx4_bf_cqe) bytes of its entry.
 */
static inline const struct mlx4_bf_cqe *ep_peek(struct endpoint *e)
{
	const struct mlx4_bf_cqe *cqe = (const void *)(e->cq +
		(e->ci % e->qp.cq_entries + 1) * e->qp.cqe_size - sizeof(*cqe));
	uint8_t op_own = __atomic_load_n(&cqe->owner_sr_opcode, __ATOMIC_ACQUIRE);

	if (!!(op_own & MLX4_BF_CQE_OWNER) != !!(e->ci & e->qp.cq_entries))
		return NULL;
	return cqe;
}

/* Publishes the consumer index past the CQE just read (set_ci). */
static inline void ep_consume(struct endpoint *e)
{
	uint32_t v = htonl(++e->ci & 0xffffff);

	__atomic_store_n((uint32_t *)e->db, v, __ATOMIC_RELEASE);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Waits up to 2 s for the @len bytes at @dst to read @want; 0 once they do. */
static inline int wait_landed(const uint8_t *dst, const uint8_t *want, size_t len)
{
	uint64_t end = now_ns() + 2000000000ull;

	while (memcmp(dst, want, len)) {
		if (now_ns() > end)
			return -1;
		sched_yield();
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	}
	return 0;
}

/* Spins up to @ms for the next CQE; NULL on timeout. */
static inline const struct mlx4_bf_cqe *ep_wait(struct endpoint *e, int ms)
{
	uint64_t end = now_ns() + ms * 1000000ull;
	const struct mlx4_bf_cqe *cqe;

	while (!(cqe = ep_peek(e))) {
		if (now_ns() > end)
			return NULL;
		sched_yield();
	}
	return cqe;
}

static inline uint8_t cqe_opcode(const struct mlx4_bf_cqe *cqe)
{
	return cqe->owner_sr_opcode & MLX4_BF_CQE_OPCODE_MASK;
}

/* The receive buffer a receive CQE names (its RQ index). */
static inline const uint8_t *cqe_buffer(const struct endpoint *e,
					const struct mlx4_bf_cqe *cqe)
{
	uint16_t index = ntohs(cqe->wqe_index);

	return e->bufs + (index % e->qp.rq_entries) * e->qp.recv_buf_size;
}

#endif /* MLX4_BF_QUEUE_H */
