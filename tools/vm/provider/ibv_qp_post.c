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
 *  - the context's BlueFlame posts alternate between the two buffers of
 *    its register, as libmlx4's own do (bf_offset ^= bf_buf_size);
 *  - every refusal, and that nothing of a refused WQE was posted: a data
 *    segment naming a region of another PD, a WQE of 40 bytes, one of 1024,
 *    one naming no QP, one naming a number that is none of the context's,
 *    unknown and contradicting flags, REQUIRE_BF of a gathered WQE, a WQE
 *    the kernel cannot read, the QP of another context, a QP in RESET, a QP
 *    in RTR (then in RTS the same WQE posts: the state rule refused it), a
 *    destroyed QP, a closed command file.
 *
 * With -w FILE it sets up, prints "# ready", waits until FILE exists (the
 * suite unbinds the adapter meanwhile) and then expects the method to fail
 * with EIO: the device is gone.
 *
 * With -f CALLS it fuzzes the method instead: valid WQEs with flipped bits,
 * random attribute IDs, lengths, flags and pointers (NULL, kernel,
 * unmapped, odd), random QP numbers, the QP destroyed and made again now
 * and then; the seed (-s) is printed and replays the calls. The kernel must
 * survive (the suite reads its log) and a new QP must still post.
 *
 * Usage: ibv_qp_post [-d DEV] [-w FILE | -f CALLS [-s SEED]]
 * (exit status 0 if all ok)
 */
#include "qp_post.h"

/* The WQE in the next slot names QP number QPN instead of its own. */
static void name_qpn(uint8_t *w, uint32_t qpn, uint32_t len)
{
	put32(w + 4, qpn << 8 | len / 16);
}

/* A QP of this context, moved to RTR only, then to RTS. */
static void state_rule(struct post *p)
{
	struct ibv_qp *rtr = create_qp();
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	struct ibv_port_attr port;
	int err;

	if (ibv_query_port(ctx, 1, &port) ||
	    ibv_modify_qp(rtr, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("to INIT", errno);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = rtr->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = port.lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(rtr, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("to RTR", errno);
	/* A good WQE in its own queue: only its state stands in the way. */
	p->len = build_write_on(rtr, 16, (void **)&p->wqe);
	refused("qp_in_rtr", p, EINVAL);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(rtr, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			  IBV_QP_MAX_QP_RD_ATOMIC))
		die("to RTS", errno);
	err = qp_post(p);
	printf("# the same WQE once the QP is in RTS: errno %d\n", err);
	result(!err && !await_completion(),
	       "qp_in_rtr_refused_by_its_state_alone");
	ibv_destroy_qp(rtr);
	p->wqe = slot();
}

/*
 * Consecutive BlueFlame posts take the register's two buffers in turn: two
 * offsets, a buffer apart, one after the other.
 */
static void halves_alternate(void)
{
	uint64_t apart = 0;
	unsigned int i;
	int ok = bf_posts >= 3;

	for (i = 1; ok && i < bf_posts; i++) {
		uint64_t d = bf_log[i] > bf_log[i - 1] ? bf_log[i] - bf_log[i - 1] :
							 bf_log[i - 1] - bf_log[i];

		if (i == 1)
			apart = d;
		ok = d && d == apart && (i < 2 || bf_log[i] == bf_log[i - 2]);
	}
	printf("# %u BlueFlame posts, %llu bytes apart, at", bf_posts,
	       (unsigned long long)apart);
	for (i = 0; i < bf_posts; i++)
		printf(" %#llx", (unsigned long long)bf_log[i]);
	printf("\n");
	result(ok, "blueflame_halves_alternate");
}

static void refusals(void)
{
	struct post p = { .fd = ctx->cmd_fd };
	struct ibv_context *other;
	struct ibv_pd *other_ctx_pd;
	struct ibv_cq *other_cq;
	struct ibv_qp *reset_qp, *other_qp;
	uint32_t qpn = be32toh(dv.doorbell_qpn) >> 8;
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

	/* No QP named: the WQE is how the method knows its QP. */
	name_qpn(w, 0, p.len);
	refused("no_qpn", &p, EINVAL);
	/* A number that is none of this context's QPs. */
	name_qpn(w, qpn ^ 1, p.len);
	refused("unknown_qpn", &p, ENOENT);
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

	/*
	 * The QP of another context, named by a WQE posted through this one,
	 * and this context's QP, posted through the other: neither context's
	 * table knows the other's QPs.
	 */
	other = open_device(ibv_get_device_name(ctx->device));
	other_ctx_pd = ibv_alloc_pd(other);
	other_cq = ibv_create_cq(other, 16, NULL, NULL, 0);
	if (!other_ctx_pd || !other_cq)
		die("another context's PD and CQ", errno);
	other_qp = ibv_create_qp(other_ctx_pd, &(struct ibv_qp_init_attr){
		.send_cq = other_cq, .recv_cq = other_cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 } });
	if (!other_qp)
		die("another context's QP", errno);
	connect_to_self(other_qp, port_lid(other));
	p.len = build_write(64, 1, 0);
	name_qpn(w, other_qp->qp_num, p.len);
	refused("other_context_qp", &p, ENOENT);
	p.len = build_write(64, 1, 0);
	p.fd = other->cmd_fd;
	refused("own_qp_through_other_context", &p, ENOENT);
	p.fd = ctx->cmd_fd;
	ibv_destroy_qp(other_qp);
	ibv_destroy_cq(other_cq);
	ibv_dealloc_pd(other_ctx_pd);
	ibv_close_device(other);
	p.wqe = slot();

	reset_qp = create_qp();
	p.len = build_write(64, 1, 0);
	name_qpn(w, reset_qp->qp_num, p.len);
	refused("qp_in_reset", &p, EINVAL);
	ibv_destroy_qp(reset_qp);
	refused("destroyed_qp", &p, ENOENT);
	state_rule(&p);

	/* A command file that was closed. */
	p.len = build_write(64, 1, 0);
	p.fd = dup(ctx->cmd_fd);
	close(p.fd);
	refused("closed_file", &p, EBADF);
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
		struct post p = { .fd = ctx->cmd_fd };

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
	good_write(64, 1, MLX4_BF_PATH_BLUEFLAME);
	halves_alternate();
	refusals();
	/* Still posting after every refusal. */
	good_write(64, 1, MLX4_BF_PATH_BLUEFLAME);
	printf("# %d of %d failed\n", failures, results);
	return failures != 0;
}
