// SPDX-License-Identifier: GPL-2.0

//! Rust mirror of `uapi/mlx4_bf.h`, the single source of truth of the ABI.
//!
//! `rust/abi_check` compares every size, offset and constant here with what
//! bindgen reads from the C header.

pub const ABI_VERSION: u32 = 4;
pub const IOCTL_MAGIC: u32 = 0xBF;
/// `_IOWR(MLX4_BF_IOCTL_MAGIC, 1, struct mlx4_bf_ioctl_hdr)` (asm-generic encoding).
pub const IOCTL: u32 =
    (3 << 30) | ((core::mem::size_of::<IoctlHdr>() as u32) << 16) | (IOCTL_MAGIC << 8) | 1;
pub const MAX_ATTRS: usize = 8;

pub const ATTR_F_MANDATORY: u16 = 1 << 0;
pub const ATTR_F_VALID_OUTPUT: u16 = 1 << 1;

pub const OBJECT_DEVICE: u16 = 1;
pub const OBJECT_CONTEXT: u16 = 2;
pub const OBJECT_QP: u16 = 3;
pub const OBJECT_MR: u16 = 4;

pub const METHOD_QUERY_DEVICE: u16 = 1;
pub const METHOD_QUERY_STATS: u16 = 2;
pub const METHOD_QUERY_CONTEXT: u16 = 1;
pub const METHOD_CREATE_QP: u16 = 1;
pub const METHOD_DESTROY_QP: u16 = 2;
pub const METHOD_POST_SEND: u16 = 3;
pub const METHOD_POST_RECV: u16 = 4;
pub const METHOD_CONNECT_QP: u16 = 5;
pub const METHOD_ARM_CQ: u16 = 6;
pub const METHOD_REG_MR: u16 = 1;
pub const METHOD_DEREG_MR: u16 = 2;

pub const ATTR_DEVICE_INFO: u16 = 1;
pub const ATTR_DEVICE_STATS: u16 = 2;
pub const ATTR_CONTEXT_STATS: u16 = 3;
pub const ATTR_CONTEXT_INFO: u16 = 4;
pub const ATTR_QP_INFO: u16 = 5;
pub const ATTR_QP_HANDLE: u16 = 6;
pub const ATTR_WQE: u16 = 7;
pub const ATTR_POST_FLAGS: u16 = 8;
pub const ATTR_POST_RESULT: u16 = 9;
pub const ATTR_RECV_COUNT: u16 = 10;
pub const ATTR_REMOTE_QPN: u16 = 11;
pub const ATTR_ARM_FLAGS: u16 = 12;
pub const ATTR_PAYLOAD: u16 = 13;
pub const ATTR_WQE_LEN: u16 = 14;
pub const ATTR_MR_ADDR: u16 = 15;
pub const ATTR_MR_LENGTH: u16 = 16;
pub const ATTR_MR_ACCESS: u16 = 17;
pub const ATTR_MR_INFO: u16 = 18;
pub const ATTR_MR_HANDLE: u16 = 19;
pub const ATTR_QP_FLAGS: u16 = 20;
pub const ATTR_QP_SEND_INFO: u16 = 21;

pub const QP_F_USER_SEND: u32 = 1 << 0;
pub const QP_F_ALL: u32 = QP_F_USER_SEND;

pub const MMAP_UAR_PAGE: u64 = 0x10_0000;
pub const MMAP_BF_PAGE: u64 = 0x10_1000;
pub const MAX_PAYLOAD: usize = 1024;

pub const ARM_F_SOLICITED: u32 = 1 << 0;

pub const ACCESS_LOCAL_WRITE: u32 = 1 << 0;
pub const ACCESS_REMOTE_WRITE: u32 = 1 << 1;
pub const ACCESS_REMOTE_READ: u32 = 1 << 2;
pub const ACCESS_ALL: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;

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

/// Why a POST_SEND was refused; the index into [`Stats::rejects`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Reject {
    Length = 0,
    SizeField = 1,
    Opcode = 2,
    Ctrl = 3,
    Inline = 4,
    Gather = 5,
    Fault = 6,
    Qp = 7,
    Lkey = 8,
    Range = 9,
    Rkey = 10,
}
pub const REJECT_MAX: usize = 11;

/// `struct mlx4_bf_attr`
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attr {
    pub attr_id: u16,
    pub len: u16,
    pub flags: u16,
    pub reserved: u16,
    pub data: u64,
}

/// `struct mlx4_bf_ioctl_hdr` without its flexible `attrs` array.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoctlHdr {
    pub length: u16,
    pub object_id: u16,
    pub method_id: u16,
    pub num_attrs: u16,
    pub reserved1: u64,
    pub driver_id: u32,
    pub reserved2: u32,
}

/// `struct mlx4_bf_device_info`
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceInfo {
    pub abi_version: u32,
    pub num_uars: u32,
    pub bf_reg_size: u32,
    pub bf_buf_size: u32,
    pub max_bf_wqe_size: u32,
    pub max_db_wqe_size: u32,
    pub writer: u32,
    pub store_block_max: u32,
    pub max_qps_per_context: u32,
    pub sq_entries: u32,
    pub bar2_len: u64,
    pub max_mrs_per_context: u32,
    pub max_mr_pages: u32,
    pub max_mr_size: u64,
}

/// `struct mlx4_bf_mr_info`
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrInfo {
    pub mr_handle: u32,
    pub lkey: u32,
    pub rkey: u32,
    pub reserved: u32,
}

/// `struct mlx4_bf_qp_send_info`
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpSendInfo {
    pub sq_offset: u64,
    pub sq_entries: u32,
    pub sq_stride: u32,
    pub bf_buf_size: u32,
    pub bf_reg_offset: u32,
}

/// `struct mlx4_bf_context_info`
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextInfo {
    pub uar_index: u32,
    pub reserved: u32,
    pub uar_offset: u64,
    pub bf_offset: u64,
}

/// `struct mlx4_bf_qp_info`
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpInfo {
    pub qp_handle: u32,
    pub qpn: u32,
    pub rq_entries: u32,
    pub recv_buf_size: u32,
    pub cq_entries: u32,
    pub cqe_size: u32,
    pub cq_offset: u64,
    pub cq_db_offset: u64,
    pub recv_offset: u64,
    pub wqe_offset: u64,
}

/// `struct mlx4_bf_cqe`: a completion as the adapter writes it, its
/// multi-byte fields big-endian (`u32::from_be`). It lives in memory the
/// adapter writes, so its users read it by field (`offset_of!`), the owner
/// byte first.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    pub my_qpn: u32,
    pub immed: u32,
    pub src_qpn: u32,
    pub reserved1: [u8; 8],
    pub byte_cnt: u32,
    pub wqe_index: u16,
    pub vendor_err_syndrome: u8,
    pub syndrome: u8,
    pub reserved2: [u8; 3],
    pub owner_sr_opcode: u8,
}

// The driver, which includes this file too, reads only the owner bit and
// ERROR: the rest tells completions apart for user space (`allow(dead_code)`
// for the driver's build).

/// [`Cqe::owner_sr_opcode`]
pub const CQE_OWNER: u8 = 0x80;
#[allow(dead_code)]
pub const CQE_IS_SEND: u8 = 0x40;
pub const CQE_OPCODE_MASK: u8 = 0x1f;

/// `enum mlx4_bf_cqe_opcode`: of a receive completion (and ERROR of any).
#[allow(dead_code)]
pub const CQE_OPCODE_RDMA_WRITE_IMM: u8 = 0x00;
#[allow(dead_code)]
pub const CQE_OPCODE_SEND: u8 = 0x01;
#[allow(dead_code)]
pub const CQE_OPCODE_SEND_IMM: u8 = 0x02;
pub const CQE_OPCODE_ERROR: u8 = 0x1e;

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

/// `struct mlx4_bf_stats`
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub bf_posts: u64,
    pub db_posts: u64,
    pub bytes: u64,
    pub store_blocks: u64,
    pub rejects: [u64; REJECT_MAX],
}

/// How a call's header is wrong (before any attribute is looked at).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HdrError {
    /// `length` does not match `num_attrs`, or too many attributes.
    Length,
    /// A reserved field is not zero.
    Reserved,
}

/// Checks a call header; returns the number of attributes that follow it.
pub fn check_hdr(hdr: &IoctlHdr) -> Result<usize, HdrError> {
    if hdr.reserved1 != 0 || hdr.driver_id != 0 || hdr.reserved2 != 0 {
        return Err(HdrError::Reserved);
    }
    let n = usize::from(hdr.num_attrs);
    let want = core::mem::size_of::<IoctlHdr>() + n * core::mem::size_of::<Attr>();
    if n > MAX_ATTRS || usize::from(hdr.length) != want {
        return Err(HdrError::Length);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(n: u16) -> IoctlHdr {
        IoctlHdr {
            length: 24 + 16 * n,
            num_attrs: n,
            ..Default::default()
        }
    }

    #[test]
    fn header_length_must_match_the_attribute_count() {
        assert_eq!(check_hdr(&hdr(2)), Ok(2));
        let mut h = hdr(2);
        h.length += 16;
        assert_eq!(check_hdr(&h), Err(HdrError::Length));
        assert_eq!(check_hdr(&hdr(MAX_ATTRS as u16 + 1)), Err(HdrError::Length));
    }

    #[test]
    fn reserved_header_fields_must_be_zero() {
        for f in [
            |h: &mut IoctlHdr| h.reserved1 = 1,
            |h: &mut IoctlHdr| h.driver_id = 1,
            |h: &mut IoctlHdr| h.reserved2 = 1 << 31,
        ] {
            let mut h = hdr(1);
            f(&mut h);
            assert_eq!(check_hdr(&h), Err(HdrError::Reserved));
        }
    }
}
