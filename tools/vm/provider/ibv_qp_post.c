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
#include "qp_post.h"

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
