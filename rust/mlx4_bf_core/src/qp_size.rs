// SPDX-License-Identifier: GPL-2.0

//! The sizes of a QP and a CQ in user memory, as mainline mlx4_ib computes
//! them for a process (`drivers/infiniband/hw/mlx4/qp.c`: `set_rq_size()`
//! with `is_user`, `set_user_sq_size()`; `cq.c`: `mlx4_ib_create_user_cq()`):
//! from the verbs request and the device's limits to the work queues'
//! entry counts and strides, the buffer the process allocated (libmlx4
//! computes the same), where each queue lies in it, and what create_qp
//! reports back.
//!
//! Scope: an RC, UC or UD QP with its own receive queue or on a shared
//! one (no XRC), no inline receive.

use crate::verbs::VerbsError;

/// `MLX4_IB_SQ_MAX_SPARE`: `MLX4_IB_SQ_HEADROOM(MLX4_IB_SQ_MIN_WQE_SHIFT)`,
/// `(2048 >> 6) + 1`, the WQEs a send queue keeps spare for prefetching.
pub const SQ_MAX_SPARE: u32 = (2048 >> 6) + 1;
/// `MLX4_IB_MIN_SQ_STRIDE`: 64-byte send WQE basic blocks at least.
pub const MIN_SQ_STRIDE: u8 = 6;
/// `sizeof(struct mlx4_wqe_data_seg)`.
pub const DATA_SEG_LEN: u32 = 16;

/// The device's limits the sizes are checked against (`mlx4_dev_cap()`:
/// `caps.max_wqes` is QUERY_DEV_CAP's max QP size, `max_sq_sg`,
/// `max_rq_sg`, `max_sq_desc_sz` its fields of those names).
#[derive(Clone, Copy, Debug)]
pub struct QpLimits {
    pub max_wqes: u32,
    pub max_sq_sg: u32,
    pub max_rq_sg: u32,
    pub max_sq_desc_sz: u32,
}

/// What a process asks for: the verbs caps of its receive queue and
/// libmlx4's `struct mlx4_ib_create_qp` (the send queue it laid out).
#[derive(Clone, Copy, Debug, Default)]
pub struct UserQpRequest {
    pub max_recv_wr: u32,
    pub max_recv_sge: u32,
    pub log_sq_bb_count: u8,
    pub log_sq_stride: u8,
    pub inl_recv_sz: u32,
    /// The QP receives from a shared receive queue: it has none of its
    /// own (`qp_has_rq()` false).
    pub srq: bool,
}

/// One work queue: `wqe_cnt` entries of `1 << wqe_shift` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkQueue {
    pub wqe_cnt: u32,
    pub wqe_shift: u8,
}

impl WorkQueue {
    /// Bytes of the queue.
    pub const fn bytes(&self) -> u64 {
        (self.wqe_cnt as u64) << self.wqe_shift
    }

    /// The context's `sq_size_stride` / `rq_size_stride` (without the
    /// SQ's no-prefetch bit): `ilog2(wqe_cnt) << 3 | (wqe_shift - 4)`, as
    /// `__mlx4_ib_modify_qp()` writes it.
    pub const fn size_stride(&self) -> u8 {
        let size = if self.wqe_cnt != 0 {
            (self.wqe_cnt.ilog2() as u8) << 3
        } else {
            0
        };
        size | self.wqe_shift.wrapping_sub(4)
    }
}

/// A user QP's queues and buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpGeometry {
    pub sq: WorkQueue,
    pub rq: WorkQueue,
    /// Gather entries per receive WQE (`rq.max_gs`).
    pub rq_max_gs: u32,
}

impl QpGeometry {
    /// `qp->buf_size`: both queues, the bytes the process's buffer must
    /// have (the length mlx4_ib pins).
    pub const fn buf_size(&self) -> u64 {
        self.rq.bytes() + self.sq.bytes()
    }

    /// `(rq.offset, sq.offset)`: where the RQ and the SQ start in the
    /// buffer: the queue with the
    /// larger stride first, the SQ on a tie (`set_kernel_sq_size()`; the
    /// device and libmlx4's `mlx4_alloc_qp_buf()` apply the same rule, a
    /// user QP's context names only the sizes).
    pub const fn offsets(&self) -> (u64, u64) {
        if self.rq.wqe_shift > self.sq.wqe_shift {
            (0, self.rq.bytes())
        } else {
            (self.sq.bytes(), 0)
        }
    }
}

/// What create_qp hands back in `ib_qp_cap` for a user QP: the receive
/// side rounded up ("leave userspace return values as they were"); the
/// send side stays as the process asked (`set_user_sq_size()` does not
/// touch it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvCap {
    pub max_recv_wr: u32,
    pub max_recv_sge: u32,
}

/// `set_rq_size()` for a user QP: its receive queue, or none on an SRQ
/// (then no receive WRs may be asked; the stride's `wqe_shift - 4` of a
/// zeroed queue is what the context carries).
fn user_rq(l: &QpLimits, r: &UserQpRequest) -> Result<(WorkQueue, u32), VerbsError> {
    if r.max_recv_wr > l.max_wqes.saturating_sub(SQ_MAX_SPARE)
        || r.max_recv_sge > l.max_sq_sg.min(l.max_rq_sg)
    {
        return Err(VerbsError::Invalid);
    }
    if r.srq {
        if r.max_recv_wr != 0 || r.inl_recv_sz != 0 {
            return Err(VerbsError::Invalid);
        }
        let none = WorkQueue {
            wqe_cnt: 0,
            wqe_shift: 0,
        };
        return Ok((none, 0));
    }
    // "HW requires >= 1 RQ entry with >= 1 gather entry".
    if r.max_recv_wr == 0 || r.max_recv_sge == 0 {
        return Err(VerbsError::Invalid);
    }
    // Inline receive (param3 bit 25) is outside this provider's scope.
    if r.inl_recv_sz != 0 {
        return Err(VerbsError::NotSupported);
    }
    let wqe_cnt = r.max_recv_wr.next_power_of_two();
    let max_gs = r.max_recv_sge.next_power_of_two();
    let wqe_shift = (max_gs * DATA_SEG_LEN).ilog2() as u8;
    Ok((WorkQueue { wqe_cnt, wqe_shift }, max_gs))
}

/// `set_user_sq_size()`: the send queue libmlx4 laid out, checked.
fn user_sq(l: &QpLimits, r: &UserQpRequest) -> Result<WorkQueue, VerbsError> {
    // check_shl_overflow(1, log_sq_bb_count, &cnt) || cnt > max_wqes
    let cnt = 1u32
        .checked_shl(u32::from(r.log_sq_bb_count))
        .filter(|_| r.log_sq_bb_count < 32)
        .ok_or(VerbsError::Invalid)?;
    if cnt > l.max_wqes {
        return Err(VerbsError::Invalid);
    }
    let max_stride = l.max_sq_desc_sz.max(1).next_power_of_two().ilog2();
    if u32::from(r.log_sq_stride) > max_stride || r.log_sq_stride < MIN_SQ_STRIDE {
        return Err(VerbsError::Invalid);
    }
    Ok(WorkQueue {
        wqe_cnt: cnt,
        wqe_shift: r.log_sq_stride,
    })
}

/// A user QP's geometry and the receive caps create_qp reports, as
/// `create_qp_common()` computes them (`set_rq_size()`, then
/// `set_user_sq_size()`).
pub fn user_qp(l: &QpLimits, r: &UserQpRequest) -> Result<(QpGeometry, RecvCap), VerbsError> {
    let (rq, rq_max_gs) = user_rq(l, r)?;
    let sq = user_sq(l, r)?;
    let cap = RecvCap {
        max_recv_wr: rq.wqe_cnt,
        max_recv_sge: rq_max_gs,
    };
    Ok((QpGeometry { sq, rq, rq_max_gs }, cap))
}

/// A CQ's size as `mlx4_ib_create_user_cq()` makes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqSize {
    /// Entries of the ring: `roundup_pow_of_two(cqe + 1)`.
    pub entries: u32,
    /// The `cqe` reported back (`ibcq.cqe`): `entries - 1`.
    pub cqe: u32,
}

impl CqSize {
    /// `log2(entries)`, the context's log size (`entries` is a power of
    /// two; no panic path for the kernel's objtool to trip on).
    pub const fn log_entries(&self) -> u8 {
        match self.entries.checked_ilog2() {
            Some(log) => log as u8,
            None => 0,
        }
    }

    /// Bytes of the ring with CQEs of `cqe_size` bytes.
    pub const fn bytes(&self, cqe_size: u32) -> u64 {
        self.entries as u64 * cqe_size as u64
    }
}

/// `mlx4_ib_create_user_cq()`: at most `max_cqes` (`caps.max_cqes`, the
/// device's CQ size less the spare entry resizing needs) asked for.
pub fn cq_size(cqe: u32, max_cqes: u32) -> Result<CqSize, VerbsError> {
    if cqe > max_cqes {
        return Err(VerbsError::Invalid);
    }
    let entries = cqe
        .checked_add(1)
        .and_then(u32::checked_next_power_of_two)
        .ok_or(VerbsError::Invalid)?;
    Ok(CqSize {
        entries,
        cqe: entries - 1,
    })
}

/// `mlx4_ib_resize_cq()`: the size a CQ of `cqe` (its `ibcq.cqe`) is
/// resized to when `entries` are asked for, checked as at creation; `None`
/// when that is its size already (nothing to do).
pub fn cq_resize(entries: u32, cqe: u32, max_cqes: u32) -> Result<Option<CqSize>, VerbsError> {
    cq_size(entries, max_cqes).map(|s| (s.cqe != cqe).then_some(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A ConnectX-3's (and the model's): 2^14 WQEs, 32 gathers,
    /// 1008-byte send descriptors.
    pub(crate) const CX3: QpLimits = QpLimits {
        max_wqes: 1 << 14,
        max_sq_sg: 32,
        max_rq_sg: 32,
        max_sq_desc_sz: 1008,
    };

    /// libmlx4 for ibv_rc_pingpong: rx_depth 500, 1 SGE; send depth 1, 1
    /// SGE, no inline: a 32-byte WQE in the least stride (64 B), and 1 +
    /// 33 spare WQEs rounded up to 64 (`mlx4_calc_sq_wqe_size`,
    /// `mlx4_create_qp_ex`).
    fn pingpong() -> UserQpRequest {
        UserQpRequest {
            max_recv_wr: 500,
            max_recv_sge: 1,
            log_sq_bb_count: 6,
            log_sq_stride: 6,
            inl_recv_sz: 0,
            srq: false,
        }
    }

    #[test]
    fn a_qp_on_an_srq_has_no_receive_queue() {
        // libmlx4 asks no receive WRs or gathers for a QP on an SRQ.
        let r = UserQpRequest {
            max_recv_wr: 0,
            max_recv_sge: 0,
            srq: true,
            ..pingpong()
        };
        let (g, cap) = user_qp(&CX3, &r).unwrap();
        assert_eq!((g.rq.wqe_cnt, g.rq_max_gs, g.rq.bytes()), (0, 0, 0));
        assert_eq!((cap.max_recv_wr, cap.max_recv_sge), (0, 0));
        assert_eq!(g.buf_size(), 64 * 64);
        assert_eq!(g.offsets().1, 0);
        // `rq_size_stride |= wqe_shift - 4` of a zeroed queue, as mainline.
        assert_eq!(g.rq.size_stride(), 0xfc);
        // Receive WRs with an SRQ: set_rq_size()'s -EINVAL.
        let bad = UserQpRequest {
            max_recv_wr: 1,
            ..r
        };
        assert_eq!(user_qp(&CX3, &bad), Err(VerbsError::Invalid));
    }

    #[test]
    fn rc_pingpong_geometry() {
        let (g, cap) = user_qp(&CX3, &pingpong()).unwrap();
        assert_eq!(
            g.rq,
            WorkQueue {
                wqe_cnt: 512,
                wqe_shift: 4
            }
        );
        assert_eq!(
            g.sq,
            WorkQueue {
                wqe_cnt: 64,
                wqe_shift: 6
            }
        );
        assert_eq!(g.buf_size(), 512 * 16 + 64 * 64);
        // The SQ's stride is the larger: it comes first.
        assert_eq!(g.offsets(), (64 * 64, 0));
        assert_eq!(
            cap,
            RecvCap {
                max_recv_wr: 512,
                max_recv_sge: 1
            }
        );
        // 2^9 entries, 16-byte stride (shift 4 - 4 = 0).
        assert_eq!(g.rq.size_stride(), 9 << 3);
        assert_eq!(g.sq.size_stride(), (6 << 3) | 2);
    }

    #[test]
    fn larger_receive_stride_comes_first() {
        let r = UserQpRequest {
            max_recv_sge: 8,
            ..pingpong()
        };
        let (g, _) = user_qp(&CX3, &r).unwrap();
        assert_eq!(g.rq.wqe_shift, 7);
        assert_eq!(g.offsets(), (0, 512 * 128));
        // A tie puts the SQ first.
        let r = UserQpRequest {
            max_recv_sge: 4,
            ..pingpong()
        };
        let (g, _) = user_qp(&CX3, &r).unwrap();
        assert_eq!(g.offsets(), (64 * 64, 0));
    }

    #[test]
    fn refusals_as_mainline() {
        let bad = |r: UserQpRequest| user_qp(&CX3, &r).unwrap_err();
        let ok = pingpong();
        assert_eq!(
            bad(UserQpRequest {
                max_recv_wr: 0,
                ..ok
            }),
            VerbsError::Invalid
        );
        assert_eq!(
            bad(UserQpRequest {
                max_recv_sge: 0,
                ..ok
            }),
            VerbsError::Invalid
        );
        assert_eq!(
            bad(UserQpRequest {
                max_recv_sge: 33,
                ..ok
            }),
            VerbsError::Invalid
        );
        let too_many = (1 << 14) - SQ_MAX_SPARE + 1;
        assert_eq!(
            bad(UserQpRequest {
                max_recv_wr: too_many,
                ..ok
            }),
            VerbsError::Invalid
        );
        assert_eq!(
            bad(UserQpRequest {
                log_sq_bb_count: 15,
                ..ok
            }),
            VerbsError::Invalid
        );
        assert_eq!(
            bad(UserQpRequest {
                log_sq_bb_count: 40,
                ..ok
            }),
            VerbsError::Invalid
        );
        assert_eq!(
            bad(UserQpRequest {
                log_sq_stride: 5,
                ..ok
            }),
            VerbsError::Invalid
        );
        // 1008 rounds up to 1024: stride 10 is the largest.
        assert!(user_qp(
            &CX3,
            &UserQpRequest {
                log_sq_stride: 10,
                ..ok
            }
        )
        .is_ok());
        assert_eq!(
            bad(UserQpRequest {
                log_sq_stride: 11,
                ..ok
            }),
            VerbsError::Invalid
        );
        assert_eq!(
            bad(UserQpRequest {
                inl_recv_sz: 64,
                ..ok
            }),
            VerbsError::NotSupported
        );
    }

    #[test]
    fn cq_resizes_as_mlx4_ib_resize_cq() {
        // 64 asked of a CQ of 127: the same ring, nothing to do.
        assert_eq!(cq_resize(64, 127, 65535), Ok(None));
        assert_eq!(
            cq_resize(200, 127, 65535),
            Ok(Some(CqSize {
                entries: 256,
                cqe: 255
            }))
        );
        assert_eq!(
            cq_resize(3, 127, 65535),
            Ok(Some(CqSize { entries: 4, cqe: 3 }))
        );
        assert_eq!(cq_resize(65536, 127, 65535), Err(VerbsError::Invalid));
    }

    #[test]
    fn cq_sizes_as_mlx4_ib_create_user_cq() {
        assert_eq!(cq_size(1, 65535), Ok(CqSize { entries: 2, cqe: 1 }));
        assert_eq!(
            cq_size(500, 65535),
            Ok(CqSize {
                entries: 512,
                cqe: 511
            })
        );
        assert_eq!(
            cq_size(511, 65535),
            Ok(CqSize {
                entries: 512,
                cqe: 511
            })
        );
        assert_eq!(
            cq_size(512, 65535),
            Ok(CqSize {
                entries: 1024,
                cqe: 1023
            })
        );
        assert_eq!(cq_size(0, 65535), Ok(CqSize { entries: 1, cqe: 0 }));
        assert_eq!(cq_size(65535, 65535).unwrap().entries, 65536);
        assert_eq!(cq_size(65536, 65535), Err(VerbsError::Invalid));
        assert_eq!(cq_size(512, 65535).unwrap().log_entries(), 10);
        assert_eq!(cq_size(500, 65535).unwrap().bytes(32), 512 * 32);
    }

    proptest! {
        #[test]
        fn accepted_queues_fit_the_device(
            wr in 0u32..40000, sge in 0u32..40, log_bb in 0u8..40, stride in 0u8..16,
        ) {
            let r = UserQpRequest {
                max_recv_wr: wr,
                max_recv_sge: sge,
                log_sq_bb_count: log_bb,
                log_sq_stride: stride,
                inl_recv_sz: 0,
                srq: false,
            };
            if let Ok((g, cap)) = user_qp(&CX3, &r) {
                prop_assert!(g.rq.wqe_cnt >= wr && g.rq.wqe_cnt <= CX3.max_wqes);
                prop_assert!(g.sq.wqe_cnt <= CX3.max_wqes);
                prop_assert!(g.rq_max_gs >= sge && g.rq_max_gs <= 32);
                prop_assert!((6..=10).contains(&g.sq.wqe_shift));
                prop_assert_eq!(1u32 << g.rq.wqe_shift, g.rq_max_gs * DATA_SEG_LEN);
                let (rq_off, sq_off) = g.offsets();
                // The two queues tile the buffer.
                prop_assert_eq!(sq_off.max(rq_off) + if sq_off > rq_off {
                    g.sq.bytes() } else { g.rq.bytes() }, g.buf_size());
                prop_assert_eq!(cap.max_recv_wr, g.rq.wqe_cnt);
            }
        }

        #[test]
        fn cq_entries_cover_the_request(cqe in 0u32..=65535) {
            let s = cq_size(cqe, 65535).unwrap();
            prop_assert!(s.entries > cqe && s.entries.is_power_of_two());
            prop_assert!(s.entries / 2 <= cqe);
            prop_assert_eq!(s.cqe, s.entries - 1);
        }
    }
}
