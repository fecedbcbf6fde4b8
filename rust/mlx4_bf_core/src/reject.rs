// SPDX-License-Identifier: GPL-2.0

//! Why a WQE is refused ([`Reject`], what `wqe::validate` and the region
//! checks return), and the counts the driver keeps of posts and refusals.

/// Why a post was refused; the index into [`PostCounts::rejects`].
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
    /// A UD WQE's address vector names another PD than its QP's.
    Address = 11,
}
pub const REJECT_MAX: usize = 12;

/// Counts of posts by path and of refusals by reason, of a device or a
/// context: the driver's debugfs `stats` and the RDMA device's
/// `hw_counters`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PostCounts {
    pub bf_posts: u64,
    pub db_posts: u64,
    pub bytes: u64,
    pub store_blocks: u64,
    pub rejects: [u64; REJECT_MAX],
}
