//! Completion queues (§5.1–5.3): 32-byte CQEs, the doorbell record that
//! holds the consumer index, arming through the UAR CQ doorbell, and the
//! overrun: an async CQ_ERROR event, after which the CQ writes nothing.

use crate::bytes::{addr40, be16, be32, be64, hex, put_be16, put_be32};
use crate::commands::{status, CmdResult, CommandRequest};
use crate::device::Device;
use crate::eq::event;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::layout::{CQE_SIZE, LOG_MAX_CQ_SZ, NUM_CQS, PAGE_SIZE, UAR_CQ_DB};
use crate::protocol::Code;
use crate::timing::Read;
use serde_json::json;

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
    pub buf: u64,
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

/// An error CQE: my_qpn, wqe_index, syndrome, opcode 0x1e (IS_SEND on the
/// send side).
pub fn error_cqe(qpn: u32, wqe_index: u32, syndrome: u8, is_send: bool) -> [u8; 32] {
    let mut cqe = [0u8; 32];
    put_be32(&mut cqe, 0x00, qpn & 0xff_ffff);
    put_be16(&mut cqe, 0x18, wqe_index as u16);
    cqe[0x1b] = syndrome;
    cqe[0x1f] = if is_send { CQE_IS_SEND } else { 0 } | crate::wqe::opcode::ERROR;
    cqe
}

/// CQ_ERROR syndrome (EQE + 0x0f, `event.cq_err.syndrome`).
pub const CQ_ERROR_OVERRUN: u8 = 0x01;

impl Cq {
    /// 0x0c `log2(nent) << 24 | uar`, 0x17 comp_eqn, 0x1b/0x1c buffer, 0x38
    /// doorbell record; page_offset and log_page_size must be 0.
    pub fn parse(cqn: u32, ctx: &[u8], num_uars: u32) -> Result<Cq, u8> {
        let w = be32(ctx, 0x0c);
        let log_size = (w >> 24) as u8;
        let uar = w & 0xff_ffff;
        if log_size > LOG_MAX_CQ_SZ {
            return Err(status::BAD_SIZE);
        }
        if uar >= num_uars {
            return Err(status::BAD_PARAM);
        }
        if be16(ctx, 0x0a) != 0 || ctx[0x18] != 0 {
            return Err(status::BAD_PARAM);
        }
        let buf = addr40(ctx, 0x1b, 0x1c);
        let db_rec = be64(ctx, 0x38);
        if buf == 0 || !buf.is_multiple_of(PAGE_SIZE) || db_rec == 0 || !db_rec.is_multiple_of(8) {
            return Err(status::BAD_PARAM);
        }
        let mut c = [0u8; CQ_CTX_SIZE];
        c.copy_from_slice(&ctx[..CQ_CTX_SIZE]);
        Ok(Cq {
            cqn,
            log_size,
            uar,
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

    pub fn context(&self) -> [u8; CQ_CTX_SIZE] {
        let mut c = self.ctx;
        put_be32(&mut c, 0x2c, self.pi);
        c
    }
}

impl<M: GuestMemory, I: Irq> Device<M, I> {
    /// Writes `cqe` (owner bit added here) to CQ `cqn` for QP `qpn`, unless
    /// the CQ is in the error state or the doorbell record says it is full
    /// (the overrun puts it there). Then the EQE if armed. Returns the
    /// clock when the CQE's DMA write completed; None if none was written.
    pub(crate) fn post_cqe(
        &mut self,
        cqn: u32,
        qpn: u32,
        mut cqe: [u8; 32],
        solicited: bool,
    ) -> Option<u64> {
        let cq = self.cqs.get(&cqn)?;
        let (db_rec, nent, idx, buf) = (cq.db_rec, cq.nent(), cq.pi, cq.buf);
        if cq.error {
            self.drop_cqe(cqn, qpn, "cq_error");
            return None;
        }
        let mut rec = [0u8; 8];
        if !self.env.dma_read(db_rec, &mut rec, "db_rec", Read::Cached) {
            return None;
        }
        let set_ci = be32(&rec, 0) & 0xff_ffff;
        if idx.wrapping_sub(set_ci) & 0xff_ffff >= nent {
            self.cq_overrun(cqn, qpn, idx, set_ci);
            return None;
        }
        if idx & nent != 0 {
            cqe[31] |= 0x80;
        } else {
            cqe[31] &= !0x80;
        }
        let addr = buf + u64::from(idx & (nent - 1)) * CQE_SIZE;
        if !self.env.dma_write(addr, &cqe, "cqe") {
            return None;
        }
        let done = self.env.clock.now();
        self.env.counters.global.cqes += 1;
        self.env.counters.qp(qpn).cqes += 1;
        self.env.trace.record(
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
            self.completion_event(eqn, cqn);
        }
        Some(done)
    }

    fn drop_cqe(&mut self, cqn: u32, qpn: u32, why: &str) {
        self.env.counters.global.cqes_dropped += 1;
        self.env.trace.record(
            "cqe_dropped",
            || json!({"cqn": cqn, "qpn": qpn, "reason": why}),
        );
    }

    /// The producer is `nent` ahead of set_ci. set_ci lives in memory the
    /// application writes, so this is the application's overrun, not a
    /// driver error: the CQ goes to the error state (every later CQE is
    /// dropped) and a CQ_ERROR EQE goes to the EQ async events are mapped
    /// to, if any.
    fn cq_overrun(&mut self, cqn: u32, qpn: u32, idx: u32, set_ci: u32) {
        if let Some(cq) = self.cqs.get_mut(&cqn) {
            cq.error = true;
        }
        self.env.counters.global.cq_overruns += 1;
        self.env.trace.record(
            "cq_error",
            || json!({"cqn": cqn, "syndrome": CQ_ERROR_OVERRUN, "producer": idx, "set_ci": set_ci}),
        );
        self.drop_cqe(cqn, qpn, "overrun");
        if let Some(eqn) = self.event_map[usize::from(event::CQ_ERROR)] {
            let mut body = [0u8; 24];
            put_be32(&mut body, 0, cqn & 0xff_ffff); // EQE+0x04
            body[0x0b] = CQ_ERROR_OVERRUN; // EQE+0x0f
            self.post_eqe(eqn, event::CQ_ERROR, &body);
        }
    }

    fn completion_event(&mut self, eqn: u8, cqn: u32) {
        let mut body = [0u8; 24];
        put_be32(&mut body, 0, cqn & 0xff_ffff); // EQE+0x04
        self.post_eqe(eqn, event::COMP, &body);
    }

    /// UAR +0x20: one 64-bit write, or 32-bit writes of +0x20 then +0x24.
    pub(crate) fn cq_doorbell_write(&mut self, page: u32, in_page: u64, data: &[u8]) {
        match (in_page, data.len()) {
            (UAR_CQ_DB, 8) => {
                if let Some(old) = self.cq_db_half.remove(&page) {
                    self.cq_doorbell_incomplete(page, old);
                }
                self.cq_doorbell(page, be32(data, 0), be32(data, 4));
            }
            (UAR_CQ_DB, 4) => {
                if let Some(old) = self.cq_db_half.insert(page, be32(data, 0)) {
                    self.cq_doorbell_incomplete(page, old);
                }
            }
            (_, 4) => match self.cq_db_half.remove(&page) {
                Some(dw0) => self.cq_doorbell(page, dw0, be32(data, 0)),
                None => self.env.protocol_error(
                    Code::CqDoorbellIncomplete,
                    format!("UAR {page}: CQ doorbell +0x24 without +0x20 first"),
                ),
            },
            (o, n) => self.env.protocol_error(
                Code::CqDoorbellBadSize,
                format!("UAR {page}: {n}-byte CQ doorbell write at +{o:#x}"),
            ),
        }
    }

    fn cq_doorbell_incomplete(&mut self, page: u32, dw0: u32) {
        self.env.protocol_error(
            Code::CqDoorbellIncomplete,
            format!("UAR {page}: CQ doorbell dword0 {dw0:#010x} never got its dword1"),
        );
    }

    fn cq_doorbell(&mut self, page: u32, dw0: u32, dw1: u32) {
        let cqn = dw0 & 0xff_ffff;
        let cmd = (dw0 >> 24) & 0x7;
        let Some(cq) = self.cqs.get(&cqn) else {
            self.env.protocol_error(
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
            self.env.protocol_error(Code::CqDoorbellForeignUar, detail);
            return;
        }
        let arm = match cmd {
            1 => Arm::Solicited,
            2 => Arm::Any,
            _ => {
                self.env.protocol_error(
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
            self.completion_event(eqn, cqn);
        }
    }
}

/// SW2HW_CQ, HW2SW_CQ.
impl<M: GuestMemory, I: Irq> Device<M, I> {
    fn cqn(in_mod: u32) -> Result<u32, u8> {
        if in_mod >= NUM_CQS {
            return Err(status::BAD_INDEX);
        }
        Ok(in_mod)
    }

    pub(crate) fn sw2hw_cq(&mut self, r: &CommandRequest) -> CmdResult {
        let cqn = Self::cqn(r.in_mod)?;
        if self.cqs.contains_key(&cqn) {
            return Err(status::BAD_RES_STATE);
        }
        if r.op_mod > 1 {
            return Err(status::BAD_PARAM);
        }
        let ctx = self.read_mailbox(r.in_param, CQ_CTX_SIZE)?;
        let cq = Cq::parse(cqn, &ctx, self.cfg.num_uars)?;
        if self.eqs[usize::from(cq.comp_eqn)].is_none() {
            return Err(status::BAD_RESOURCE);
        }
        if r.op_mod == 0 {
            self.owner_init(cq.buf, cq.nent(), CQE_SIZE)?;
        }
        self.cqs.insert(cqn, cq);
        Ok(None)
    }

    pub(crate) fn hw2sw_cq(&mut self, r: &CommandRequest) -> CmdResult {
        let cqn = Self::cqn(r.in_mod)?;
        let Some(cq) = self.cqs.get(&cqn) else {
            return Err(status::BAD_RES_STATE);
        };
        if self.qps.values().any(|qp| qp.uses_cq(cqn)) {
            return Err(status::RESOURCE_BUSY);
        }
        let ctx = cq.context();
        match r.op_mod {
            0 => self.write_mailbox(r.out_param, &ctx)?,
            1 => {}
            _ => return Err(status::BAD_PARAM),
        }
        self.cqs.remove(&cqn);
        self.cq_db_half.retain(|_, dw0| *dw0 & 0xff_ffff != cqn);
        Ok(None)
    }
}
