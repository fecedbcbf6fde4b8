#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The fuzz campaign in the default run: MLX4_BF_FUZZ_CALLS calls (default
# 1000000) from 4 processes, seed from MLX4_BF_FUZZ_SEED or the clock.
exec "$(dirname "$0")/mlx4_bf_fuzz" -n "${MLX4_BF_FUZZ_CALLS:-1000000}" -p 4 \
	${MLX4_BF_FUZZ_SEED:+-s "$MLX4_BF_FUZZ_SEED"}
