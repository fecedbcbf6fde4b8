//! The HCR: seven big-endian dwords at BAR0 + 0x80680 (§1.2–1.6). Dword 6
//! with GO set starts a command; the model completes it synchronously,
//! clears GO and writes the status byte, keeping T as written, unless an
//! injected fault (`fault`) fails or stalls it. The command goes to the
//! table it is about (`execute`).

use crate::bytes::{be32, put_be64};
use crate::command::{self, op, CmdError, CmdResult, CommandRequest};
use crate::cq::CqTable;
use crate::env::Env;
use crate::eq::{event, EqTable};
use crate::fault::{CmdFault, Mode};
use crate::firmware::port::{port_change_body, PORT_CHANGE};
use crate::firmware::Firmware;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::mr::MrTable;
use crate::protocol::Code;
use crate::qp::{QpState, QpTable};
use serde_json::json;

pub const GO: u32 = 1 << 23;
pub const EVENT: u32 = 1 << 22;
pub const TOGGLE: u32 = 1 << 21;

#[derive(Debug, Default, Clone)]
pub struct Hcr {
    regs: [u32; 7],
}

impl Hcr {
    /// Big-endian bytes of the register file from `off` (inside the HCR).
    pub fn read(&self, off: usize, data: &mut [u8]) {
        let mut all = [0u8; 28];
        for (i, r) in self.regs.iter().enumerate() {
            all[i * 4..i * 4 + 4].copy_from_slice(&r.to_be_bytes());
        }
        data.copy_from_slice(&all[off..off + data.len()]);
    }

    fn request(&self, go: u32) -> CommandRequest {
        let r = &self.regs;
        CommandRequest {
            in_param: (u64::from(r[0]) << 32) | u64::from(r[1]),
            in_mod: r[2],
            out_param: (u64::from(r[3]) << 32) | u64::from(r[4]),
            token: (r[5] >> 16) as u16,
            op_mod: ((go >> 12) & 0xf) as u8,
            opcode: (go & 0xfff) as u16,
            event: go & EVENT != 0,
        }
    }
}

/// What a command may act on.
pub(crate) struct Tables<'a> {
    pub num_uars: u32,
    pub eqs: &'a mut EqTable,
    pub cqs: &'a mut CqTable,
    pub qps: &'a mut QpTable,
    pub mrs: &'a mut MrTable,
    /// The armed command fault (diag CMD_FAULT).
    pub cmd_fault: &'a mut CmdFault,
    /// The firmware's state; it answers its own commands.
    pub fw: &'a mut Firmware,
}

impl Hcr {
    /// A write of the HCR at `off`; dword 6 with GO runs the command.
    pub(crate) fn write<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        mut t: Tables,
        off: u64,
        data: &[u8],
    ) {
        // The driver's own comment: narrower writes do not work on the HCR.
        if data.len() < 4 || !data.len().is_multiple_of(4) || !off.is_multiple_of(4) {
            env.protocol_error(
                Code::HcrNarrowWrite,
                format!("{}-byte HCR write at +{off:#x}", data.len()),
            );
            return;
        }
        for (i, dw) in data.chunks_exact(4).enumerate() {
            let idx = off as usize / 4 + i;
            let v = be32(dw, 0);
            if idx < 6 {
                self.regs[idx] = v;
            } else {
                self.go(env, &mut t, v);
            }
        }
    }

    fn go<M: GuestMemory, I: Irq>(&mut self, env: &mut Env<M, I>, t: &mut Tables, v: u32) {
        let prev = self.regs[6];
        if v & GO == 0 {
            self.regs[6] = v;
            env.protocol_error(
                Code::HcrWriteWithoutGo,
                format!("HCR dword 6 written without GO: {v:#010x}"),
            );
            return;
        }
        if prev & GO != 0 {
            env.protocol_error(
                Code::CmdWhilePending,
                format!("GO written while command {:#x} is pending", prev & 0xfff),
            );
            return;
        }
        if (v ^ prev) & TOGGLE == 0 {
            // cmd_pending() would read this completion as still pending.
            env.protocol_error(
                Code::HcrToggleRepeated,
                format!("T={} repeats the previous command's T", (v >> 21) & 1),
            );
        }
        self.regs[6] = v;
        let req = self.request(v);
        let result = match command_fault(env, t.cmd_fault, req.opcode) {
            None => execute(env, t, &req),
            Some(Mode::Fail) => Err(CmdError::Internal),
            Some(Mode::Stall) => {
                // GO stays set: only a device reset clears it.
                env.trace.flush();
                return;
            }
        };
        let (status, imm) = match result {
            Ok(imm) => (0u8, imm),
            Err(e) => (e.status(), None),
        };
        if let Some(out) = imm {
            self.regs[3] = (out >> 32) as u32;
            self.regs[4] = out as u32;
        }
        self.regs[6] = (v & !(GO | 0xff00_0000)) | (u32::from(status) << 24);
        env.counters.global.commands += 1;
        env.trace.record("command", || {
            json!({
                "opcode": req.opcode,
                "name": command::name(req.opcode),
                "in_mod": req.in_mod,
                "op_mod": req.op_mod,
                "status": status,
                "in_param": req.in_param,
                "out_param": req.out_param,
                "event": req.event,
                "token": req.token,
            })
        });
        if req.event {
            self.command_event(env, t.eqs, &req, status);
        }
        if let Some(subtype) = t.fw.take_port_event() {
            port_event(env, t.eqs, subtype);
        }
        env.trace.flush();
    }

    /// E=1: the completion is also a CMD EQE on the EQ CMD is mapped to.
    fn command_event<M: GuestMemory, I: Irq>(
        &self,
        env: &mut Env<M, I>,
        eqs: &mut EqTable,
        req: &CommandRequest,
        status: u8,
    ) {
        let mut body = [0u8; 24];
        body[2..4].copy_from_slice(&req.token.to_be_bytes()); // EQE+0x06
        body[0x0b] = status; // EQE+0x0f
        let out = (u64::from(self.regs[3]) << 32) | u64::from(self.regs[4]);
        put_be64(&mut body, 0x0c, out); // EQE+0x10
        if !eqs.post_event(env, event::CMD, &body) {
            env.protocol_error(
                Code::CmdEventWithoutEq,
                format!(
                    "command {:#x} with E=1 but no EQ has CMD mapped",
                    req.opcode
                ),
            );
        }
    }
}

/// A port's state changed (INIT_PORT): the PORT_CHANGE
/// EQE on the EQ MAP_EQ mapped it to, recorded either way; with no EQ
/// mapped it is dropped, as an unmasked event would be.
fn port_event<M: GuestMemory, I: Irq>(env: &mut Env<M, I>, eqs: &mut EqTable, subtype: u8) {
    let posted = eqs.post_event_subtype(env, PORT_CHANGE, subtype, &port_change_body(1));
    env.trace.record(
        "port_event",
        || json!({"port": 1, "subtype": subtype, "posted": posted}),
    );
}

/// The fault armed for this command, if any: counted and recorded as it
/// fires.
fn command_fault<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    fault: &mut CmdFault,
    opcode: u16,
) -> Option<Mode> {
    let (mode, skipped) = fault.take(opcode)?;
    env.counters.lifetime.command_faults += 1;
    env.trace.record("command_fault", || {
        json!({
            "opcode": opcode,
            "name": command::name(opcode),
            "mode": mode.as_str(),
            "skipped": skipped,
        })
    });
    Some(mode)
}

/// Runs the command on the table it is about.
fn execute<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    t: &mut Tables,
    r: &CommandRequest,
) -> CmdResult {
    let n = t.num_uars;
    if let Some(res) = t.fw.command(env, n, r) {
        if t.fw.take_hca_closed() {
            // CLOSE_HCA: every context is gone with the HCA.
            *t.eqs = EqTable::default();
            *t.cqs = CqTable::default();
            *t.qps = QpTable::default();
            *t.mrs = MrTable::default();
        }
        if r.opcode == op::UNMAP_ICM && res.is_ok() {
            t.mrs.forget_unmapped(t.fw);
        }
        crate::srq::commands::count_refused(env, r, &res);
        return res;
    }
    match r.opcode {
        op::NOP => Ok(None),
        op::WRITE_MTT => t.mrs.write_mtt(env, r, t.fw),
        op::SW2HW_MPT => t.mrs.sw2hw_mpt(env, r, t.fw),
        op::HW2SW_MPT => t.mrs.hw2sw_mpt(env, r, t.fw),
        op::SYNC_TPT => t.mrs.sync_tpt(env, r, t.fw),
        op::SW2HW_EQ => t.eqs.sw2hw(env, r, t.fw),
        op::HW2SW_EQ => {
            let cqs = &*t.cqs;
            t.eqs.hw2sw(env, r, |eqn| cqs.uses_eq(eqn))
        }
        op::MAP_EQ => t.eqs.map(r),
        op::SW2HW_CQ => t.cqs.sw2hw(env, t.eqs, n, r, t.fw),
        op::HW2SW_CQ => {
            let qps = &*t.qps;
            t.cqs.hw2sw(env, r, t.fw, |cqn| qps.uses_cq(cqn))
        }
        op::MODIFY_CQ => t.cqs.modify(env, r, t.fw),
        op::RST2INIT_QP => t.qps.rst2init(env, t.cqs, n, r, t.fw),
        op::INIT2RTR_QP => {
            let states = (QpState::Init, QpState::Rtr);
            t.qps.transition(env, r, states, t.fw)
        }
        op::RTR2RTS_QP => {
            let states = (QpState::Rtr, QpState::Rts);
            t.qps.transition(env, r, states, t.fw)
        }
        op::INIT2INIT_QP
        | op::RTS2RTS_QP
        | op::RTS2SQD_QP
        | op::SQD2SQD_QP
        | op::SQD2RTS_QP
        | op::SQERR2RTS_QP => t.qps.modify(env, t.eqs, r, t.fw),
        op::TO_ERR_QP => t.qps.enter_err(r, t.fw),
        op::TO_RST_QP => t.qps.enter_rst(r, t.fw),
        op::QUERY_QP => t.qps.query(env, r, t.fw),
        op::SW2HW_SRQ | op::HW2SW_SRQ | op::QUERY_SRQ | op::ARM_SRQ => {
            t.qps.srq_command(env, r, t.fw)
        }
        _ => Err(CmdError::BadOp),
    }
}
