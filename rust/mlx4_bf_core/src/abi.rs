// SPDX-License-Identifier: GPL-2.0

//! Rust mirror of `uapi/mlx4_bf.h`, the single source of truth of the ABI:
//! the RDMA provider's uverbs method QP_POST (its IDs, flags and result)
//! and the writer the `writer` module parameter names.
//!
//! `rust/abi_check` compares every size, offset and constant here with what
//! bindgen reads from the C header.

pub const WRITER_STORE_BLOCK: u32 = 1;
pub const WRITER_WRITE_COMBINING: u32 = 2;

pub const POST_F_FORCE_DOORBELL: u32 = 1 << 0;
pub const POST_F_REQUIRE_BF: u32 = 1 << 1;
pub const POST_F_ALL: u32 = POST_F_FORCE_DOORBELL | POST_F_REQUIRE_BF;

pub const PATH_BLUEFLAME: u32 = 1;
pub const PATH_DOORBELL: u32 = 2;

/// The RDMA provider's uverbs method (`MLX4_BF_IB_METHOD_QP_POST`, on the
/// device object): its IDs in the driver name space
/// (`1 << UVERBS_ID_NS_SHIFT`), the longest WQE it takes.
pub const UVERBS_ID_NS: u16 = 1 << 12;
pub const IB_METHOD_QP_POST: u16 = UVERBS_ID_NS;
pub const IB_ATTR_QP_POST_WQE: u16 = UVERBS_ID_NS;
pub const IB_ATTR_QP_POST_FLAGS: u16 = UVERBS_ID_NS + 1;
pub const IB_ATTR_QP_POST_RESULT: u16 = UVERBS_ID_NS + 2;
pub const QP_POST_MAX_WQE: usize = 1008;

/// `struct mlx4_bf_post_result`
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PostResult {
    pub path: u32,
    pub wqe_index: u32,
    pub bf_offset: u64,
    pub bytes_written: u32,
    pub store_blocks: u32,
    pub reserved: [u32; 2],
}
