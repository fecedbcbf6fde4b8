#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# A short fuzz campaign: MLX4_BF_FUZZ_CALLS calls (default 50000: each call
# that reaches the device model is trapped MMIO, about 250 s per million
# under TCG) from 4 processes, seed from MLX4_BF_FUZZ_SEED or the clock.
# The long campaign is `make fuzz`.
exec "$(dirname "$0")/mlx4_bf_fuzz" -n "${MLX4_BF_FUZZ_CALLS:-50000}" -p 4 \
	${MLX4_BF_FUZZ_SEED:+-s "$MLX4_BF_FUZZ_SEED"}
