// SPDX-License-Identifier: GPL-2.0
/*
 * ibv_qp_post -f: the QP_POST method fuzzed. Valid WQEs with flipped bits,
 * random attribute IDs, lengths, flags and pointers (NULL, kernel,
 * unmapped, odd), random QP numbers, the QP destroyed and made again now
 * and then; the seed replays the calls.
 */
#include "../../testing/selftests/mlx4_bf/fuzz_rand.h"
#include "qp_post.h"

static uint16_t random_attr_id(void)
{
	static const uint16_t ids[] = {
		MLX4_BF_IB_ATTR_QP_POST_WQE, MLX4_BF_IB_ATTR_QP_POST_FLAGS,
		MLX4_BF_IB_ATTR_QP_POST_RESULT,
	};

	return below(8) ? ids[below(3)] : (uint16_t)rnd();
}

/* One random call; returns the errno. */
static int fuzz_call(void *unmapped)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[6];
	} cmd;
	/* Room for what a random result pointer near it makes the kernel write. */
	static uint8_t r[256];
	uint32_t i, n, len = build_write(1 + below(MAX_INLINE), below(4), src_mr->lkey);
	uint8_t *w = slot();

	for (i = below(4); i; i--)
		w[below(len)] ^= 1 << below(8);
	/* Now and then another QP number: none of the context's, mostly. */
	if (!below(8))
		put32(w + 4, (rnd() & 0xffffff) << 8 | len / 16);
	memset(&cmd, 0, sizeof(cmd));
	n = below(4) ? 1 + below(3) : below(7);
	for (i = 0; i < n; i++) {
		struct ib_uverbs_attr *a = &cmd.attrs[i];

		a->attr_id = i == 0 && below(8) ? MLX4_BF_IB_ATTR_QP_POST_WQE :
						  random_attr_id();
		switch (a->attr_id) {
		case MLX4_BF_IB_ATTR_QP_POST_WQE:
			a->len = below(8) ? len : below(1100);
			a->data = below(8) ? (uintptr_t)w : random_pointer(w, unmapped);
			break;
		case MLX4_BF_IB_ATTR_QP_POST_FLAGS:
			a->len = below(4) ? 8 : below(16);
			a->data = below(4) ? below(4) : rnd();
			break;
		default:
			a->len = below(4) ? sizeof(struct mlx4_bf_post_result) : below(64);
			a->data = below(4) ? (uintptr_t)r : random_pointer(r, unmapped);
			break;
		}
		if (!below(16))
			a->flags = rnd();
	}
	cmd.hdr.num_attrs = n;
	cmd.hdr.length = sizeof(cmd.hdr) + n * sizeof(cmd.attrs[0]);
	if (!below(32))
		cmd.hdr.length = below(sizeof(cmd));
	cmd.hdr.object_id = below(16) ? UVERBS_OBJECT_DEVICE : below(32);
	cmd.hdr.method_id = below(16) ? MLX4_BF_IB_METHOD_QP_POST : (uint16_t)rnd();
	cmd.hdr.driver_id = below(16) ? RDMA_DRIVER_MLX4 : below(32);
	return ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &cmd) ? errno : 0;
}

void fuzz(unsigned long calls, uint64_t seed)
{
	void *unmapped = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned long i, posted = 0;
	struct ibv_wc wc[16];

	printf("# seed %llu, %lu calls\n", (unsigned long long)seed, calls);
	rng_state = seed | 1;
	for (i = 0; i < calls; i++) {
		if (!fuzz_call(unmapped)) {
			posted++;
			head++;
		}
		while (ibv_poll_cq(cq, 16, wc) > 0)
			;
		/* A posted mutation may have put the QP in error. */
		if (!below(256))
			new_qp();
	}
	printf("# %lu calls posted\n", posted);
	result(1, "fuzz_survived");
	new_qp();
	good_write(64, 1, MLX4_BF_PATH_BLUEFLAME);
}
