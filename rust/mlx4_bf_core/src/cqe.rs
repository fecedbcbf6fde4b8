// SPDX-License-Identifier: GPL-2.0

//! A completion queue entry as mlx4 adapters write it: the kernel ping's
//! receive and send CQs are read by the driver (`context/receive.rs`,
//! `hw/queues/cq.rs`).

/// `struct mlx4_cqe` (include/linux/mlx4/cq.h): a completion as the
/// adapter writes it, its
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
// ERROR: the rest tells completions apart for the host tools
// (`allow(dead_code)` for the driver's build).

/// [`Cqe::owner_sr_opcode`]
pub const CQE_OWNER: u8 = 0x80;
#[allow(dead_code)]
pub const CQE_IS_SEND: u8 = 0x40;
pub const CQE_OPCODE_MASK: u8 = 0x1f;

/// The opcode of a receive completion (and ERROR of any).
#[allow(dead_code)]
pub const CQE_OPCODE_RDMA_WRITE_IMM: u8 = 0x00;
#[allow(dead_code)]
pub const CQE_OPCODE_SEND: u8 = 0x01;
#[allow(dead_code)]
pub const CQE_OPCODE_SEND_IMM: u8 = 0x02;
pub const CQE_OPCODE_ERROR: u8 = 0x1e;
