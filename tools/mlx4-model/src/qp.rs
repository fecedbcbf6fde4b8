//! Queue pairs (§5.6): the context fields the model uses, the state machine
//! and the queue geometry (SQ and RQ share one buffer). The QP table owns
//! the QPs out of RESET and executes the QP commands.

use crate::bytes::{addr40, be32, be64};
use crate::command::{read_mailbox, write_mailbox, CmdError, CmdResult, CommandRequest};
use crate::cq::CqTable;
use crate::env::Env;
use crate::firmware::Firmware;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::layout::{FIRST_QPN, LOG_MAX_QP_SZ, MAX_DESC_SZ_RQ};
use crate::qbuf::QueueBuf;
use serde_json::json;
use std::collections::BTreeMap;

mod query;
mod srq;
mod state;
mod transition;
mod ud;

pub use state::{QpState, RnrWait, SqHold};

pub use ud::max_message as ud_max_message;

pub const QP_CTX_SIZE: usize = 0xf8;
/// params2 (ctx 0x90) MLX4_QP_BIT_RWE and its optpar bit
/// (MLX4_QP_OPTPAR_RWE).
const RWE: u32 = 1 << 14;
const OPTPAR_RWE: u32 = 1 << 3;
/// params2 MLX4_QP_BIT_RRE and MLX4_QP_OPTPAR_RRE.
const RRE: u32 = 1 << 15;
const OPTPAR_RRE: u32 = 1 << 1;
/// params2 MLX4_QP_BIT_RAE and MLX4_QP_OPTPAR_RAE.
const RAE: u32 = 1 << 13;
const OPTPAR_RAE: u32 = 1 << 2;
/// params1 (ctx 0x70) bits 23..21, SRA_MAX, and params2 bits 23..21,
/// RRA_MAX: log2 of the RDMA reads (and atomics) the QP may have
/// outstanding as requester and as responder, as mlx4_ib fills them
/// (`ib/qp.c:__mlx4_ib_modify_qp`: `fls(attr->max_rd_atomic - 1) << 21`,
/// `fls(attr->max_dest_rd_atomic - 1) << 21`), each with its optpar bit
/// (MLX4_QP_OPTPAR_SRA_MAX, _RRA_MAX).
const PARAMS1: usize = 0x70;
const PARAMS2: usize = 0x90;
const RA_MAX_SHIFT: u32 = 21;
const OPTPAR_SRA_MAX: u32 = 1 << 8;
const OPTPAR_RRA_MAX: u32 = 1 << 9;
const QP_MAILBOX_LEN: usize = 8 + QP_CTX_SIZE;

pub mod service {
    pub const RC: u8 = 0;
    pub const UC: u8 = 1;
    pub const UD: u8 = 3;
    /// The special QPs' (QP0/QP1).
    pub const MLX: u8 = 7;
}

#[derive(Debug, Clone)]
pub struct Qp {
    pub qpn: u32,
    pub state: QpState,
    pub service: u8,
    pub usr_page: u32,
    pub remote_qpn: u32,
    pub cqn_send: u32,
    /// Its RQ's or its SRQ's receives complete to it (ctx 0x9c).
    pub cqn_recv: Option<u32>,
    pub buf: QueueBuf,
    pub sq_off: u64,
    pub sq_log_size: u8,
    pub sq_log_stride: u8,
    /// (log size, log stride) of the RQ, if any.
    pub rq: Option<(u8, u8)>,
    /// Byte offset of the RQ in the buffer (0 without an RQ).
    pub rq_off: u64,
    /// The RQ doorbell record's DMA address (ctx 0xa0; 0 without an RQ).
    pub rq_db: u64,
    /// The RQ consumer index (free-running; the record's head is 16 bits).
    pub rq_ci: u32,
    /// ctx 0x0b bit 4: data segments may use the reserved lkey.
    pub rlkey: bool,
    /// ctx 0x04 bits 23..0: the protection domain its keys must match.
    pub pd: u32,
    /// The primary path's destination LID (pri_path +0x06, ctx 0x1e)
    /// INIT2RTR set for an RC/UC QP, 0 before.
    pub rlid: u16,
    /// Remote write enable (params2 bit 14, ctx 0x90: MLX4_QP_BIT_RWE),
    /// from RST2INIT and every later transition whose optpar has RWE
    /// (bit 3).
    pub rwe: bool,
    /// Remote read enable (params2 bit 15, RRE; optpar bit 1), likewise.
    pub rre: bool,
    /// Remote atomic enable (params2 bit 13, RAE; optpar bit 2), likewise.
    /// mlx4_ib sets it for IB_ACCESS_REMOTE_ATOMIC and clears it with RRE
    /// for max_dest_rd_atomic 0 (`ib/qp.c:to_mlx4_access_flags`).
    pub rae: bool,
    /// SRA_MAX and RRA_MAX (params1 and params2 bits 23..21): log2 of the
    /// reads the QP may have outstanding as requester and as responder,
    /// likewise (optpar bits 8 and 9). Decoded, recorded and returned by
    /// QUERY_QP, never checked: see `max_rd_atomic`.
    pub sra_max: u8,
    pub rra_max: u8,
    /// The SQ consumer index in stride units (free-running).
    pub sq_ci: u32,
    /// WQEs a send-queue scan ran before their own doorbell or BF burst
    /// arrived. mlx4 doorbells carry no producer index, so a scan takes every
    /// valid WQE; with posted writes the driver may have written the next
    /// ones by then. Their announcements arrive later, in order, and find
    /// them done.
    pub sq_ahead: u32,
    ctx: [u8; QP_CTX_SIZE],
}

fn size_stride(b: u8) -> (u8, u8) {
    ((b >> 3) & 0xf, (b & 7) + 4)
}

/// SRA_MAX or RRA_MAX of params1 or params2.
fn ra_max(params: u32) -> u8 {
    ((params >> RA_MAX_SHIFT) & 7) as u8
}

impl Qp {
    /// RST2INIT (`core/qp.c:__mlx4_qp_modify`), `ctx` the context at
    /// mailbox byte 8: the work queues are on the pages the MTT entries
    /// from 0xcb/0xcc name, each 4 KiB << log_page_size (0xc8); the
    /// access enables from params2 (0x90); MLX (7) is the service type of
    /// the special QPs CONF_SPECIAL_QP named (QP0/QP1, `ib/qp.c:get_sqp_num`)
    /// and of no other. Every QP has an RQ unless it uses an SRQ (srqn
    /// bit 24, ctx 0xac): mlx4 gives even a QP created with no receive
    /// WRs one 16-byte receive WQE (`ib/qp.c:set_rq_size`, libmlx4
    /// `create_qp_ex`), so rq_size_stride 0 is 1 x 16 B, not "no RQ".
    pub(crate) fn parse<M: GuestMemory, I: Irq>(
        qpn: u32,
        ctx: &[u8],
        num_uars: u32,
        env: &mut Env<M, I>,
        fw: &Firmware,
    ) -> Result<Qp, CmdError> {
        let base = fw.port().base_sqpn;
        let special = base != 0 && (base..base + 4).contains(&qpn);
        let has_rq = be32(ctx, 0xac) & (1 << 24) == 0;
        let service = ((be32(ctx, 0x00) >> 16) & 0xff) as u8;
        let mlx_ok = special && service == service::MLX;
        if !mlx_ok && !matches!(service, service::RC | service::UC | service::UD) {
            return Err(CmdError::BadParam);
        }
        if be32(ctx, 0x10) & 0xff_ffff != qpn {
            return Err(CmdError::BadParam);
        }
        let (sq_log_size, sq_log_stride) = size_stride(ctx[0x0a] & 0x7f);
        let rq = has_rq.then(|| size_stride(ctx[0x09]));
        if sq_log_size > LOG_MAX_QP_SZ || rq.is_some_and(|(s, _)| s > LOG_MAX_QP_SZ) {
            return Err(CmdError::BadSize);
        }
        if rq.is_some_and(|(_, w)| 1u64 << w > u64::from(MAX_DESC_SZ_RQ)) {
            return Err(CmdError::BadSize);
        }
        let rq_db = if rq.is_some() { be64(ctx, 0xa0) } else { 0 };
        if rq.is_some() && (rq_db == 0 || !rq_db.is_multiple_of(4)) {
            return Err(CmdError::BadParam);
        }
        let usr_page = be32(ctx, 0x0c) & 0xff_ffff;
        if usr_page >= num_uars {
            return Err(CmdError::BadParam);
        }
        // The queue with the larger stride comes first (§5.6).
        let sq_bytes = 1u64 << (sq_log_size + sq_log_stride);
        let rq_bytes = rq.map_or(0, |(rs, rw)| 1u64 << (rs + rw));
        let (sq_off, rq_off) = match rq {
            Some((_, rw)) if rw > sq_log_stride => (rq_bytes, 0),
            Some(_) => (0, sq_bytes),
            None => (0, 0),
        };
        if ctx[0xc8] > 19 {
            return Err(CmdError::BadParam);
        }
        let buf = fw.queue_buf(env, addr40(ctx, 0xcb, 0xcc), ctx[0xc8], sq_bytes + rq_bytes)?;
        let mut c = [0u8; QP_CTX_SIZE];
        c.copy_from_slice(&ctx[..QP_CTX_SIZE]);
        Ok(Qp {
            qpn,
            state: QpState::Init,
            service,
            usr_page,
            remote_qpn: be32(ctx, 0x14) & 0xff_ffff,
            cqn_send: be32(ctx, 0x7c) & 0xff_ffff,
            cqn_recv: Some(be32(ctx, 0x9c) & 0xff_ffff),
            buf,
            sq_off,
            sq_log_size,
            sq_log_stride,
            rq,
            rq_off,
            rq_db,
            rq_ci: 0,
            rlkey: ctx[0x0b] & 0x10 != 0,
            pd: be32(ctx, 0x04) & 0xff_ffff,
            rlid: 0,
            rwe: be32(ctx, PARAMS2) & RWE != 0,
            rre: be32(ctx, PARAMS2) & RRE != 0,
            rae: be32(ctx, PARAMS2) & RAE != 0,
            sra_max: ra_max(be32(ctx, PARAMS1)),
            rra_max: ra_max(be32(ctx, PARAMS2)),
            sq_ci: 0,
            sq_ahead: 0,
            ctx: c,
        })
    }

    /// The RDMA reads the QP may have outstanding as requester (2^SRA_MAX;
    /// IB's max_rd_atomic). Never checked, as no post can exceed it in
    /// the model: a READ runs whole (its response landed, its CQE written)
    /// within the doorbell or BlueFlame write that executes it, before the
    /// next WQE is fetched, so a QP has at most one outstanding, and the
    /// field's least value, 0, allows one (mlx4_ib leaves it 0 for
    /// max_rd_atomic 0 and 1 alike).
    pub fn max_rd_atomic(&self) -> u32 {
        1 << self.sra_max
    }

    /// The RDMA reads the QP may have outstanding as responder
    /// (2^RRA_MAX; IB's max_dest_rd_atomic). Never checked, for the same
    /// reason; the responder's "none" is RRE clear, which mlx4_ib sends
    /// for max_dest_rd_atomic 0 (`ib/qp.c:to_mlx4_access_flags`) and the
    /// read path checks.
    pub fn max_dest_rd_atomic(&self) -> u32 {
        1 << self.rra_max
    }

    /// The record of the context a QP command left (`qp_context`).
    fn record<M, I>(&self, env: &mut Env<M, I>) {
        env.trace.record("qp_context", || {
            json!({"qpn": self.qpn, "state": self.state.as_str(), "rwe": self.rwe,
                   "rre": self.rre, "rae": self.rae, "max_rd_atomic": self.max_rd_atomic(),
                   "max_dest_rd_atomic": self.max_dest_rd_atomic()})
        });
    }

    pub fn sq_entries(&self) -> u32 {
        1 << self.sq_log_size
    }

    pub fn sq_stride(&self) -> u64 {
        1 << self.sq_log_stride
    }

    pub fn sq_bytes(&self) -> u64 {
        u64::from(self.sq_entries()) * self.sq_stride()
    }

    /// Byte offset of SQ entry `index` in the SQ.
    pub fn sq_entry_off(&self, index: u32) -> u64 {
        u64::from(index & (self.sq_entries() - 1)) * self.sq_stride()
    }

    /// Entries of the RQ (0 without one).
    pub fn rq_entries(&self) -> u32 {
        self.rq.map_or(0, |(s, _)| 1 << s)
    }

    pub fn rq_stride(&self) -> u64 {
        self.rq.map_or(0, |(_, w)| 1 << w)
    }

    /// DMA address of RQ entry `index`.
    pub fn rq_entry_addr(&self, index: u32) -> u64 {
        let slot = u64::from(index & self.rq_entries().saturating_sub(1));
        self.buf.addr(self.rq_off + slot * self.rq_stride())
    }

    /// The owner bit a valid WQE at `index` carries.
    pub fn owner_for(&self, index: u32) -> bool {
        index & self.sq_entries() != 0
    }

    pub fn uses_cq(&self, cqn: u32) -> bool {
        self.cqn_send == cqn || self.cqn_recv == Some(cqn)
    }
}

/// The QPs out of RESET (the model drops a QP at 2RST).
#[derive(Debug, Clone, Default)]
pub struct QpTable {
    qps: BTreeMap<u32, Qp>,
    /// What a QP's SQ waits on besides its state (`state::SqHold`).
    holds: BTreeMap<u32, SqHold>,
    /// The SRQs in hardware ownership (`srq`, `qp::srq`).
    pub srqs: crate::srq::SrqTable,
}

/// The QP in_mod names: above the firmware's reserved QPs and below
/// INIT_HCA's QP count (mlx4 allocates QPNs from a bitmap its profile
/// sizes, whatever QUERY_DEV_CAP advertised, `core/qp.c:mlx4_init_qp_table`).
fn qpn(in_mod: u32, fw: &Firmware) -> Result<u32, CmdError> {
    let qpn = in_mod & 0xff_ffff;
    let p = fw.hca().ok_or(CmdError::BadSysState)?;
    let limit = 1u64 << p.qpc.log_num.min(24);
    if qpn < FIRST_QPN || u64::from(qpn) >= limit {
        return Err(CmdError::BadIndex);
    }
    Ok(qpn)
}

/// Parses the QP mailbox (optpar, then the context) and checks the CQs.
fn qp_from_mailbox<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    cqs: &CqTable,
    num_uars: u32,
    qpn: u32,
    addr: u64,
    fw: &Firmware,
) -> Result<Qp, CmdError> {
    let mb = read_mailbox(env, addr, QP_MAILBOX_LEN)?;
    let qp = Qp::parse(qpn, &mb[8..], num_uars, env, fw)?;
    if qp.service == service::UD {
        ud::check(QpState::Init, be32(&mb, 0), &mb[8..])?;
    }
    if !cqs.contains(qp.cqn_send) {
        return Err(CmdError::BadResource);
    }
    if let Some(cqn) = qp.cqn_recv {
        if !cqs.contains(cqn) {
            return Err(CmdError::BadResource);
        }
    }
    Ok(qp)
}

impl QpTable {
    pub fn get(&self, qpn: u32) -> Option<&Qp> {
        self.qps.get(&qpn)
    }

    pub fn get_mut(&mut self, qpn: u32) -> Option<&mut Qp> {
        self.qps.get_mut(&qpn)
    }

    /// QPs out of RESET.
    pub fn len(&self) -> usize {
        self.qps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.qps.is_empty()
    }

    /// A QP completes to CQ `cqn`.
    pub fn uses_cq(&self, cqn: u32) -> bool {
        self.qps.values().any(|qp| qp.uses_cq(cqn))
    }

    /// RST2INIT_QP.
    pub(crate) fn rst2init<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        cqs: &CqTable,
        num_uars: u32,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        let qpn = qpn(r.in_mod, fw)?;
        if self.qps.contains_key(&qpn) {
            return Err(CmdError::BadQpState);
        }
        let qp = qp_from_mailbox(env, cqs, num_uars, qpn, r.in_param, fw)?;
        self.check_srq(env, &qp)?;
        qp.record(env);
        env.counters.qp(qpn).uar = Some(qp.usr_page);
        self.qps.insert(qpn, qp);
        Ok(None)
    }

    /// INIT2RTR_QP, RTR2RTS_QP: `from` to `to`.
    ///
    /// A later transition carries only what it changes
    /// (`ib/qp.c:__mlx4_ib_modify_qp`): the buffer, MTT, doorbell record
    /// and rlkey are 0 after RST2INIT and stay as RST2INIT set them; the
    /// destination QPN (0x14) and the primary path (0x18, `mlx4_set_path`:
    /// rlid at +0x06) come with INIT2RTR and are kept at RTR2RTS, which
    /// carries only the ack timeout of the path. The access enables and
    /// read limits come with their optpar bits: mlx4_ib sends
    /// max_dest_rd_atomic (RRA_MAX) at INIT2RTR and max_rd_atomic
    /// (SRA_MAX) at RTR2RTS, the transitions IB requires them at for RC
    /// (`core/verbs.c:qp_state_table`). The PSNs, path MTU, RNR timer,
    /// retry counts and ACK timeout are kept for QUERY_QP (`keep_fields`)
    /// but not used: the model's loopback neither segments nor retries (a
    /// message longer than the path MTU arrives whole; a UD message must
    /// fit it). A UD QP's transitions are checked by `ud::check`.
    pub(crate) fn transition<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        (from, to): (QpState, QpState),
        fw: &Firmware,
    ) -> CmdResult {
        let qpn = qpn(r.in_mod, fw)?;
        match self.qps.get(&qpn) {
            Some(qp) if qp.state == from => {}
            _ => return Err(CmdError::BadQpState),
        }
        let mb = read_mailbox(env, r.in_param, QP_MAILBOX_LEN)?;
        if self
            .qps
            .get(&qpn)
            .is_some_and(|qp| qp.service == service::UD)
        {
            ud::check(to, be32(&mb, 0), &mb[8..])?;
        }
        if let Some(qp) = self.qps.get_mut(&qpn) {
            qp.keep_fields((from, to), be32(&mb, 0), &mb[8..]);
            if to == QpState::Rtr {
                qp.remote_qpn = be32(&mb[8..], 0x14) & 0xff_ffff;
                qp.rlid = u16::from_be_bytes([mb[8 + 0x1e], mb[8 + 0x1f]]);
            }
            qp.apply_optpar(be32(&mb, 0), &mb[8..]);
            qp.state = to;
            qp.record(env);
        }
        Ok(None)
    }

    /// 2ERR_QP.
    pub(crate) fn enter_err(&mut self, r: &CommandRequest, fw: &Firmware) -> CmdResult {
        let qpn = qpn(r.in_mod, fw)?;
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return Err(CmdError::BadQpState);
        };
        qp.state = QpState::Err;
        Ok(None)
    }

    /// 2RST_QP (opmod 2): the QP is gone.
    pub(crate) fn enter_rst(&mut self, r: &CommandRequest, fw: &Firmware) -> CmdResult {
        let qpn = qpn(r.in_mod, fw)?;
        if r.op_mod != 2 {
            return Err(CmdError::BadParam);
        }
        if self.qps.remove(&qpn).is_none() {
            return Err(CmdError::BadResState);
        }
        self.holds.remove(&qpn);
        Ok(None)
    }

    /// QUERY_QP.
    pub(crate) fn query<M: GuestMemory, I: Irq>(
        &self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        let qpn = qpn(r.in_mod, fw)?;
        let Some(qp) = self.qps.get(&qpn) else {
            return Err(CmdError::BadResState);
        };
        let mb = qp.query_mailbox();
        write_mailbox(env, r.out_param, &mb)?;
        Ok(None)
    }
}
