//! A QP's state (`enum mlx4_qp_state`, include/linux/mlx4/qp.h) and what
//! its send queue waits on besides it: a drain's notification, the send
//! doorbells that arrived while it could not run (SQD, an RNR wait), an
//! RNR retry pending (`datapath/rnr`).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpState {
    Init,
    Rtr,
    Rts,
    /// SQ error: a UD, UC or MLX QP's send WQE completed in error; its RQ
    /// still receives, its SQ flushes until SQERR2RTS.
    Sqe,
    /// SQ drained (RTS2SQD done): receives, takes no new send WQE.
    Sqd,
    /// RTS2SQD issued while a WQE is still in flight (an RNR retry
    /// pending): SQD once it completes (MLX4_QP_STATE_SQ_DRAINING, which
    /// `ib/qp.c:to_ib_qp_state` reports as SQD with `sq_draining`).
    SqDraining,
    Err,
}

impl QpState {
    /// mlx4 state encoding (flags bits 31..28).
    pub fn hw(self) -> u32 {
        match self {
            QpState::Init => 1,
            QpState::Rtr => 2,
            QpState::Rts => 3,
            QpState::Sqe => 4,
            QpState::Sqd => 5,
            QpState::Err => 6,
            QpState::SqDraining => 7,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QpState::Init => "init",
            QpState::Rtr => "rtr",
            QpState::Rts => "rts",
            QpState::Sqe => "sqe",
            QpState::Sqd => "sqd",
            QpState::SqDraining => "sq_draining",
            QpState::Err => "err",
        }
    }

    /// The states whose RQ takes incoming messages (IB 10.3.1: RTR, RTS,
    /// SQD and SQE all receive).
    pub fn accepts_incoming(self) -> bool {
        matches!(
            self,
            QpState::Rtr | QpState::Rts | QpState::Sqe | QpState::Sqd | QpState::SqDraining
        )
    }

    /// The states whose posted send WQEs are flushed, not executed.
    pub fn flushes(self) -> bool {
        matches!(self, QpState::Err | QpState::Sqe)
    }
}

/// An RNR NAK the requester will retry (`datapath/rnr`): the WQE at SQ
/// index `idx` (not consumed), its bytes, how many NAKs it drew, and when
/// the retry is due on the caller's timer clock (None: not yet scheduled,
/// the next tick schedules it `delay_ns` ahead).
#[derive(Debug, Clone)]
pub struct RnrWait {
    pub idx: u32,
    pub bytes: Vec<u8>,
    pub naks: u32,
    pub delay_ns: u64,
    pub due_ns: Option<u64>,
}

/// What a QP's send queue waits on besides its state.
#[derive(Debug, Clone, Default)]
pub struct SqHold {
    /// RTS2SQD's in_modifier bit 31 (`core/qp.c:__mlx4_qp_modify`:
    /// `qp->qpn | (!!sqd_event << 31)`): an SQ_DRAINED event once drained.
    pub sqd_event: bool,
    /// Send doorbells and BlueFlame bursts that arrived while the SQ could
    /// not run: announcements settled when it resumes.
    pub held: u32,
    /// SQD2RTS with held announcements: run them after the command.
    pub resume: bool,
    pub rnr: Option<RnrWait>,
}

impl SqHold {
    pub fn is_idle(&self) -> bool {
        !self.sqd_event && self.held == 0 && !self.resume && self.rnr.is_none()
    }
}
