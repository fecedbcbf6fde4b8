// SPDX-License-Identifier: GPL-2.0

//! The size of a shared receive queue in user memory, as mainline mlx4_ib
//! computes it for a process (`mlx4_ib_create_srq()`, `mlx4_ib_modify_srq()`
//! and `mlx4_ib_query_srq()` in `drivers/infiniband/hw/mlx4/srq.c`; libmlx4's
//! `mlx4_create_srq()` and `mlx4_alloc_srq_buf()` compute the same buffer):
//! a power of two of WQEs, each a 16-byte next segment and its gather
//! entries, at least 32 bytes, one entry kept unused.
//!
//! Scope: a basic SRQ (no XRC), never resized.

use crate::{qp_size::DATA_SEG_LEN, verbs::VerbsError};

/// `sizeof(struct mlx4_wqe_srq_next_seg)`.
pub const NEXT_SEG_LEN: u32 = 16;
/// The smallest SRQ WQE: 32 bytes.
pub const MIN_WQE_LEN: u32 = 32;

/// The device's limits (`mlx4_dev_cap()`: `caps.max_srq_wqes` is
/// QUERY_DEV_CAP's max SRQ size, `caps.max_srq_sge` its max RQ gathers
/// less one, room for the next segment).
#[derive(Clone, Copy, Debug)]
pub struct SrqLimits {
    pub max_srq_wqes: u32,
    pub max_srq_sge: u32,
}

/// An SRQ's queue: `max` WQEs of `1 << wqe_shift` bytes with `max_gs`
/// gather entries each (`struct mlx4_srq`'s fields of those names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqGeometry {
    pub max: u32,
    pub max_gs: u32,
    pub wqe_shift: u8,
}

impl SrqGeometry {
    /// Bytes of the buffer the process allocated (the length pinned).
    pub const fn buf_size(&self) -> u64 {
        (self.max as u64) << self.wqe_shift
    }

    /// The context's log size (`state_logsize_srqn` bits 24..28).
    pub const fn log_size(&self) -> u8 {
        self.max.ilog2() as u8
    }

    /// The context's `logstride`: `wqe_shift - 4`.
    pub const fn logstride(&self) -> u8 {
        self.wqe_shift - 4
    }

    /// What verbs report as `max_wr`: one entry stays unused.
    pub const fn max_wr(&self) -> u32 {
        self.max - 1
    }

    /// `mlx4_ib_modify_srq()` with `IB_SRQ_LIMIT`: a limit below the
    /// queue's size.
    pub const fn check_limit(&self, limit: u32) -> Result<(), VerbsError> {
        if limit >= self.max {
            return Err(VerbsError::Invalid);
        }
        Ok(())
    }
}

/// `mlx4_ib_create_srq()`'s sizes for `max_wr` and `max_sge` asked.
pub fn user_srq(l: &SrqLimits, max_wr: u32, max_sge: u32) -> Result<SrqGeometry, VerbsError> {
    if max_wr >= l.max_srq_wqes || max_sge > l.max_srq_sge {
        return Err(VerbsError::Invalid);
    }
    let max = (max_wr + 1)
        .checked_next_power_of_two()
        .ok_or(VerbsError::Invalid)?;
    let desc = max_sge
        .checked_mul(DATA_SEG_LEN)
        .and_then(|n| n.checked_add(NEXT_SEG_LEN))
        .and_then(u32::checked_next_power_of_two)
        .ok_or(VerbsError::Invalid)?
        .max(MIN_WQE_LEN);
    let wqe_shift = desc.ilog2() as u8;
    // The buffer's length must be a `usize` on every target.
    if u64::from(max) << wqe_shift > u64::from(u32::MAX) {
        return Err(VerbsError::Invalid);
    }
    Ok(SrqGeometry {
        max,
        max_gs: max_sge,
        wqe_shift,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A ConnectX-3's (and the model's): 2^14 SRQ WQEs, 31 gathers.
    const CX3: SrqLimits = SrqLimits {
        max_srq_wqes: 1 << 14,
        max_srq_sge: 31,
    };

    #[test]
    fn srq_pingpong_sizes_as_mainline() {
        // ibv_srq_pingpong: rx_depth 500, one gather entry.
        let g = user_srq(&CX3, 500, 1).unwrap();
        assert_eq!(
            g,
            SrqGeometry {
                max: 512,
                max_gs: 1,
                wqe_shift: 5
            }
        );
        assert_eq!((g.buf_size(), g.log_size(), g.logstride()), (16384, 9, 1));
        assert_eq!(g.max_wr(), 511);
    }

    #[test]
    fn a_power_of_two_asked_doubles() {
        // roundup_pow_of_two(max_wr + 1): one entry is never posted.
        assert_eq!(user_srq(&CX3, 512, 2).unwrap().max, 1024);
        assert_eq!(user_srq(&CX3, 511, 2).unwrap().max, 512);
        // 16 + 3 * 16 = 64 bytes; 16 + 4 * 16 = 80 -> 128.
        assert_eq!(user_srq(&CX3, 1, 3).unwrap().wqe_shift, 6);
        assert_eq!(user_srq(&CX3, 1, 4).unwrap().wqe_shift, 7);
        assert_eq!(user_srq(&CX3, 1, 0).unwrap().wqe_shift, 5);
    }

    #[test]
    fn limits_refuse() {
        assert_eq!(user_srq(&CX3, 1 << 14, 1), Err(VerbsError::Invalid));
        assert!(user_srq(&CX3, (1 << 14) - 1, 1).is_ok());
        assert_eq!(user_srq(&CX3, 1, 32), Err(VerbsError::Invalid));
        let g = user_srq(&CX3, 100, 1).unwrap();
        assert_eq!(g.check_limit(128), Err(VerbsError::Invalid));
        assert_eq!(g.check_limit(127), Ok(()));
    }

    proptest! {
        #[test]
        fn the_queue_holds_what_was_asked(wr in 0u32..(1 << 14), sge in 0u32..32) {
            let g = user_srq(&CX3, wr, sge).unwrap();
            prop_assert!(g.max_wr() >= wr && g.max.is_power_of_two());
            prop_assert!(1u32 << g.wqe_shift >= NEXT_SEG_LEN + sge * DATA_SEG_LEN);
            prop_assert!(g.wqe_shift >= 5 && g.buf_size() <= u64::from(u32::MAX));
        }

        #[test]
        fn anything_else_is_refused(wr in any::<u32>(), sge in any::<u32>()) {
            let r = user_srq(&CX3, wr, sge);
            prop_assert_eq!(r.is_ok(), wr < CX3.max_srq_wqes && sge <= CX3.max_srq_sge);
        }
    }
}
