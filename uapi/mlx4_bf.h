/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * mlx4_bf: BlueFlame send path for mlx4 (ConnectX) adapters.
 *
 * The RDMA provider's driver-specific uverbs method, QP_POST, beside
 * mainline mlx4_ib's user ABI (include/uapi/rdma/mlx4-abi.h), and the
 * values of the module's writer parameter.
 *
 * This header is the single source of truth for the ABI; the Rust mirror
 * (rust/mlx4_bf_core/src/abi.rs) is checked against it with bindgen.
 */
#ifndef _UAPI_MLX4_BF_H
#define _UAPI_MLX4_BF_H

#include <linux/types.h>
#include <rdma/ib_user_ioctl_cmds.h>

/* How the driver writes to a BlueFlame register: the writer module parameter. */
enum mlx4_bf_writer {
	/* zPCI store-block semantics: <= 128-byte blocks, no 4 KiB crossing */
	MLX4_BF_WRITER_STORE_BLOCK = 1,
	/* x86 write combining, 64-bit copies, flushed with a barrier */
	MLX4_BF_WRITER_WRITE_COMBINING,
};

enum mlx4_bf_post_flags {
	/* Take the doorbell path even when the WQE fits a BlueFlame buffer. */
	MLX4_BF_POST_F_FORCE_DOORBELL	= 1 << 0,
	/* Fail with -EINVAL rather than fall back to the doorbell path. */
	MLX4_BF_POST_F_REQUIRE_BF	= 1 << 1,
};

enum mlx4_bf_path {
	MLX4_BF_PATH_BLUEFLAME = 1,
	MLX4_BF_PATH_DOORBELL,
};

/**
 * struct mlx4_bf_post_result - what QP_POST did
 * @path: enum mlx4_bf_path
 * @wqe_index: the WQE counter the WQE carries
 * @bf_offset: offset in BAR2 written (BlueFlame) or rung (doorbell register)
 * @bytes_written: bytes written to BAR2 (the 64-byte padded WQE, or 4)
 * @store_blocks: blocks issued by the store-block writer (0 otherwise)
 * @reserved: zero
 */
struct mlx4_bf_post_result {
	__u32 path;
	__u32 wqe_index;
	__aligned_u64 bf_offset;
	__u32 bytes_written;
	__u32 store_blocks;
	__u32 reserved[2];
};

/*
 * The RDMA provider's uverbs method (the ib_device mlx4_bf<N>, mainline
 * mlx4_ib's user ABI, include/uapi/rdma/mlx4-abi.h): a BlueFlame post of a
 * WQE that libmlx4 built in its send queue, called on the verbs context's
 * command file (RDMA_VERBS_IOCTL) on the device object (UVERBS_OBJECT_DEVICE),
 * in the driver's name space, as mlx5's QUERY_PORT is. The QP is the one
 * whose number the WQE's control segment carries (bf_qpn, as libmlx4
 * stamps it for BlueFlame), looked up among the calling context's own QPs
 * (-ENOENT for any other number); the kernel checks the WQE and writes it
 * to the context's BlueFlame page (store blocks on s390), or rings the
 * send doorbell when it does not fit. A device without the method answers
 * a call of it with -EPROTONOSUPPORT (the uverbs core's answer for an
 * unknown method): that is how user space learns whether it is there.
 */

enum mlx4_bf_ib_device_methods {
	MLX4_BF_IB_METHOD_QP_POST = (1U << UVERBS_ID_NS_SHIFT),
};

enum mlx4_bf_ib_qp_post_attrs {
	/*
	 * The WQE as libmlx4 built it: owner bit and WQE counter in the first
	 * dword are user space's (its send queue), the QPN in the second names
	 * the QP (one of the calling context's); 16 bytes at least, at most
	 * MLX4_BF_QP_POST_MAX_WQE.
	 */
	MLX4_BF_IB_ATTR_QP_POST_WQE = (1U << UVERBS_ID_NS_SHIFT),
	/* Flags, optional: enum mlx4_bf_post_flags. */
	MLX4_BF_IB_ATTR_QP_POST_FLAGS,
	/*
	 * struct mlx4_bf_post_result, optional; wqe_index is the WQE counter
	 * the WQE carries.
	 */
	MLX4_BF_IB_ATTR_QP_POST_RESULT,
};

/* The largest WQE the method takes: 63 units of 16 bytes (the size field). */
#define MLX4_BF_QP_POST_MAX_WQE		1008

#endif /* _UAPI_MLX4_BF_H */
