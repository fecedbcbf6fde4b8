#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# A short fuzz campaign on the RDMA device (mlx4_bf_qp_post_fuzz): QP_POST
# and verbs object churn, MLX4_BF_QP_POST_FUZZ_OPS operations (default
# 15000, about 15 s under TCG) from 4 processes, seed from
# MLX4_BF_FUZZ_SEED or the clock. The long campaign is `make fuzz`.
exec "$(dirname "$0")/mlx4_bf_qp_post_fuzz" -n "${MLX4_BF_QP_POST_FUZZ_OPS:-15000}" -p 4 \
	${MLX4_BF_FUZZ_SEED:+-s "$MLX4_BF_FUZZ_SEED"}
