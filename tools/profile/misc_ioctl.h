/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The misc device's ioctl (/dev/mlx4_bf<N>, MLX4_BF_IOCTL) as the profiler
 * makes its calls: moved here from the selftests' mlx4_bf_lib.h when the
 * selftests left the misc device (issue 45). It goes with the misc device.
 */
#ifndef MISC_IOCTL_H
#define MISC_IOCTL_H

#include <sys/ioctl.h>

#include <mlx4_bf.h>

#include "mlx4_bf_lib.h"

#define DEV_PATH	"/dev/mlx4_bf0"

struct call {
	struct mlx4_bf_ioctl_hdr hdr;
	struct mlx4_bf_attr attrs[MLX4_BF_MAX_ATTRS];
};

static inline void call_init(struct call *c, __u16 object, __u16 method)
{
	memset(c, 0, sizeof(*c));
	c->hdr.object_id = object;
	c->hdr.method_id = method;
	c->hdr.length = sizeof(c->hdr);
}

static inline struct mlx4_bf_attr *call_attr(struct call *c, __u16 id, __u16 len, __u64 data)
{
	struct mlx4_bf_attr *a = &c->attrs[c->hdr.num_attrs++];

	a->attr_id = id;
	a->len = len;
	a->data = data;
	c->hdr.length += sizeof(*a);
	return a;
}

static inline void call_inline_u32(struct call *c, __u16 id, __u32 v)
{
	struct mlx4_bf_attr *a = call_attr(c, id, 4, 0);

	memcpy(&a->data, &v, 4);
}

static inline void call_inline_u64(struct call *c, __u16 id, __u64 v)
{
	call_attr(c, id, 8, v);
}

/* Returns 0 or -errno. */
static inline int call_do(int fd, struct call *c)
{
	return ioctl(fd, MLX4_BF_IOCTL, c) ? -errno : 0;
}

static inline int create_qp(int fd, struct mlx4_bf_qp_info *qp)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_CREATE_QP);
	call_attr(&c, MLX4_BF_ATTR_QP_INFO, sizeof(*qp), (uintptr_t)qp);
	return call_do(fd, &c);
}

static inline void post_call(struct call *c, __u32 handle, const void *wqe, __u16 len,
			     __u32 flags, struct mlx4_bf_post_result *res)
{
	call_init(c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_POST_SEND);
	call_inline_u32(c, MLX4_BF_ATTR_QP_HANDLE, handle);
	call_attr(c, MLX4_BF_ATTR_WQE, len, (uintptr_t)wqe);
	if (flags)
		call_inline_u32(c, MLX4_BF_ATTR_POST_FLAGS, flags);
	if (res)
		call_attr(c, MLX4_BF_ATTR_POST_RESULT, sizeof(*res), (uintptr_t)res);
}

/*
 * REG_MR of the user virtual range [@addr, @addr + @len) with @access (enum
 * mlx4_bf_access_flags; 0 leaves the attribute out); 0 or -errno.
 */
static inline int reg_mr(int fd, __u64 addr, __u64 len, __u32 access,
			 struct mlx4_bf_mr_info *mr)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_MR, MLX4_BF_METHOD_REG_MR);
	call_inline_u64(&c, MLX4_BF_ATTR_MR_ADDR, addr);
	call_inline_u64(&c, MLX4_BF_ATTR_MR_LENGTH, len);
	if (access)
		call_inline_u32(&c, MLX4_BF_ATTR_MR_ACCESS, access);
	call_attr(&c, MLX4_BF_ATTR_MR_INFO, sizeof(*mr), (uintptr_t)mr);
	return call_do(fd, &c);
}

/* Read and write access for the adapter, and for the connected peer. */
#define ACCESS_RDMA	(MLX4_BF_ACCESS_LOCAL_WRITE | MLX4_BF_ACCESS_REMOTE_WRITE)

/*
 * Where a QP's RDMA writes land: a page of this process registered
 * remote-writable in the context @fd. A new QP is connected to itself, so its
 * RDMA writes must name an MR of its own context that way: anything else is
 * refused with -EACCES. The page is mapped on first use and kept, so one
 * sink serves one context after another. 0 or -errno.
 */
struct sink {
	uint8_t *buf;
	struct mlx4_bf_mr_info mr;
};

static inline int sink_open(int fd, struct sink *s)
{
	if (!s->buf) {
		void *p = mmap(NULL, SINK_BYTES, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return -errno;
		s->buf = p;
	}
	return reg_mr(fd, (uintptr_t)s->buf, SINK_BYTES, ACCESS_RDMA, &s->mr);
}

static inline __u64 sink_addr(const struct sink *s)
{
	return (uintptr_t)s->buf;
}

#endif /* MISC_IOCTL_H */
