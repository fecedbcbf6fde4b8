// SPDX-License-Identifier: GPL-2.0

//! Queue geometry: the sizes every layer agrees on, and their checks.

/// Send-queue slots per QP, and bytes per slot (the largest WQE, rounded).
pub(crate) const SQ_ENTRIES: u32 = 16;
pub(crate) const SQ_STRIDE: usize = 1024;
/// Receive WQEs per QP, each one data segment naming a kernel buffer.
pub(crate) const RQ_ENTRIES: u32 = 16;
pub(crate) const RQ_STRIDE: usize = 16;
pub(crate) const RECV_BUF_SIZE: usize = 1024;
/// One QP's buffer in `Resources::qp_pool`: the SQ, then the RQ (mlx4 puts the
/// queue with the larger stride first), then the RQ doorbell record.
pub(crate) const RQ_OFFSET: usize = SQ_ENTRIES as usize * SQ_STRIDE;
pub(crate) const RQ_DB_OFFSET: usize = RQ_OFFSET + 2048;
pub(crate) const QP_BUF_BYTES: usize = RQ_OFFSET + 4096;
const _: () = assert!(RQ_ENTRIES as usize * RQ_STRIDE <= RQ_DB_OFFSET - RQ_OFFSET);
/// The kernel's QPs (the kernel ping's, one per end); their buffers come
/// from one DMA pool set up at probe.
pub(crate) const KERNEL_QPS: usize = KPING_ENDS;
pub(crate) const QPS_PER_KERNEL_CONTEXT: usize = 1;
/// The kernel's QPNs lie in `FIRST_QPN..KERNEL_QPN_END`, above the range
/// mlx4 reserves for special QPs; the provider's from `KERNEL_QPN_END` to
/// the profile's last (`hw::firmware::icm`). Only the BlueFlame-safe ones
/// are used (64 of every 256, `wqe::qpn_is_bf_safe`).
pub(crate) const FIRST_QPN: u32 = 0x200;
pub(crate) const KERNEL_QPN_END: u32 = 0x400;
const _: () =
    assert!(FIRST_QPN + 4 * KERNEL_QPS as u32 <= KERNEL_QPN_END && KERNEL_QPN_END % 256 == 0);

/// The send CQ of a kernel context.
pub(crate) const CQ_LOG_ENTRIES: u32 = 7;
/// At least twice the most WQEs a kernel context can have outstanding
/// (`QPS_PER_KERNEL_CONTEXT * SQ_ENTRIES`), so the CQ cannot overflow.
pub(crate) const CQ_ENTRIES: u32 = 1 << CQ_LOG_ENTRIES;
/// `struct mlx4_cqe` without the 64-byte CQE option.
pub(crate) const CQE_SIZE: usize = 32;
/// One CQ buffer: exactly one 4 KiB page.
pub(crate) const CQ_BYTES: usize = CQ_ENTRIES as usize * CQE_SIZE;
/// Kernel send CQs: only a kernel context with a QP has one.
pub(crate) const KERNEL_SEND_CQS: usize = KERNEL_QPS;
/// Doorbell record per CQ, in `u32`s: set_ci, arm.
pub(crate) const DB_REC_WORDS: usize = 2;
/// CQEs in a receive CQ: one page.
pub(crate) const RCQ_LOG_ENTRIES: u32 = 7;
pub(crate) const RCQ_ENTRIES: u32 = 1 << RCQ_LOG_ENTRIES;

/// The first CQ slot of the RDMA provider's CQs (in user memory, any size
/// the device allows), after the kernel's send and receive CQs; they go
/// up to the profile's last CQ (`Firmware::cq_slots`).
pub(crate) const FIRST_PROVIDER_CQ: usize = KERNEL_SEND_CQS + KERNEL_QPS;

/// The EQs at most: the async EQ (MSI-X vector 0, mlx4_core's
/// `MLX4_EQ_ASYNC`) and a completion EQ per further vector, one per CPU
/// as far as the adapter's EQs allow (`mlx4_enable_msi_x()`).
pub(crate) const MAX_EQS: usize = 8;
/// Each EQ's ring.
pub(crate) const EQ_LOG_ENTRIES: u32 = 8;
pub(crate) const EQ_ENTRIES: u32 = 1 << EQ_LOG_ENTRIES;
pub(crate) const EQ_RING_BYTES: usize = EQ_ENTRIES as usize * EQE_SIZE;
/// `struct mlx4_eqe`.
pub(crate) const EQE_SIZE: usize = 32;

/// Kernel ping ends an adapter runs at once, each with two buffers of
/// `KPING_BUF_BYTES` (its source and sink) in `Resources::kping_pool`.
pub(crate) const KPING_ENDS: usize = 8;
pub(crate) const KPING_BUF_BYTES: usize = 16384;
pub(crate) const KPING_END_BYTES: usize = 2 * KPING_BUF_BYTES;

/// MPTs the profile asks for (`hw::firmware::icm`): the firmware's
/// reserved ones, then memory regions.
pub(crate) const MAX_MPTS: usize = 1 << 13;

const _: () = assert!(CQ_ENTRIES as usize >= 2 * QPS_PER_KERNEL_CONTEXT * SQ_ENTRIES as usize);
const _: () = assert!(CQ_BYTES == 4096 && RCQ_ENTRIES as usize * CQE_SIZE == 4096);

// The bitmaps these sizes index.
const _: () = assert!(
    KERNEL_QPS <= u64::BITS as usize,
    "QpTable::used_slots is a u64"
);
