//! The transitions past RTS and the ones that keep a state
//! (`core/qp.c:__mlx4_qp_modify`'s `op[][]`, opcodes from
//! include/linux/mlx4/cmd.h): INIT2INIT 0x2d, RTS2RTS 0x1c, RTS2SQD 0x1f,
//! SQD2SQD 0x38, SQD2RTS 0x20, SQERR2RTS 0x1d. Each takes the mailbox every
//! QP command takes (optpar at byte 0, the context at byte 8) and changes
//! only what its optpar names; a QP not in the transition's source state
//! (RESET included) is BAD_QP_STATE, as INIT2RTR from RESET is.
//!
//! Strict: an optpar bit IB's `qp_state_table` (`core/verbs.c`) does not
//! allow for the transition and service type is BAD_PARAM, counted
//! (`qp_optpar_refused`). mlx4_ib turns each allowed attribute into its
//! bits (`ib/qp.c:__mlx4_ib_modify_qp`): ACCESS_FLAGS (and
//! MAX_DEST_RD_ATOMIC) RWE|RRE|RAE, ALT_PATH ALT_ADDR_PATH, PATH_MIG_STATE
//! PM_STATE, MIN_RNR_TIMER RNR_TIMEOUT, QKEY Q_KEY, PKEY_INDEX PKEY_INDEX,
//! AV PRIMARY_ADDR_PATH|SCHED_QUEUE, PORT (SQD2SQD without AV)
//! SCHED_QUEUE, TIMEOUT ACK_TIMEOUT, RETRY_CNT RETRY_COUNT, RNR_RETRY
//! RNR_RETRY, MAX_QP_RD_ATOMIC SRA_MAX, MAX_DEST_RD_ATOMIC RRA_MAX.

use super::{
    qpn, ra_max, service, Qp, QpState, QpTable, SqHold, OPTPAR_RAE, OPTPAR_RRA_MAX, OPTPAR_RRE,
    OPTPAR_RWE, OPTPAR_SRA_MAX, PARAMS1, PARAMS2, QP_MAILBOX_LEN, RAE, RRE, RWE,
};
use crate::bytes::{be32, put_be32};
use crate::command::{op, read_mailbox, CmdError, CmdResult, CommandRequest};
use crate::env::Env;
use crate::eq::EqTable;
use crate::firmware::Firmware;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use serde_json::json;

/// `enum mlx4_qp_optpar` bits this file names.
const ALT: u32 = 1;
const ACCESS: u32 = OPTPAR_RRE | OPTPAR_RAE | OPTPAR_RWE;
const PKEY: u32 = 1 << 4;
const QKEY: u32 = 1 << 5;
const RNR_TIMEOUT: u32 = 1 << 6;
const PRI_PATH: u32 = 1 << 7;
const PM_STATE: u32 = 1 << 10;
const RETRY: u32 = 1 << 12;
const RNR_RETRY: u32 = 1 << 13;
const ACK: u32 = 1 << 14;
const SCHED: u32 = 1 << 16;
/// The alternate path (ctx 0x44, 0x2c bytes) and the migration state
/// (flags bits 12..11).
const ALT_PATH: usize = 0x44;
const PATH_LEN: usize = 0x2c;
const PM_BITS: u32 = 3 << 11;
/// The primary path's rlid (path +0x06).
const RLID: usize = 0x18 + 0x06;
/// rnr_nextrecvpsn (ctx 0x94) bits 28..24: the responder's min RNR timer
/// (`ib/qp.c`: `attr->min_rnr_timer << 24`); params1 bits 15..13: the
/// requester's RNR retry count (`attr->rnr_retry << 13`).
const RNR_NEXTRECVPSN: usize = 0x94;
/// MLX4_EVENT_TYPE_SQ_DRAINED (include/linux/mlx4/device.h).
pub const EVENT_SQ_DRAINED: u8 = 0x03;

/// A transition this file executes: (opcode, from, to).
const TRANSITIONS: [(u16, QpState, QpState); 6] = [
    (op::INIT2INIT_QP, QpState::Init, QpState::Init),
    (op::RTS2RTS_QP, QpState::Rts, QpState::Rts),
    (op::RTS2SQD_QP, QpState::Rts, QpState::Sqd),
    (op::SQD2SQD_QP, QpState::Sqd, QpState::Sqd),
    (op::SQD2RTS_QP, QpState::Sqd, QpState::Rts),
    (op::SQERR2RTS_QP, QpState::Sqe, QpState::Rts),
];

/// The optpar bits IB allows for `opcode` on service type `st`.
fn allowed(opcode: u16, st: u8) -> u32 {
    let datagram = matches!(st, service::UD | service::MLX);
    let rc = st == service::RC;
    match opcode {
        op::INIT2INIT_QP if datagram => PKEY | QKEY,
        op::INIT2INIT_QP => PKEY | ACCESS,
        op::RTS2RTS_QP | op::SQD2RTS_QP if datagram => QKEY,
        op::RTS2RTS_QP | op::SQD2RTS_QP if rc => ACCESS | ALT | PM_STATE | RNR_TIMEOUT,
        op::RTS2RTS_QP | op::SQD2RTS_QP => ACCESS | ALT | PM_STATE,
        op::SQD2SQD_QP if datagram => PKEY | QKEY,
        op::SQD2SQD_QP if rc => {
            SCHED
                | PRI_PATH
                | ACK
                | RETRY
                | RNR_RETRY
                | OPTPAR_SRA_MAX
                | OPTPAR_RRA_MAX
                | ALT
                | ACCESS
                | PKEY
                | RNR_TIMEOUT
                | PM_STATE
        }
        op::SQD2SQD_QP => PRI_PATH | SCHED | ALT | ACCESS | PKEY | PM_STATE,
        op::SQERR2RTS_QP if datagram => QKEY,
        op::SQERR2RTS_QP if st == service::UC => ACCESS,
        _ => 0,
    }
}

impl Qp {
    /// The access enables and read limits `optpar` names, from the
    /// context `ctx` (any transition after RST2INIT).
    pub(super) fn apply_optpar(&mut self, optpar: u32, ctx: &[u8]) {
        // `ib/qp.c:to_mlx4_access_flags`, sent with OPTPAR_RWE
        // whenever the access flags or max_dest_rd_atomic change.
        if optpar & OPTPAR_RWE != 0 {
            self.rwe = be32(ctx, PARAMS2) & RWE != 0;
        }
        if optpar & OPTPAR_RRE != 0 {
            self.rre = be32(ctx, PARAMS2) & RRE != 0;
        }
        if optpar & OPTPAR_RAE != 0 {
            self.rae = be32(ctx, PARAMS2) & RAE != 0;
        }
        if optpar & OPTPAR_SRA_MAX != 0 {
            self.sra_max = ra_max(be32(ctx, PARAMS1));
        }
        if optpar & OPTPAR_RRA_MAX != 0 {
            self.rra_max = ra_max(be32(ctx, PARAMS2));
        }
    }

    /// What only the transitions of this file take: the alternate path
    /// (kept for QUERY_QP; the model has one port and never migrates), the
    /// migration state, and a new primary path's destination LID.
    fn apply_paths(&mut self, optpar: u32, ctx: &[u8]) {
        if optpar & ALT != 0 {
            self.ctx[ALT_PATH..ALT_PATH + PATH_LEN]
                .copy_from_slice(&ctx[ALT_PATH..ALT_PATH + PATH_LEN]);
        }
        if optpar & PM_STATE != 0 {
            let flags = be32(&self.ctx, 0) & !PM_BITS | be32(ctx, 0) & PM_BITS;
            put_be32(&mut self.ctx, 0, flags);
        }
        if optpar & PRI_PATH != 0 {
            self.rlid = u16::from_be_bytes([ctx[RLID], ctx[RLID + 1]]);
        }
    }

    /// The requester's RNR retry count (params1 bits 15..13; 7: forever),
    /// RTR2RTS's or a later transition's with optpar RNR_RETRY.
    pub fn rnr_retry(&self) -> u8 {
        ((be32(&self.ctx, PARAMS1) >> 13) & 7) as u8
    }

    /// The responder's min RNR timer (ctx 0x94 bits 28..24, IB's encoding,
    /// `ib_verbs.h` IB_RNR_TIMER_*), INIT2RTR's or a later transition's
    /// with optpar RNR_TIMEOUT.
    pub fn min_rnr_timer(&self) -> u8 {
        ((be32(&self.ctx, RNR_NEXTRECVPSN) >> 24) & 0x1f) as u8
    }
}

impl QpTable {
    /// What QP `qpn`'s SQ waits on, if anything.
    pub fn hold(&self, qpn: u32) -> Option<&SqHold> {
        self.holds.get(&qpn)
    }

    /// Its hold, created if need be.
    pub fn hold_mut(&mut self, qpn: u32) -> &mut SqHold {
        self.holds.entry(qpn).or_default()
    }

    /// Drops an idle hold.
    pub fn tidy_hold(&mut self, qpn: u32) {
        if self.holds.get(&qpn).is_some_and(SqHold::is_idle) {
            self.holds.remove(&qpn);
        }
    }

    /// QPs with a hold.
    pub fn held_qpns(&self) -> Vec<u32> {
        self.holds.keys().copied().collect()
    }

    /// An RNR retry waits on QP `qpn`'s SQ.
    pub fn rnr_pending(&self, qpn: u32) -> bool {
        self.holds.get(&qpn).is_some_and(|h| h.rnr.is_some())
    }

    /// INIT2INIT, RTS2RTS, RTS2SQD, SQD2SQD, SQD2RTS, SQERR2RTS.
    pub(crate) fn modify<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        eqs: &mut EqTable,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        let Some(&(opcode, from, to)) = TRANSITIONS.iter().find(|t| t.0 == r.opcode) else {
            return Err(CmdError::BadOp);
        };
        let qpn = qpn(r.in_mod, fw)?;
        let state = self.qps.get(&qpn).map(|qp| (qp.state, qp.service));
        let Some((cur, st)) = state else {
            return Err(CmdError::BadQpState);
        };
        // SQD2RTS may leave a drain still under way (its event then never
        // comes); SQD2SQD needs the drain done (IB 10.3.1: the attributes
        // change once the SQ is drained).
        let draining_ok = opcode == op::SQD2RTS_QP && cur == QpState::SqDraining;
        if cur != from && !draining_ok {
            return Err(CmdError::BadQpState);
        }
        let mb = read_mailbox(env, r.in_param, QP_MAILBOX_LEN)?;
        let (optpar, ctx) = (be32(&mb, 0), &mb[8..]);
        if optpar & !allowed(opcode, st) != 0 {
            env.counters.global.qp_optpar_refused += 1;
            env.trace.record("qp_refused", || {
                json!({"qpn": qpn, "opcode": opcode, "optpar": optpar,
                       "allowed": allowed(opcode, st)})
            });
            return Err(CmdError::BadParam);
        }
        let rnr = self.rnr_pending(qpn);
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return Err(CmdError::BadQpState);
        };
        qp.keep_fields((from, to), optpar, ctx);
        qp.apply_optpar(optpar, ctx);
        qp.apply_paths(optpar, ctx);
        qp.state = match opcode {
            op::RTS2SQD_QP if rnr => QpState::SqDraining,
            _ => to,
        };
        qp.record(env);
        match opcode {
            op::RTS2SQD_QP => {
                self.hold_mut(qpn).sqd_event = r.in_mod & (1 << 31) != 0;
                if !rnr {
                    self.sq_drained(env, eqs, qpn);
                }
            }
            op::SQD2RTS_QP | op::SQERR2RTS_QP => {
                let h = self.hold_mut(qpn);
                h.sqd_event = false;
                h.resume = h.held > 0;
            }
            _ => {}
        }
        self.tidy_hold(qpn);
        Ok(None)
    }

    /// QP `qpn`'s SQ has drained (RTS2SQD with nothing in flight, or the
    /// last WQE in flight completed): SQD, and the SQ_DRAINED event
    /// (`core/eq.c:mlx4_eq_int`: the QPN at EQE byte 4) if RTS2SQD asked
    /// for it.
    pub(crate) fn sq_drained<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        eqs: &mut EqTable,
        qpn: u32,
    ) {
        if let Some(qp) = self.qps.get_mut(&qpn) {
            qp.state = QpState::Sqd;
        }
        let notify = std::mem::take(&mut self.hold_mut(qpn).sqd_event);
        self.tidy_hold(qpn);
        let mut posted = false;
        if notify {
            let mut body = [0u8; 24];
            put_be32(&mut body, 0, qpn & 0xff_ffff);
            posted = eqs.post_event(env, EVENT_SQ_DRAINED, &body);
            env.counters.global.sq_drained_events += 1;
        }
        env.trace.record(
            "sq_drained",
            || json!({"qpn": qpn, "notify": notify, "posted": posted}),
        );
    }
}
