/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibv_qp_post's common part (qp_post.c): a verbs context on our RDMA
 * device, a QP connected to itself, WQEs built in its send queue as
 * libmlx4 builds them, and the QP_POST method called on them; ibv_qp_post.c
 * checks the method's paths and refusals, qp_post_fuzz.c fuzzes it. The
 * device and the connection are tools/vm/upstream/verbs_util.c's.
 */
#ifndef QP_POST_H
#define QP_POST_H

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
#include "../upstream/verbs_util.h"

#define BUF_SIZE 4096
#define MAX_INLINE 208
#define POLL_TRIES 2000000
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

extern struct ibv_context *ctx;
extern struct ibv_pd *pd, *other_pd;
extern struct ibv_cq *cq;
extern struct ibv_mr *mr, *src_mr, *other_mr;
extern struct ibv_qp *qp;
extern struct mlx4dv_qp dv;
extern uint32_t head;
extern uint64_t bf_log[16];
extern unsigned int bf_posts;
extern uint8_t *src, *dst;
extern int results, failures;

/* The method's call; returns 0 or the errno. */
struct post {
	int fd;
	const void *wqe;
	uint32_t len;
	int with_flags;
	uint32_t flags;
	struct mlx4_bf_post_result *result;
};

void result(int ok, const char *name);
struct ibv_qp *create_qp(void);
int qp_post(const struct post *p);
uint8_t *slot(void);
void put32(uint8_t *at, uint32_t v);
uint32_t build_write(uint32_t len, int inline_data, uint32_t lkey);
uint32_t build_write_on(struct ibv_qp *on, uint32_t len, void **wqe);
int await_completion(void);
int nothing_posted(void);
void fill(uint32_t len, uint8_t seed);
void good_write(uint32_t len, int inline_data, uint32_t want_path);
void refused(const char *name, const struct post *p, int want);
void new_qp(void);
void setup(const char *dev);
void fuzz(unsigned long calls, uint64_t seed);

#endif
