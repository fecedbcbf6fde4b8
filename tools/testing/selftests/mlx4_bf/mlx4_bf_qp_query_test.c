// SPDX-License-Identifier: GPL-2.0
/*
 * ibv_query_qp() on the RDMA device (mlx4_bf<N>), answered as mainline
 * mlx4_ib answers it (mlx4_ib_query_qp()): a QP in RESET says RESET
 * without a command; in any other state the adapter's QP context, read
 * with QUERY_QP, decoded as mainline decodes it. Through unmodified
 * libibverbs and libmlx4 (which fills in the send queue's capabilities
 * itself), proves:
 * - RESET: the state, the receive queue as made, every send signalled as
 *   created, and no command reached the adapter;
 * - each transition ibv_rc_pingpong makes reads back what it set, one
 *   QUERY_QP each: INIT (port, P_Key index, remote write), RTR (path MTU,
 *   peer QPN, receive PSN, responder resources, RNR timer, the peer's LID
 *   on port 1), RTS (send PSN, ACK timeout, retry counts, initiator
 *   depth);
 * - a QP the adapter moved to ERR (its RDMA write named a key that does
 *   not exist: a remote access error) reads ERR without a modify; reset,
 *   it reads RESET again without a command;
 * - a query of every attribute writes no byte the provider did not set:
 *   the attributes it does not report are 0, whatever the buffers held.
 * The command counts need the model's diagnostic block; without it (real
 * hardware) the tests SKIP.
 */
#include "kselftest_harness.h"
#include "mlx4_bf_model.h"
#include "mlx4_bf_verbs.h"

/* Every attribute ibv_query_qp() can be asked for. */
#define ALL_ATTRS	(IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY | \
			 IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT | \
			 IBV_QP_QKEY | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT | \
			 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_RQ_PSN | \
			 IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_ALT_PATH | \
			 IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN | \
			 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_PATH_MIG_STATE | \
			 IBV_QP_CAP | IBV_QP_DEST_QPN)
/* The receives the QP is created with. */
#define RECV_WRS	8
/* What a transition does not set, where the query buffers start. */
#define POISON		0xa5

FIXTURE(query)
{
	struct verbs v;
	struct model model;
	int have_model;
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
};

/* Its helpers spell FIXTURE_DATA(query) as struct _test_data_query: checkpatch sees a type. */

FIXTURE_SETUP(query)
{
	self->have_model = 0;
	self->v.ctx = NULL;
	if (!verbs_device_present())
		SKIP(return, NO_VERBS_DEVICE);
	if (model_open(&self->model))
		SKIP(return, NO_ANALYZER);
	self->have_model = 1;
	ASSERT_EQ(0, verbs_open_unconnected(&self->v, RECV_WRS, 0));
}

FIXTURE_TEARDOWN(query)
{
	if (self->v.ctx)
		verbs_close(&self->v);
	if (self->have_model)
		model_close(&self->model);
}

/* ibv_query_qp() of every attribute into poisoned buffers; its result. */
static int query_all(struct _test_data_query *self)
{
	memset(&self->attr, POISON, sizeof(self->attr));
	memset(&self->init, POISON, sizeof(self->init));
	return ibv_query_qp(self->v.qp, &self->attr, ALL_ATTRS, &self->init);
}

/* The commands the adapter took while one query ran, which must succeed. */
static uint64_t commands_of_a_query(struct __test_metadata *_metadata,
				    struct _test_data_query *self)
{
	uint64_t before = model_read(&self->model, MODEL_COMMANDS);

	EXPECT_EQ(0, query_all(self));
	return model_read(&self->model, MODEL_COMMANDS) - before;
}

TEST_F(query, reset_is_answered_without_a_command)
{
	EXPECT_EQ(0, commands_of_a_query(_metadata, self));
	EXPECT_EQ(IBV_QPS_RESET, self->attr.qp_state);
	EXPECT_EQ(IBV_QPS_RESET, self->attr.cur_qp_state);
	EXPECT_LE(RECV_WRS, self->attr.cap.max_recv_wr);
	EXPECT_EQ(1, self->attr.cap.max_recv_sge);
	EXPECT_EQ(self->attr.cap.max_recv_wr, self->init.cap.max_recv_wr);
	/* verbs_rc_qp_rq() asks a completion for the sends that ask one */
	EXPECT_EQ(0, self->init.sq_sig_all);
	/* nothing set yet: zeros, not the buffers' bytes */
	EXPECT_EQ(0, self->attr.dest_qp_num);
	EXPECT_EQ(0, self->attr.ah_attr.dlid);
	EXPECT_EQ(0, self->attr.timeout);
}

TEST_F(query, every_transition_reads_back_what_it_set)
{
	struct ibv_port_attr port;
	uint32_t qpn = self->v.qp->qp_num;

	ASSERT_EQ(0, ibv_query_port(self->v.ctx, 1, &port));
	ASSERT_EQ(0, verbs_to_init(self->v.qp, IBV_ACCESS_REMOTE_WRITE));
	EXPECT_EQ(1, commands_of_a_query(_metadata, self)) TH_LOG("one QUERY_QP");
	EXPECT_EQ(IBV_QPS_INIT, self->attr.qp_state);
	EXPECT_EQ(1, self->attr.port_num);
	EXPECT_EQ(0, self->attr.pkey_index);
	EXPECT_EQ(IBV_ACCESS_REMOTE_WRITE, self->attr.qp_access_flags);
	EXPECT_EQ(IBV_MIG_MIGRATED, self->attr.path_mig_state);

	/* verbs_to_rtr()'s: MTU 1024, the peer itself behind this port's LID */
	ASSERT_EQ(0, verbs_to_rtr(self->v.qp, qpn));
	EXPECT_EQ(1, commands_of_a_query(_metadata, self));
	EXPECT_EQ(IBV_QPS_RTR, self->attr.qp_state);
	EXPECT_EQ(IBV_MTU_1024, self->attr.path_mtu);
	EXPECT_EQ(qpn, self->attr.dest_qp_num);
	EXPECT_EQ(0, self->attr.rq_psn);
	EXPECT_EQ(1, self->attr.max_dest_rd_atomic);
	EXPECT_EQ(12, self->attr.min_rnr_timer);
	EXPECT_EQ(port.lid, self->attr.ah_attr.dlid);
	EXPECT_EQ(1, self->attr.ah_attr.port_num);
	EXPECT_EQ(0, self->attr.ah_attr.is_global);
	EXPECT_EQ(1, self->attr.port_num);

	/* verbs_to_rts()'s: timeout 14, retries 7 and 7, one read in flight */
	ASSERT_EQ(0, verbs_to_rts(self->v.qp));
	EXPECT_EQ(1, commands_of_a_query(_metadata, self));
	EXPECT_EQ(IBV_QPS_RTS, self->attr.qp_state);
	EXPECT_EQ(IBV_QPS_RTS, self->attr.cur_qp_state);
	EXPECT_EQ(0, self->attr.sq_psn);
	EXPECT_EQ(14, self->attr.timeout);
	EXPECT_EQ(7, self->attr.retry_cnt);
	EXPECT_EQ(7, self->attr.rnr_retry);
	EXPECT_EQ(1, self->attr.max_rd_atomic);
	/* what RTR set is still there */
	EXPECT_EQ(qpn, self->attr.dest_qp_num);
	EXPECT_EQ(port.lid, self->attr.ah_attr.dlid);
	/*
	 * never set: zeros, not the buffers' bytes (libibverbs copies every
	 * field of the kernel's answer but en_sqd_async_notify)
	 */
	EXPECT_EQ(0, self->attr.sq_draining);
	EXPECT_EQ(0, self->attr.qkey);
	EXPECT_EQ(0, self->attr.alt_ah_attr.dlid);
}

TEST_F(query, a_qp_the_adapter_moved_to_err_reads_err)
{
	uint64_t faults = model_read(&self->model, MODEL_REMOTE_ACCESS_FAULTS);
	struct ibv_sge sge = { .addr = (uintptr_t)self->v.sink, .length = 16,
			       .lkey = self->v.sink_mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = verbs_sink_addr(&self->v),
			     /* a key no region has */
			     .rkey = self->v.sink_mr->rkey ^ 0x80 },
	}, *bad;
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };

	ASSERT_EQ(0, verbs_connect_to_self(self->v.qp));
	ASSERT_EQ(0, ibv_post_send(self->v.qp, &wr, &bad));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, verbs_wait_cqe(self->v.cq));
	for (faults = model_read(&self->model, MODEL_REMOTE_ACCESS_FAULTS) - faults; faults; faults--)
		declare_fault("remote");
	EXPECT_EQ(1, commands_of_a_query(_metadata, self));
	EXPECT_EQ(IBV_QPS_ERR, self->attr.qp_state);
	EXPECT_EQ(0, ibv_modify_qp(self->v.qp, &reset, IBV_QP_STATE));
	EXPECT_EQ(0, commands_of_a_query(_metadata, self));
	EXPECT_EQ(IBV_QPS_RESET, self->attr.qp_state);
}

TEST_HARNESS_MAIN
