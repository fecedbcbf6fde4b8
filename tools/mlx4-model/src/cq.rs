//! Completion queues (§5.1–5.3): 32-byte CQEs, the doorbell record that
//! holds the consumer index, arming through the UAR CQ doorbell, and the
//! overrun: an async CQ_ERROR event, after which the CQ writes nothing.
//! The CQ table owns the CQs and executes SW2HW_CQ and HW2SW_CQ, and
//! MODIFY_CQ (`modify`: resize, moderation).

use crate::bytes::{addr40, be16, be32, be64, hex, put_be16, put_be32};
use crate::command::{
    owner_init, read_mailbox, write_mailbox, CmdError, CmdResult, CommandRequest,
};
use crate::env::Env;
use crate::eq::{event, EqTable};
use crate::firmware::Firmware;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::layout::{CQE_SIZE, LOG_MAX_CQ_SZ, UAR_CQ_DB};
use crate::protocol::Code;
use crate::qbuf::QueueBuf;
use crate::timing::Read;
use serde_json::json;
use std::collections::BTreeMap;

mod modify;

pub use modify::CQE_OPCODE_RESIZE;

pub const CQ_CTX_SIZE: usize = 0x40;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arm {
    /// cmd 1: only solicited completions (the model's send CQEs never are;
    /// error CQEs always are).
    Solicited,
    /// cmd 2: the next completion.
    Any,
}

#[derive(Debug, Clone)]
pub struct Cq {
    pub cqn: u32,
    pub log_size: u8,
    pub uar: u32,
    pub comp_eqn: u8,
    pub buf: QueueBuf,
    pub db_rec: u64,
    /// Producer index (24 bits): the next CQE the model writes.
    pub pi: u32,
    pub arm: Option<Arm>,
    /// Overrun: no CQE is written any more (until HW2SW_CQ).
    pub error: bool,
    ctx: [u8; CQ_CTX_SIZE],
}

/// Error CQE syndromes (CQE + 0x1b, `MLX4_CQE_SYNDROME_*`).
pub mod syndrome {
    pub const LOCAL_LENGTH_ERR: u8 = 0x01;
    pub const LOCAL_QP_OP_ERR: u8 = 0x02;
    pub const LOCAL_PROT_ERR: u8 = 0x04;
    pub const WR_FLUSH_ERR: u8 = 0x05;
    pub const REMOTE_INVAL_REQ_ERR: u8 = 0x12;
    pub const REMOTE_ACCESS_ERR: u8 = 0x13;
    pub const REMOTE_OP_ERR: u8 = 0x14;
    pub const TRANSPORT_RETRY_EXC_ERR: u8 = 0x15;
    pub const RNR_RETRY_EXC_ERR: u8 = 0x16;
}

/// CQE byte 0x1f: IS_SEND.
pub const CQE_IS_SEND: u8 = 0x40;
/// CQE byte 0x1f: the opcode of an error completion.
pub const CQE_OPCODE_ERROR: u8 = 0x1e;

/// An error CQE: my_qpn, wqe_index, syndrome, opcode 0x1e (IS_SEND on the
/// send side).
pub fn error_cqe(qpn: u32, wqe_index: u32, syndrome: u8, is_send: bool) -> [u8; 32] {
    let mut cqe = [0u8; 32];
    put_be32(&mut cqe, 0x00, qpn & 0xff_ffff);
    put_be16(&mut cqe, 0x18, wqe_index as u16);
    cqe[0x1b] = syndrome;
    cqe[0x1f] = if is_send { CQE_IS_SEND } else { 0 } | CQE_OPCODE_ERROR;
    cqe
}

/// CQ_ERROR syndrome (EQE + 0x0f, `event.cq_err.syndrome`).
pub const CQ_ERROR_OVERRUN: u8 = 0x01;

impl Cq {
    /// `core/cq.c:mlx4_cq_alloc`: 0x0c `log2(nent) << 24 | uar`, 0x17
    /// comp_eqn, 0x38 the doorbell record; the CQEs are on the pages the
    /// MTT entries from 0x1b/0x1c name, each 4 KiB << log_page_size
    /// (0x18); page_offset (0x0a) must be 0.
    pub(crate) fn parse<M: GuestMemory, I: Irq>(
        cqn: u32,
        ctx: &[u8],
        num_uars: u32,
        env: &mut Env<M, I>,
        fw: &Firmware,
    ) -> Result<Cq, CmdError> {
        let w = be32(ctx, 0x0c);
        let log_size = (w >> 24) as u8;
        if log_size > LOG_MAX_CQ_SZ {
            return Err(CmdError::BadSize);
        }
        if w & 0xff_ffff >= num_uars || be16(ctx, 0x0a) != 0 || ctx[0x18] > 19 {
            return Err(CmdError::BadParam);
        }
        let bytes = (1u64 << log_size) * CQE_SIZE;
        let buf = fw.queue_buf(env, addr40(ctx, 0x1b, 0x1c), ctx[0x18], bytes)?;
        Cq::new(cqn, ctx, buf)
    }

    /// The CQ of a checked context; the doorbell record (0x38) must be
    /// nonzero and 8-byte aligned.
    fn new(cqn: u32, ctx: &[u8], buf: QueueBuf) -> Result<Cq, CmdError> {
        let w = be32(ctx, 0x0c);
        let db_rec = be64(ctx, 0x38);
        if db_rec == 0 || !db_rec.is_multiple_of(8) {
            return Err(CmdError::BadParam);
        }
        let mut c = [0u8; CQ_CTX_SIZE];
        c.copy_from_slice(&ctx[..CQ_CTX_SIZE]);
        Ok(Cq {
            cqn,
            log_size: (w >> 24) as u8,
            uar: w & 0xff_ffff,
            comp_eqn: ctx[0x17],
            buf,
            db_rec,
            pi: 0,
            arm: None,
            error: false,
            ctx: c,
        })
    }

    pub fn nent(&self) -> u32 {
        1 << self.log_size
    }

    /// (cq_max_count, cq_period) as SW2HW_CQ or MODIFY_CQ set them
    /// (recorded, not applied: `modify`).
    pub fn moderation(&self) -> (u16, u16) {
        (be16(&self.ctx, 0x12), be16(&self.ctx, 0x10))
    }

    pub fn context(&self) -> [u8; CQ_CTX_SIZE] {
        let mut c = self.ctx;
        put_be32(&mut c, 0x2c, self.pi);
        c
    }
}

/// The CQs in hardware ownership, and the first halves of CQ doorbells
/// written as two 32-bit writes.
#[derive(Debug, Clone, Default)]
pub struct CqTable {
    cqs: BTreeMap<u32, Cq>,
    /// First half (dword0) of a CQ doorbell sent as two 32-bit writes, per UAR.
    db_half: BTreeMap<u32, u32>,
}

impl CqTable {
    pub fn get(&self, cqn: u32) -> Option<&Cq> {
        self.cqs.get(&cqn)
    }

    pub fn contains(&self, cqn: u32) -> bool {
        self.cqs.contains_key(&cqn)
    }

    /// CQs in hardware ownership.
    pub fn len(&self) -> usize {
        self.cqs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cqs.is_empty()
    }

    /// A CQ completes to EQ `eqn`.
    pub fn uses_eq(&self, eqn: u8) -> bool {
        self.cqs.values().any(|cq| cq.comp_eqn == eqn)
    }

    /// Writes `cqe` (owner bit added here) to CQ `cqn` for QP `qpn`, unless
    /// the CQ is in the error state or the doorbell record says it is full
    /// (the overrun puts it there). Then the EQE if armed. Returns the
    /// clock when the CQE's DMA write completed; None if none was written.
    pub(crate) fn post_cqe<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        eqs: &mut EqTable,
        cqn: u32,
        qpn: u32,
        mut cqe: [u8; 32],
        solicited: bool,
    ) -> Option<u64> {
        let cq = self.cqs.get(&cqn)?;
        let (db_rec, nent, idx) = (cq.db_rec, cq.nent(), cq.pi);
        if cq.error {
            Self::drop_cqe(env, cqn, qpn, "cq_error");
            return None;
        }
        let mut rec = [0u8; 8];
        if env
            .dma_read(db_rec, &mut rec, "db_rec", Read::Cached)
            .is_err()
        {
            return None;
        }
        let set_ci = be32(&rec, 0) & 0xff_ffff;
        if idx.wrapping_sub(set_ci) & 0xff_ffff >= nent {
            self.overrun(env, eqs, cqn, qpn, idx, set_ci);
            return None;
        }
        if idx & nent != 0 {
            cqe[31] |= 0x80;
        } else {
            cqe[31] &= !0x80;
        }
        let addr = cq.buf.addr(u64::from(idx & (nent - 1)) * CQE_SIZE);
        if env.dma_write(addr, &cqe, "cqe").is_err() {
            return None;
        }
        let done = env.clock.now();
        env.counters.global.cqes += 1;
        env.counters.qp(qpn).cqes += 1;
        env.trace.record(
            "cqe",
            || json!({"cqn": cqn, "index": idx, "qpn": qpn, "bytes": hex(&cqe)}),
        );
        let cq = self.cqs.get_mut(&cqn)?;
        cq.pi = (idx + 1) & 0xff_ffff;
        let fire = match cq.arm {
            Some(Arm::Any) => true,
            Some(Arm::Solicited) => solicited,
            None => false,
        };
        if fire {
            cq.arm = None;
            let eqn = cq.comp_eqn;
            Self::completion_event(env, eqs, eqn, cqn);
        }
        Some(done)
    }

    fn drop_cqe<M: GuestMemory, I: Irq>(env: &mut Env<M, I>, cqn: u32, qpn: u32, why: &str) {
        env.counters.global.cqes_dropped += 1;
        env.trace.record(
            "cqe_dropped",
            || json!({"cqn": cqn, "qpn": qpn, "reason": why}),
        );
    }

    /// The producer is `nent` ahead of set_ci. set_ci lives in memory the
    /// application writes, so this is the application's overrun, not a
    /// driver error: the CQ goes to the error state (every later CQE is
    /// dropped) and a CQ_ERROR EQE goes to the EQ async events are mapped
    /// to, if any.
    fn overrun<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        eqs: &mut EqTable,
        cqn: u32,
        qpn: u32,
        idx: u32,
        set_ci: u32,
    ) {
        if let Some(cq) = self.cqs.get_mut(&cqn) {
            cq.error = true;
        }
        env.counters.global.cq_overruns += 1;
        env.trace.record(
            "cq_error",
            || json!({"cqn": cqn, "syndrome": CQ_ERROR_OVERRUN, "producer": idx, "set_ci": set_ci}),
        );
        Self::drop_cqe(env, cqn, qpn, "overrun");
        let mut body = [0u8; 24];
        put_be32(&mut body, 0, cqn & 0xff_ffff); // EQE+0x04
        body[0x0b] = CQ_ERROR_OVERRUN; // EQE+0x0f
        eqs.post_event(env, event::CQ_ERROR, &body);
    }

    fn completion_event<M: GuestMemory, I: Irq>(
        env: &mut Env<M, I>,
        eqs: &mut EqTable,
        eqn: u8,
        cqn: u32,
    ) {
        let mut body = [0u8; 24];
        put_be32(&mut body, 0, cqn & 0xff_ffff); // EQE+0x04
        eqs.post_eqe(env, eqn, event::COMP, &body);
    }

    /// UAR +0x20: one 64-bit write, or 32-bit writes of +0x20 then +0x24.
    pub(crate) fn doorbell_write<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        eqs: &mut EqTable,
        page: u32,
        in_page: u64,
        data: &[u8],
    ) {
        match (in_page, data.len()) {
            (UAR_CQ_DB, 8) => {
                if let Some(old) = self.db_half.remove(&page) {
                    Self::doorbell_incomplete(env, page, old);
                }
                self.doorbell(env, eqs, page, be32(data, 0), be32(data, 4));
            }
            (UAR_CQ_DB, 4) => {
                if let Some(old) = self.db_half.insert(page, be32(data, 0)) {
                    Self::doorbell_incomplete(env, page, old);
                }
            }
            (_, 4) => match self.db_half.remove(&page) {
                Some(dw0) => self.doorbell(env, eqs, page, dw0, be32(data, 0)),
                None => env.protocol_error(
                    Code::CqDoorbellIncomplete,
                    format!("UAR {page}: CQ doorbell +0x24 without +0x20 first"),
                ),
            },
            (o, n) => env.protocol_error(
                Code::CqDoorbellBadSize,
                format!("UAR {page}: {n}-byte CQ doorbell write at +{o:#x}"),
            ),
        }
    }

    fn doorbell_incomplete<M: GuestMemory, I: Irq>(env: &mut Env<M, I>, page: u32, dw0: u32) {
        env.protocol_error(
            Code::CqDoorbellIncomplete,
            format!("UAR {page}: CQ doorbell dword0 {dw0:#010x} never got its dword1"),
        );
    }

    fn doorbell<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        eqs: &mut EqTable,
        page: u32,
        dw0: u32,
        dw1: u32,
    ) {
        let cqn = dw0 & 0xff_ffff;
        let cmd = (dw0 >> 24) & 0x7;
        let Some(cq) = self.cqs.get(&cqn) else {
            env.protocol_error(
                Code::CqDoorbellUnknownCq,
                format!("UAR {page}: CQ doorbell for CQ {cqn:#x}, which does not exist"),
            );
            return;
        };
        if cq.uar != page {
            let detail = format!(
                "CQ {cqn:#x} armed through UAR {page}; its context names UAR {}",
                cq.uar
            );
            env.protocol_error(Code::CqDoorbellForeignUar, detail);
            return;
        }
        let arm = match cmd {
            1 => Arm::Solicited,
            2 => Arm::Any,
            _ => {
                env.protocol_error(
                    Code::CqDoorbellBadCmd,
                    format!("CQ doorbell cmd {cmd} (1 solicited, 2 any)"),
                );
                return;
            }
        };
        let ci = dw1 & 0xff_ffff;
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return;
        };
        cq.arm = Some(arm);
        // Arming behind unpolled CQEs reports them at once.
        if arm == Arm::Any && cq.pi != ci {
            cq.arm = None;
            let eqn = cq.comp_eqn;
            Self::completion_event(env, eqs, eqn, cqn);
        }
    }

    /// The CQ in_mod names: below INIT_HCA's CQ count (mlx4 allocates
    /// CQNs from a bitmap its profile sizes, whatever QUERY_DEV_CAP
    /// advertised, `core/cq.c:mlx4_init_cq_table`).
    fn cqn(in_mod: u32, fw: &Firmware) -> Result<u32, CmdError> {
        let p = fw.hca().ok_or(CmdError::BadSysState)?;
        let limit = 1u64 << p.cqc.log_num.min(24);
        if u64::from(in_mod) >= limit {
            return Err(CmdError::BadIndex);
        }
        Ok(in_mod)
    }

    /// SW2HW_CQ: CQ in_mod from the mailbox's context (opmod 1: the
    /// buffer is not initialised).
    pub(crate) fn sw2hw<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        eqs: &EqTable,
        num_uars: u32,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        let cqn = Self::cqn(r.in_mod, fw)?;
        if self.cqs.contains_key(&cqn) {
            return Err(CmdError::BadResState);
        }
        if r.op_mod > 1 {
            return Err(CmdError::BadParam);
        }
        let ctx = read_mailbox(env, r.in_param, CQ_CTX_SIZE)?;
        let cq = Cq::parse(cqn, &ctx, num_uars, env, fw)?;
        if !eqs.exists(cq.comp_eqn) {
            return Err(CmdError::BadResource);
        }
        if r.op_mod == 0 {
            owner_init(env, &cq.buf, cq.nent(), CQE_SIZE)?;
        }
        self.cqs.insert(cqn, cq);
        Ok(None)
    }

    /// HW2SW_CQ; `in_use(cqn)`: a QP completes to it, so it stays.
    pub(crate) fn hw2sw<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
        in_use: impl Fn(u32) -> bool,
    ) -> CmdResult {
        let cqn = Self::cqn(r.in_mod, fw)?;
        let Some(cq) = self.cqs.get(&cqn) else {
            return Err(CmdError::BadResState);
        };
        if in_use(cqn) {
            return Err(CmdError::ResourceBusy);
        }
        let ctx = cq.context();
        match r.op_mod {
            0 => write_mailbox(env, r.out_param, &ctx)?,
            1 => {}
            _ => return Err(CmdError::BadParam),
        }
        self.cqs.remove(&cqn);
        self.db_half.retain(|_, dw0| *dw0 & 0xff_ffff != cqn);
        Ok(None)
    }
}
