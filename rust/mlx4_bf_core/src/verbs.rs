// SPDX-License-Identifier: GPL-2.0

//! The verbs vocabulary the RDMA provider's rules speak: the values of
//! `include/rdma/ib_verbs.h` (QP states, the `ib_qp_attr_mask` bits, path
//! MTUs, migration states, access flags, event types) and the two ways a
//! rule refuses, as the errno mlx4_ib returns.
//!
//! The provider converts the RDMA core's structs to these plain values; the
//! rules (`qp_size`, `qp_context`, `eqe`) never see a kernel type.

/// Why a rule refused: the errno mainline mlx4_ib returns in that case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerbsError {
    /// `-EINVAL`: a value out of range.
    Invalid,
    /// `-EOPNOTSUPP`: something this provider (or mlx4_ib) does not do.
    NotSupported,
    /// `-EACCES`: rights the memory was not pinned for
    /// (`ib_umem_check_rereg()`).
    Access,
    /// `-EPERM`: as `Access`, where mlx4_ib checks it itself.
    Permission,
}

/// `enum ib_qp_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpState {
    Reset = 0,
    Init = 1,
    Rtr = 2,
    Rts = 3,
    Sqd = 4,
    Sqe = 5,
    Err = 6,
}

impl QpState {
    /// The state a raw `enum ib_qp_state` value names.
    pub const fn from_raw(v: u32) -> Option<QpState> {
        Some(match v {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            6 => QpState::Err,
            _ => return None,
        })
    }

    /// `ib/qp.c:to_mlx4_state()`: `enum mlx4_qp_state` (SQD and SQE swap).
    pub const fn mlx4(self) -> u32 {
        match self {
            QpState::Reset => 0,
            QpState::Init => 1,
            QpState::Rtr => 2,
            QpState::Rts => 3,
            QpState::Sqe => 4,
            QpState::Sqd => 5,
            QpState::Err => 6,
        }
    }
}

/// `enum ib_qp_attr_mask`.
pub mod mask {
    pub const STATE: u32 = 1;
    pub const CUR_STATE: u32 = 1 << 1;
    pub const EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    pub const PKEY_INDEX: u32 = 1 << 4;
    pub const PORT: u32 = 1 << 5;
    pub const QKEY: u32 = 1 << 6;
    pub const AV: u32 = 1 << 7;
    pub const PATH_MTU: u32 = 1 << 8;
    pub const TIMEOUT: u32 = 1 << 9;
    pub const RETRY_CNT: u32 = 1 << 10;
    pub const RNR_RETRY: u32 = 1 << 11;
    pub const RQ_PSN: u32 = 1 << 12;
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    pub const ALT_PATH: u32 = 1 << 14;
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    pub const SQ_PSN: u32 = 1 << 16;
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    pub const PATH_MIG_STATE: u32 = 1 << 18;
    pub const CAP: u32 = 1 << 19;
    pub const DEST_QPN: u32 = 1 << 20;
    /// `IB_QP_ATTR_STANDARD_BITS`: `GENMASK(20, 0)`.
    pub const STANDARD_BITS: u32 = (1 << 21) - 1;
}

/// `enum ib_mtu`.
pub mod mtu {
    pub const MTU_256: u8 = 1;
    pub const MTU_1024: u8 = 3;
    pub const MTU_2048: u8 = 4;
    pub const MTU_4096: u8 = 5;
}

/// `enum ib_mig_state`.
pub mod mig {
    pub const MIGRATED: u8 = 0;
    pub const REARM: u8 = 1;
    pub const ARMED: u8 = 2;
}

/// `enum ib_access_flags` (`IB_UVERBS_ACCESS_*`).
pub mod access {
    pub const LOCAL_WRITE: u32 = 1 << 0;
    pub const REMOTE_WRITE: u32 = 1 << 1;
    pub const REMOTE_READ: u32 = 1 << 2;
    pub const REMOTE_ATOMIC: u32 = 1 << 3;
    pub const MW_BIND: u32 = 1 << 4;

    /// `ib_access_writable()`: memory with these rights may be written,
    /// so it is pinned writable.
    pub const fn writable(access: u32) -> bool {
        access & (LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC | MW_BIND) != 0
    }

    /// `mlx4_ib_rereg_user_mr()`'s check of a region's new rights (`new`,
    /// if they change) against the rights its memory was pinned with:
    /// writable rights over memory pinned read-only are `-EACCES`
    /// (`ib_umem_check_rereg()`) where the memory stays, `-EPERM` (its own
    /// check, before it pins the new) where the translation changes too.
    pub const fn rereg_check(
        new: Option<u32>,
        translation: bool,
        pinned: u32,
    ) -> Result<(), super::VerbsError> {
        match new {
            Some(a) if writable(a) && !writable(pinned) => Err(if translation {
                super::VerbsError::Permission
            } else {
                super::VerbsError::Access
            }),
            _ => Ok(()),
        }
    }
}

/// `IB_RATE_2_5_GBPS` of `enum ib_rate`.
pub const IB_RATE_2_5_GBPS: u8 = 2;

/// `enum ib_event_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IbEvent {
    CqErr = 0,
    QpFatal = 1,
    QpReqErr = 2,
    QpAccessErr = 3,
    CommEst = 4,
    SqDrained = 5,
    PathMig = 6,
    PathMigErr = 7,
    DeviceFatal = 8,
    PortActive = 9,
    PortErr = 10,
    SrqErr = 14,
    SrqLimitReached = 15,
    QpLastWqeReached = 16,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rereg_rights_as_mlx4_ib_rereg_user_mr() {
        use access::*;
        let ro = REMOTE_READ;
        // Writable rights over read-only memory: EACCES, EPERM with a new
        // translation; the same rights, or memory pinned writable: fine.
        assert_eq!(
            rereg_check(Some(LOCAL_WRITE), false, ro),
            Err(VerbsError::Access)
        );
        assert_eq!(
            rereg_check(Some(REMOTE_ATOMIC), true, ro),
            Err(VerbsError::Permission)
        );
        assert_eq!(rereg_check(Some(REMOTE_READ), false, ro), Ok(()));
        assert_eq!(rereg_check(Some(REMOTE_WRITE), false, LOCAL_WRITE), Ok(()));
        assert_eq!(rereg_check(None, true, ro), Ok(()));
    }

    #[test]
    fn states_round_trip_and_map_as_to_mlx4_state() {
        for v in 0..7 {
            let s = QpState::from_raw(v).unwrap();
            assert_eq!(s as u32, v);
        }
        assert_eq!(QpState::from_raw(7), None);
        assert_eq!(QpState::Sqd.mlx4(), 5);
        assert_eq!(QpState::Sqe.mlx4(), 4);
        assert_eq!(QpState::Err.mlx4(), 6);
    }

    #[test]
    fn standard_bits_end_at_dest_qpn() {
        assert_eq!(mask::STANDARD_BITS, 0x1f_ffff);
        assert_eq!(mask::DEST_QPN & mask::STANDARD_BITS, mask::DEST_QPN);
    }
}
