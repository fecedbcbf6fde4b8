/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the guest's verbs programs (tools/vm/upstream/ibv_post_cost.c,
 * tools/vm/provider/ibv_hold.c, ibv_refusals.c and ibv_fault_walk) share:
 * the device opened by name, the port's LID, an RC QP connected to itself.
 *
 * On a failure these call die(), which each program defines: it prints the
 * program's own line (its name, WHAT, strerror(ERR); KTAP programs a
 * "not ok" too) and exits.
 */
#ifndef VERBS_UTIL_H
#define VERBS_UTIL_H

#include <infiniband/verbs.h>
#include <stdint.h>

void die(const char *what, int err);

/* The device NAME (ibv_get_device_name()), opened. */
struct ibv_context *open_device(const char *name);
/* Port 1's LID. */
uint16_t port_lid(struct ibv_context *ctx);
/*
 * The attributes and mask that move QP from INIT to RTR with itself, by
 * LID, as the destination (1 KiB MTU): connect_to_self()'s, for a caller
 * that adds to them.
 */
void self_rtr_attr(struct ibv_qp *qp, uint16_t lid, struct ibv_qp_attr *a);
#define SELF_RTR_MASK	(IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | \
			 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | \
			 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
/*
 * RESET -> INIT (remote write allowed) -> RTR -> RTS, the destination
 * being the QP itself on port 1 by LID.
 */
void connect_to_self(struct ibv_qp *qp, uint16_t lid);

#endif
