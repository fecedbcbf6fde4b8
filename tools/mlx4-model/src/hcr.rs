//! The HCR: seven big-endian dwords at BAR0 + 0x80680 (§1.2–1.6). Dword 6
//! with GO set starts a command; the model completes it synchronously,
//! clears GO and writes the status byte, keeping T as written, unless an
//! injected fault (`fault`) fails or stalls it.

use crate::bytes::{be32, put_be64};
use crate::commands::{self, CommandRequest};
use crate::device::Device;
use crate::eq::event;
use crate::fault::Mode;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::protocol::Code;
use serde_json::json;

pub const GO: u32 = 1 << 23;
pub const EVENT: u32 = 1 << 22;
pub const TOGGLE: u32 = 1 << 21;

#[derive(Debug, Default, Clone)]
pub struct Hcr {
    pub regs: [u32; 7],
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

impl<M: GuestMemory, I: Irq> Device<M, I> {
    pub(crate) fn hcr_write(&mut self, off: u64, data: &[u8]) {
        // The driver's own comment: narrower writes do not work on the HCR.
        if data.len() < 4 || !data.len().is_multiple_of(4) || !off.is_multiple_of(4) {
            self.env.protocol_error(
                Code::HcrNarrowWrite,
                format!("{}-byte HCR write at +{off:#x}", data.len()),
            );
            return;
        }
        for (i, dw) in data.chunks_exact(4).enumerate() {
            let idx = off as usize / 4 + i;
            let v = be32(dw, 0);
            if idx < 6 {
                self.hcr.regs[idx] = v;
            } else {
                self.hcr_go(v);
            }
        }
    }

    fn hcr_go(&mut self, v: u32) {
        let prev = self.hcr.regs[6];
        if v & GO == 0 {
            self.hcr.regs[6] = v;
            self.env.protocol_error(
                Code::HcrWriteWithoutGo,
                format!("HCR dword 6 written without GO: {v:#010x}"),
            );
            return;
        }
        if prev & GO != 0 {
            self.env.protocol_error(
                Code::CmdWhilePending,
                format!("GO written while command {:#x} is pending", prev & 0xfff),
            );
            return;
        }
        if (v ^ prev) & TOGGLE == 0 {
            // cmd_pending() would read this completion as still pending.
            self.env.protocol_error(
                Code::HcrToggleRepeated,
                format!("T={} repeats the previous command's T", (v >> 21) & 1),
            );
        }
        self.hcr.regs[6] = v;
        let req = self.hcr.request(v);
        let result = match self.command_fault(req.opcode) {
            None => self.execute_command(&req),
            Some(Mode::Fail) => Err(commands::status::INTERNAL_ERR),
            Some(Mode::Stall) => {
                // GO stays set: only a device reset clears it.
                self.env.trace.flush();
                return;
            }
        };
        let (status, imm) = match result {
            Ok(imm) => (0u8, imm),
            Err(status) => (status, None),
        };
        if let Some(out) = imm {
            self.hcr.regs[3] = (out >> 32) as u32;
            self.hcr.regs[4] = out as u32;
        }
        self.hcr.regs[6] = (v & !(GO | 0xff00_0000)) | (u32::from(status) << 24);
        self.env.counters.global.commands += 1;
        self.env.trace.record("command", || {
            json!({
                "opcode": req.opcode,
                "name": commands::name(req.opcode),
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
            self.command_event(&req, status);
        }
        self.env.trace.flush();
    }

    /// E=1: the completion is also a CMD EQE on the EQ CMD is mapped to.
    fn command_event(&mut self, req: &CommandRequest, status: u8) {
        let Some(eqn) = self.event_map[usize::from(event::CMD)] else {
            self.env.protocol_error(
                Code::CmdEventWithoutEq,
                format!(
                    "command {:#x} with E=1 but no EQ has CMD mapped",
                    req.opcode
                ),
            );
            return;
        };
        let mut body = [0u8; 24];
        body[2..4].copy_from_slice(&req.token.to_be_bytes()); // EQE+0x06
        body[0x0b] = status; // EQE+0x0f
        let out = (u64::from(self.hcr.regs[3]) << 32) | u64::from(self.hcr.regs[4]);
        put_be64(&mut body, 0x0c, out); // EQE+0x10
        self.post_eqe(eqn, event::CMD, &body);
    }
}
