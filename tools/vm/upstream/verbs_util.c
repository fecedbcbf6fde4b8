// SPDX-License-Identifier: GPL-2.0
/*
 * The guest's verbs programs' common part: see verbs_util.h.
 */
#include <errno.h>
#include <string.h>

#include "verbs_util.h"

struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	if (!list)
		die("ibv_get_device_list", errno);
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx)
		die(name, ENODEV);
	return ctx;
}

uint16_t port_lid(struct ibv_context *ctx)
{
	struct ibv_port_attr port;

	errno = ibv_query_port(ctx, 1, &port);
	if (errno)
		die("ibv_query_port", errno);
	return port.lid;
}

void self_rtr_attr(struct ibv_qp *qp, uint16_t lid, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = qp->qp_num;
	a->max_dest_rd_atomic = 1;
	a->min_rnr_timer = 12;
	a->ah_attr.dlid = lid;
	a->ah_attr.port_num = 1;
}

void connect_to_self(struct ibv_qp *qp, uint16_t lid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	int err;

	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		die("INIT", err);
	self_rtr_attr(qp, lid, &a);
	err = ibv_modify_qp(qp, &a, SELF_RTR_MASK);
	if (err)
		die("RTR", err);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			    IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (err)
		die("RTS", err);
}
