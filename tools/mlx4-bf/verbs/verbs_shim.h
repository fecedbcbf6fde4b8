/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The helper's verbs calls, flat (tools/mlx4-bf/src/verbs.rs): each takes
 * and returns libibverbs' own objects as opaque pointers and plain values,
 * so that no layout of libibverbs' structures (ibv_qp_attr, ibv_wc, ...)
 * is written twice, and the static inlines (ibv_poll_cq(), ibv_post_send(),
 * ibv_query_port()) are called where they are defined. 0 or an errno.
 */
#ifndef VERBS_SHIM_H
#define VERBS_SHIM_H

#include <stddef.h>
#include <stdint.h>

struct ibv_context;
struct ibv_pd;
struct ibv_mr;
struct ibv_cq;
struct ibv_qp;

struct hv_facts {
	char fw_ver[64];
	uint64_t max_mr_size;
	uint32_t max_qp, max_qp_wr, max_cq, max_cqe, max_mr, max_pd;
	uint32_t vendor_part_id, hw_ver;
	uint16_t lid;
	uint8_t port_state, active_mtu;
};

/* The send queue of a QP (mlx4dv_qp), as libmlx4 lays it out. */
struct hv_sq {
	uint8_t *buf;		/* the QP's first send WQE */
	uint32_t wqe_cnt;	/* a power of 2 */
	uint32_t wqe_shift;	/* log2 of the stride */
	uint32_t qpn;
};

int hv_open(const char *name, struct ibv_context **ctx);
int hv_close(struct ibv_context *ctx);
int hv_cmd_fd(struct ibv_context *ctx);
int hv_facts(struct ibv_context *ctx, struct hv_facts *f);

int hv_alloc_pd(struct ibv_context *ctx, struct ibv_pd **pd);
int hv_dealloc_pd(struct ibv_pd *pd);
int hv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access,
	      struct ibv_mr **mr, uint32_t *lkey, uint32_t *rkey);
int hv_dereg_mr(struct ibv_mr *mr);

/*
 * A CQ; with `events`, on a completion channel of its own, whose file
 * (non-blocking) goes to *event_fd (else -1).
 */
int hv_create_cq(struct ibv_context *ctx, int cqe, int events,
		 struct ibv_cq **cq, int *event_fd);
/* The CQ, then its channel if it has one. */
int hv_destroy_cq(struct ibv_cq *cq);
/* Polls one completion: 1 (its status), 0 none, or -errno. */
/* One work completion (ibv_wc), the immediate in host order. */
struct hv_wc {
	uint64_t wr_id;
	uint32_t status, opcode, byte_len, imm, qp_num, src_qp, with_imm;
};

/* 1 and *wc, 0 if the CQ is empty, or -errno. */
int hv_poll_wc(struct ibv_cq *cq, struct hv_wc *wc);
/* An event at the CQ's next completion (ibv_req_notify_cq, any). */
int hv_req_notify(struct ibv_cq *cq);
/* The event its channel holds (the file was readable), acknowledged. */
int hv_take_event(struct ibv_cq *cq);

/* An RC QP on PD with CQ for sends and receives. */
int hv_create_rc_qp(struct ibv_pd *pd, struct ibv_cq *send_cq,
		    struct ibv_cq *recv_cq, uint32_t send_wr, uint32_t recv_wr,
		    uint32_t max_inline, struct ibv_qp **qp, struct hv_sq *sq);
/* RESET to RTS, connected to DEST_QPN at DLID on port 1. */
int hv_connect(struct ibv_qp *qp, uint32_t dest_qpn, uint16_t dlid);

/*
 * How the QP's BlueFlame WQEs go out (enum mlx4dv_qp_bf_post: 1 by the
 * process's own stores, 2 through the kernel's QP_POST).
 */
int hv_set_bf_post(struct ibv_qp *qp, int how);

/* A signaled RDMA write of one gather entry, inline if asked. */
struct hv_write {
	uint64_t laddr;
	uint64_t raddr;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t len;
	uint32_t inline_data;
};

/* ibv_post_send() of the write: libmlx4 builds and posts the WQE. */
int hv_post_write(struct ibv_qp *qp, const struct hv_write *w);

/* A receive WQE of one gather entry (none if len is 0), tagged wr_id. */
int hv_post_recv(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr,
		 uint32_t len, uint32_t lkey);
int hv_destroy_qp(struct ibv_qp *qp);

#endif
