//! Event queues (§5.4–5.6): 32-byte EQEs on the pages of the EQ's MTT entries, the EQ
//! doorbell in the UAR pages, MSI-X vector `intr` when an armed EQ gets an
//! EQE. The EQ table owns the EQs and the event map (MAP_EQ), and
//! executes SW2HW_EQ, HW2SW_EQ and MAP_EQ.

use crate::bytes::{addr40, be16, be32, hex, put_be32};
use crate::command::{
    owner_init, read_mailbox, write_mailbox, CmdError, CmdResult, CommandRequest,
};
use crate::env::Env;
use crate::firmware::Firmware;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::layout::{EQE_SIZE, LOG_MAX_EQ_SZ, MSIX_VECTORS, NUM_EQS};
use crate::protocol::Code;
use crate::qbuf::QueueBuf;
use serde_json::json;

pub const EQ_CTX_SIZE: usize = 0x40;
/// EQ context state ARMED (flags bits 11..8, `core/eq.c` MLX4_EQ_STATE_ARMED).
const STATE_ARMED: u32 = 9;

pub mod event {
    pub const COMP: u8 = 0x00;
    pub const CQ_ERROR: u8 = 0x04;
    pub const CMD: u8 = 0x0a;
}

#[derive(Debug, Clone)]
pub struct Eq {
    pub eqn: u8,
    pub log_size: u8,
    pub intr: u8,
    pub buf: QueueBuf,
    /// Consumer index (24 bits) as the driver last reported it.
    pub ci: u32,
    /// Producer index (24 bits): the next EQE the model writes.
    pub pi: u32,
    pub armed: bool,
    ctx: [u8; EQ_CTX_SIZE],
}

impl Eq {
    /// `core/eq.c:mlx4_create_eq`: 0x0c log_eq_size, 0x17 intr, 0x28 the
    /// consumer index; the EQEs are on the pages the MTT entries from
    /// 0x1b/0x1c name, each 4 KiB << log_page_size (0x18); page_offset
    /// (0x0a) must be 0; the EQ is armed when the context's state (flags
    /// bits 11..8) says ARMED (9), else at its first doorbell with req_not.
    pub(crate) fn parse<M: GuestMemory, I: Irq>(
        eqn: u8,
        ctx: &[u8],
        env: &mut Env<M, I>,
        fw: &Firmware,
    ) -> Result<Eq, CmdError> {
        let log_size = ctx[0x0c];
        if log_size > LOG_MAX_EQ_SZ {
            return Err(CmdError::BadSize);
        }
        let intr = ctx[0x17];
        if usize::from(intr) >= MSIX_VECTORS || be16(ctx, 0x0a) != 0 || ctx[0x18] > 8 {
            return Err(CmdError::BadParam);
        }
        let bytes = (1u64 << log_size) * EQE_SIZE;
        let buf = fw.queue_buf(env, addr40(ctx, 0x1b, 0x1c), ctx[0x18], bytes)?;
        let armed = (be32(ctx, 0x00) >> 8) & 0xf == STATE_ARMED;
        Ok(Eq::new(eqn, log_size, intr, buf, armed, ctx))
    }

    fn new(eqn: u8, log_size: u8, intr: u8, buf: QueueBuf, armed: bool, ctx: &[u8]) -> Eq {
        let mut c = [0u8; EQ_CTX_SIZE];
        c.copy_from_slice(&ctx[..EQ_CTX_SIZE]);
        Eq {
            eqn,
            log_size,
            intr,
            buf,
            ci: be32(ctx, 0x28) & 0xff_ffff,
            pi: 0,
            armed,
            ctx: c,
        }
    }

    pub fn nent(&self) -> u32 {
        1 << self.log_size
    }

    /// The context as HW2SW_EQ returns it, with the current indices.
    pub fn context(&self) -> [u8; EQ_CTX_SIZE] {
        let mut c = self.ctx;
        put_be32(&mut c, 0x28, self.ci);
        put_be32(&mut c, 0x2c, self.pi);
        c
    }

    fn outstanding(&self) -> u32 {
        self.pi.wrapping_sub(self.ci) & 0xff_ffff
    }
}

/// The EQs in hardware ownership and which EQ each event type goes to.
#[derive(Debug, Clone)]
pub struct EqTable {
    eqs: Vec<Option<Eq>>,
    /// Event type -> EQ (MAP_EQ).
    event_map: [Option<u8>; 64],
}

impl Default for EqTable {
    fn default() -> Self {
        EqTable {
            eqs: vec![None; NUM_EQS],
            event_map: [None; 64],
        }
    }
}

fn eqn(in_mod: u32) -> Result<usize, CmdError> {
    let eqn = in_mod as usize;
    if eqn >= NUM_EQS {
        return Err(CmdError::BadIndex);
    }
    Ok(eqn)
}

impl EqTable {
    /// EQ `eqn` is in hardware ownership; an `eqn` beyond the table names
    /// none (a CQ context naming it is refused, not a panic).
    pub fn exists(&self, eqn: u8) -> bool {
        self.eqs.get(usize::from(eqn)).is_some_and(Option::is_some)
    }

    /// EQs in hardware ownership.
    pub fn live(&self) -> usize {
        self.eqs.iter().flatten().count()
    }

    /// SW2HW_EQ: EQ in_mod from the mailbox's context.
    pub(crate) fn sw2hw<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        let eqn = eqn(r.in_mod)?;
        if self.eqs[eqn].is_some() {
            return Err(CmdError::BadResState);
        }
        let ctx = read_mailbox(env, r.in_param, EQ_CTX_SIZE)?;
        let eq = Eq::parse(eqn as u8, &ctx, env, fw)?;
        owner_init(env, &eq.buf, eq.nent(), EQE_SIZE)?;
        self.eqs[eqn] = Some(eq);
        Ok(None)
    }

    /// HW2SW_EQ; `in_use(eqn)`: a CQ completes to it, so it stays.
    pub(crate) fn hw2sw<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        in_use: impl Fn(u8) -> bool,
    ) -> CmdResult {
        let eqn = eqn(r.in_mod)?;
        let Some(eq) = &self.eqs[eqn] else {
            return Err(CmdError::BadResState);
        };
        if in_use(eqn as u8) {
            return Err(CmdError::ResourceBusy);
        }
        let ctx = eq.context();
        match r.op_mod {
            0 => write_mailbox(env, r.out_param, &ctx)?,
            1 => {} // no mailbox (newer mlx4)
            _ => return Err(CmdError::BadParam),
        }
        self.eqs[eqn] = None;
        for m in self.event_map.iter_mut() {
            if *m == Some(eqn as u8) {
                *m = None;
            }
        }
        Ok(None)
    }

    /// MAP_EQ: in_param's event types to EQ in_mod (bit 31: unmap).
    pub(crate) fn map(&mut self, r: &CommandRequest) -> CmdResult {
        let unmap = r.in_mod & (1 << 31) != 0;
        let eqn = eqn(r.in_mod & !(1 << 31))?;
        if self.eqs[eqn].is_none() {
            return Err(CmdError::BadResState);
        }
        for (ty, m) in self.event_map.iter_mut().enumerate() {
            if r.in_param & (1 << ty) == 0 {
                continue;
            }
            if !unmap {
                *m = Some(eqn as u8);
            } else if *m == Some(eqn as u8) {
                *m = None;
            }
        }
        Ok(None)
    }

    /// An EQE of `event_type` on the EQ that type is mapped to; false if
    /// none is (nothing written).
    pub(crate) fn post_event<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        event_type: u8,
        body: &[u8; 24],
    ) -> bool {
        let Some(eqn) = self.event_map[usize::from(event_type)] else {
            return false;
        };
        self.post_eqe(env, eqn, event_type, body);
        true
    }

    /// `post_event` of an EQE with a subtype (EQE 0x03).
    pub(crate) fn post_event_subtype<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        event_type: u8,
        subtype: u8,
        body: &[u8; 24],
    ) -> bool {
        let Some(eqn) = self.event_map[usize::from(event_type)] else {
            return false;
        };
        self.write_eqe(env, eqn, [event_type, subtype], body);
        true
    }

    /// Writes one EQE (type, then `body` = EQE bytes 0x04..0x1c) and raises
    /// the EQ's vector if it is armed.
    pub(crate) fn post_eqe<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        eqn: u8,
        event_type: u8,
        body: &[u8; 24],
    ) {
        self.write_eqe(env, eqn, [event_type, 0], body);
    }

    /// Writes one EQE: `[type, subtype]` at 0x01 and 0x03, `body` at 0x04.
    fn write_eqe<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        eqn: u8,
        [event_type, subtype]: [u8; 2],
        body: &[u8; 24],
    ) {
        let Some(eq) = self.eqs.get(usize::from(eqn)).and_then(Option::as_ref) else {
            return;
        };
        if eq.outstanding() >= eq.nent() {
            let detail = format!(
                "EQ {eqn} full (pi {:#x}, ci {:#x}); EQE type {event_type:#x} dropped",
                eq.pi, eq.ci
            );
            env.protocol_error(Code::EqOverflow, detail);
            return;
        }
        let idx = eq.pi;
        let addr = eq.buf.addr(u64::from(idx & (eq.nent() - 1)) * EQE_SIZE);
        let owner = idx & eq.nent() != 0;
        let mut eqe = [0u8; 32];
        eqe[1] = event_type;
        eqe[3] = subtype;
        eqe[4..28].copy_from_slice(body);
        eqe[31] = if owner { 0x80 } else { 0 };
        if env.dma_write(addr, &eqe, "eqe").is_err() {
            return;
        }
        env.counters.global.eqes += 1;
        env.trace.record(
            "eqe",
            || json!({"eqn": eqn, "index": idx, "type": event_type, "bytes": hex(&eqe)}),
        );
        let Some(eq) = self.eqs[usize::from(eqn)].as_mut() else {
            return;
        };
        eq.pi = (idx + 1) & 0xff_ffff;
        if eq.armed {
            eq.armed = false;
            let v = eq.intr;
            env.raise(u16::from(v));
        }
    }

    /// `ci | req_not << 31` at UAR page eqn/4, +0x800 + 8 * (eqn % 4).
    pub(crate) fn doorbell<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        eqn: u64,
        value: u32,
    ) {
        let Some(eq) = self.eqs.get_mut(eqn as usize).and_then(Option::as_mut) else {
            env.protocol_error(
                Code::EqDoorbellUnknownEq,
                format!("EQ doorbell {value:#010x} for EQ {eqn}, which does not exist"),
            );
            return;
        };
        eq.ci = value & 0xff_ffff;
        if value & (1 << 31) != 0 {
            eq.armed = true;
            // Arming over unread EQEs fires at once, or their event is lost.
            if eq.pi != eq.ci {
                eq.armed = false;
                let v = eq.intr;
                env.raise(u16::from(v));
            }
        }
    }
}
