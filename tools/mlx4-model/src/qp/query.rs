//! The context a QP keeps and QUERY_QP returns: what RST2INIT set, what
//! each later transition set over it, and the state, limits and queue
//! counters the model tracks itself.

use super::{Qp, QpState, PARAMS1, PARAMS2, QP_CTX_SIZE, RAE, RA_MAX_SHIFT, RRE, RWE};
use crate::bytes::{be32, put_be16, put_be32};

/// Where a later transition's fields lie in the context
/// (include/linux/mlx4/qp.h): mtu_msgmax, the primary path (0x2c bytes;
/// P_Key index at +0x03, ACK timeout at +0x08), the send PSN, the RNR
/// timer (bits 28..24) over the receive PSN, the Q_Key; params1's retry
/// counts (bits 18..16 and 15..13).
pub(super) const MTU_MSGMAX: usize = 0x08;
pub(super) const PRI_PATH: usize = 0x18;
/// The primary path's P_Key index and scheduling queue (port in bit 6).
const PKEY_INDEX: usize = PRI_PATH + 0x03;
pub(super) const SCHED_QUEUE: usize = PRI_PATH + 0x20;
const PATH_LEN: usize = 0x2c;
const NEXT_SEND_PSN: usize = 0x78;
const RNR_NEXTRECVPSN: usize = 0x94;
const QKEY: usize = 0xa8;
const RETRY_COUNT: u32 = 7 << 16;
const RNR_RETRY: u32 = 7 << 13;
const RNR_TIMER: u32 = 0x1f << 24;
/// `enum mlx4_qp_optpar` bits of the fields above.
const OPTPAR_PKEY_INDEX: u32 = 1 << 4;
const OPTPAR_Q_KEY: u32 = 1 << 5;
const OPTPAR_RNR_TIMEOUT: u32 = 1 << 6;
const OPTPAR_PRIMARY_ADDR_PATH: u32 = 1 << 7;
const OPTPAR_RETRY_COUNT: u32 = 1 << 12;
const OPTPAR_RNR_RETRY: u32 = 1 << 13;
const OPTPAR_ACK_TIMEOUT: u32 = 1 << 14;

impl Qp {
    /// Takes what a later transition's context `new` sets into the kept
    /// context, as firmware does (QUERY_QP returns it; mainline's
    /// `mlx4_ib_query_qp()` reads it back): INIT2RTR the attributes IB
    /// requires at RTR (path MTU, primary path, receive PSN and RNR timer),
    /// RTR2RTS those it requires at RTS (send PSN, retry counts, ACK
    /// timeout), any transition the optional ones `optpar` names.
    pub(super) fn keep_fields(&mut self, (from, to): (QpState, QpState), optpar: u32, new: &[u8]) {
        // The P_Key index lies in the path, but its own optpar bit says
        // whether it changes: a path without that bit keeps the index
        // (mainline's INIT2RTR carries the path, not the index).
        let pkey_index = if optpar & OPTPAR_PKEY_INDEX != 0 {
            new[PKEY_INDEX]
        } else {
            self.ctx[PKEY_INDEX]
        };
        let mut bytes =
            |off: usize, len: usize| self.ctx[off..off + len].copy_from_slice(&new[off..off + len]);
        let path = (optpar & OPTPAR_PRIMARY_ADDR_PATH != 0) || to == QpState::Rtr;
        if to == QpState::Rtr {
            bytes(MTU_MSGMAX, 1);
        }
        if path {
            bytes(PRI_PATH, PATH_LEN);
        }
        let rts = from == QpState::Rtr && to == QpState::Rts;
        if rts || optpar & OPTPAR_ACK_TIMEOUT != 0 {
            bytes(PRI_PATH + 0x08, 1);
        }
        if rts {
            bytes(NEXT_SEND_PSN, 4);
        }
        if optpar & OPTPAR_Q_KEY != 0 {
            bytes(QKEY, 4);
        }
        let mut bits = |off: usize, mask: u32| {
            let kept = be32(&self.ctx, off) & !mask | be32(new, off) & mask;
            put_be32(&mut self.ctx, off, kept);
        };
        if to == QpState::Rtr {
            bits(RNR_NEXTRECVPSN, 0xff_ffff | RNR_TIMER);
        } else if optpar & OPTPAR_RNR_TIMEOUT != 0 {
            bits(RNR_NEXTRECVPSN, RNR_TIMER);
        }
        if rts || optpar & OPTPAR_RETRY_COUNT != 0 {
            bits(PARAMS1, RETRY_COUNT);
        }
        if rts || optpar & OPTPAR_RNR_RETRY != 0 {
            bits(PARAMS1, RNR_RETRY);
        }
        self.ctx[PKEY_INDEX] = pkey_index;
    }

    /// The Q_Key (ctx 0xa8): RST2INIT's, or a later transition's with
    /// optpar Q_KEY.
    pub fn qkey(&self) -> u32 {
        be32(&self.ctx, QKEY)
    }

    /// The primary path's P_Key index (path +0x03): RST2INIT's, or a later
    /// transition's with optpar PKEY_INDEX.
    pub fn pkey_index(&self) -> u8 {
        self.ctx[PKEY_INDEX]
    }

    /// The path MTU (mtu_msgmax bits 7..5, IB's encoding: 1 = 256 bytes
    /// .. 5 = 4096) INIT2RTR set, 0 before.
    pub fn mtu(&self) -> u8 {
        self.ctx[MTU_MSGMAX] >> 5
    }

    /// QUERY_QP output: optpar 0, then the context with the current state,
    /// the destination, the access enables and read limits the
    /// transitions left (what `ib/qp.c:mlx4_ib_query_qp` decodes) and the
    /// RQ and SQ counters.
    pub fn query_mailbox(&self) -> [u8; 8 + QP_CTX_SIZE] {
        let mut mb = [0u8; 8 + QP_CTX_SIZE];
        mb[8..].copy_from_slice(&self.ctx);
        let flags = be32(&self.ctx, 0) & 0x0fff_ffff | (self.state.hw() << 28);
        put_be32(&mut mb, 8, flags);
        put_be32(&mut mb, 8 + 0x14, self.remote_qpn);
        let ra = 7 << RA_MAX_SHIFT;
        let sra = u32::from(self.sra_max) << RA_MAX_SHIFT;
        put_be32(&mut mb, 8 + PARAMS1, (be32(&self.ctx, PARAMS1) & !ra) | sra);
        let rra = u32::from(self.rra_max) << RA_MAX_SHIFT;
        let rwe = if self.rwe { RWE } else { 0 };
        let rre = if self.rre { RRE } else { 0 };
        let rae = if self.rae { RAE } else { 0 };
        let kept = be32(&self.ctx, PARAMS2) & !(ra | RWE | RRE | RAE);
        put_be32(&mut mb, 8 + PARAMS2, kept | rra | rwe | rre | rae);
        put_be16(&mut mb, 8 + 0xb4, self.rq_ci as u16);
        put_be16(&mut mb, 8 + 0xb6, self.sq_ci as u16);
        mb
    }
}
