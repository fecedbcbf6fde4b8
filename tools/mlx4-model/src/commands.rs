//! Command execution (§3, contract "Commands"). No firmware, no ICM: the
//! model is ready after reset, and every queue buffer is one contiguous DMA
//! region whose address sits in the context's MTT fields. This file
//! decodes and dispatches; each table's commands live with the table:
//! `eq` (SW2HW_EQ, HW2SW_EQ, MAP_EQ), `cq` (SW2HW_CQ, HW2SW_CQ), `qp`
//! (the QP transitions and QUERY_QP) and `mr` (WRITE_MTT, SW2HW_MPT,
//! HW2SW_MPT).

use crate::bytes::{put_be16, put_be32, put_be64};
use crate::device::Device;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::keys::RESERVED_LKEY;
use crate::layout::*;
use crate::qp::QpState;
use crate::timing::Read;

pub mod op {
    pub const QUERY_DEV_CAP: u16 = 0x03;
    pub const QUERY_FW: u16 = 0x04;
    pub const QUERY_ADAPTER: u16 = 0x06;
    pub const SW2HW_MPT: u16 = 0x0d;
    pub const HW2SW_MPT: u16 = 0x0f;
    pub const WRITE_MTT: u16 = 0x11;
    pub const MAP_EQ: u16 = 0x12;
    pub const SW2HW_EQ: u16 = 0x13;
    pub const HW2SW_EQ: u16 = 0x14;
    pub const SW2HW_CQ: u16 = 0x16;
    pub const HW2SW_CQ: u16 = 0x17;
    pub const RST2INIT_QP: u16 = 0x19;
    pub const INIT2RTR_QP: u16 = 0x1a;
    pub const RTR2RTS_QP: u16 = 0x1b;
    pub const TO_ERR_QP: u16 = 0x1e;
    pub const TO_RST_QP: u16 = 0x21;
    pub const QUERY_QP: u16 = 0x22;
    pub const NOP: u16 = 0x31;
}

/// mlx4 `CMD_STAT_*`.
pub mod status {
    pub const OK: u8 = 0x00;
    pub const INTERNAL_ERR: u8 = 0x01;
    pub const BAD_OP: u8 = 0x02;
    pub const BAD_PARAM: u8 = 0x03;
    pub const BAD_RESOURCE: u8 = 0x05;
    pub const RESOURCE_BUSY: u8 = 0x06;
    pub const BAD_RES_STATE: u8 = 0x09;
    pub const BAD_INDEX: u8 = 0x0a;
    pub const BAD_QP_STATE: u8 = 0x10;
    pub const BAD_SIZE: u8 = 0x40;
}

pub fn name(opcode: u16) -> &'static str {
    match opcode {
        op::QUERY_DEV_CAP => "QUERY_DEV_CAP",
        op::QUERY_FW => "QUERY_FW",
        op::QUERY_ADAPTER => "QUERY_ADAPTER",
        op::SW2HW_MPT => "SW2HW_MPT",
        op::HW2SW_MPT => "HW2SW_MPT",
        op::WRITE_MTT => "WRITE_MTT",
        op::MAP_EQ => "MAP_EQ",
        op::SW2HW_EQ => "SW2HW_EQ",
        op::HW2SW_EQ => "HW2SW_EQ",
        op::SW2HW_CQ => "SW2HW_CQ",
        op::HW2SW_CQ => "HW2SW_CQ",
        op::RST2INIT_QP => "RST2INIT_QP",
        op::INIT2RTR_QP => "INIT2RTR_QP",
        op::RTR2RTS_QP => "RTR2RTS_QP",
        op::TO_ERR_QP => "2ERR_QP",
        op::TO_RST_QP => "2RST_QP",
        op::QUERY_QP => "QUERY_QP",
        op::NOP => "NOP",
        _ => "unknown",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandRequest {
    pub in_param: u64,
    pub in_mod: u32,
    pub out_param: u64,
    pub token: u16,
    pub op_mod: u8,
    pub opcode: u16,
    pub event: bool,
}

/// Ok(immediate out_param, if the command has one) or Err(status).
pub type CmdResult = Result<Option<u64>, u8>;

const MAILBOX_SIZE: u64 = 4096;

/// QUERY_DEV_CAP output (§3.2); everything not listed is 0.
pub fn dev_cap(num_uars: u32) -> [u8; 0x100] {
    let mut b = [0u8; 0x100];
    b[0x10] = 0; // log max SRQ size
    b[0x11] = LOG_MAX_QP_SZ;
    b[0x12] = LOG_RSVD_QP;
    b[0x13] = LOG_MAX_QP;
    b[0x19] = LOG_MAX_CQ_SZ;
    b[0x1a] = 0;
    b[0x1b] = LOG_MAX_CQ;
    b[0x1d] = LOG_MAX_MPT;
    b[0x1e] = 0;
    b[0x1f] = LOG_MAX_EQ;
    b[0x20] = 0; // log reserved MTT entries (bits 7..4): entry 0
    b[0x21] = LOG_MAX_MR_SIZE;
    b[0x22] = 0; // log reserved MPTs (bits 3..0): MPT 0, the reserved lkey's
    b[0x23] = LOG_MAX_MTT;
    b[0x37] = 1; // ports
    b[0x48] = 1 << 4; // one reserved UAR (UAR 0, the kernel's)
    b[0x49] = ((u64::from(num_uars) * PAGE_SIZE).trailing_zeros() - 20) as u8;
    b[0x4b] = 12;
    b[0x4c] = 0x80; // BlueFlame
    b[0x4d] = BF_REG_SIZE.trailing_zeros() as u8;
    b[0x4e] = 3; // 8 BF registers per page (log)
    b[0x51] = MAX_SG_SQ as u8;
    put_be16(&mut b, 0x52, MAX_DESC_SZ_SQ);
    b[0x55] = MAX_SG_RQ;
    put_be16(&mut b, 0x56, MAX_DESC_SZ_RQ);
    put_be16(&mut b, 0x90, MTT_ENTRY_SIZE);
    put_be32(&mut b, 0x98, RESERVED_LKEY);
    b
}

/// QUERY_FW output: firmware 2.42.5000, cmd_if_rev 3, no clear-interrupt
/// register or catastrophic buffer.
pub fn fw() -> [u8; 0x100] {
    let mut b = [0u8; 0x100];
    put_be16(&mut b, 0x00, 0);
    put_be16(&mut b, 0x02, 2);
    put_be16(&mut b, 0x04, 5000);
    put_be16(&mut b, 0x06, 42);
    put_be16(&mut b, 0x0a, 3);
    b[0x0f] = 0;
    put_be64(&mut b, 0x20, 0);
    b[0x28] = 0;
    put_be64(&mut b, 0x30, 0);
    put_be32(&mut b, 0x38, 0);
    b
}

impl<M: GuestMemory, I: Irq> Device<M, I> {
    pub(crate) fn execute_command(&mut self, r: &CommandRequest) -> CmdResult {
        match r.opcode {
            op::QUERY_DEV_CAP => {
                let b = dev_cap(self.cfg.num_uars);
                self.write_mailbox(r.out_param, &b).map(|()| None)
            }
            op::QUERY_FW => self.write_mailbox(r.out_param, &fw()).map(|()| None),
            op::QUERY_ADAPTER => {
                let b = [0u8; 0x100]; // 0x10: INTA pin 0
                self.write_mailbox(r.out_param, &b).map(|()| None)
            }
            op::NOP => Ok(None),
            op::WRITE_MTT => self.write_mtt(r),
            op::SW2HW_MPT => self.sw2hw_mpt(r),
            op::HW2SW_MPT => self.hw2sw_mpt(r),
            op::SW2HW_EQ => self.sw2hw_eq(r),
            op::HW2SW_EQ => self.hw2sw_eq(r),
            op::MAP_EQ => self.map_eq(r),
            op::SW2HW_CQ => self.sw2hw_cq(r),
            op::HW2SW_CQ => self.hw2sw_cq(r),
            op::RST2INIT_QP => self.rst2init(r),
            op::INIT2RTR_QP => self.qp_transition(r, QpState::Init, QpState::Rtr),
            op::RTR2RTS_QP => self.qp_transition(r, QpState::Rtr, QpState::Rts),
            op::TO_ERR_QP => self.qp_to_err(r),
            op::TO_RST_QP => self.qp_to_rst(r),
            op::QUERY_QP => self.query_qp(r),
            _ => Err(status::BAD_OP),
        }
    }

    fn check_mailbox(addr: u64) -> Result<(), u8> {
        if addr == 0 || !addr.is_multiple_of(MAILBOX_SIZE) {
            return Err(status::BAD_PARAM);
        }
        Ok(())
    }

    pub(crate) fn read_mailbox(&mut self, addr: u64, len: usize) -> Result<Vec<u8>, u8> {
        Self::check_mailbox(addr)?;
        let mut b = vec![0u8; len];
        if !self.env.dma_read(addr, &mut b, "mailbox", Read::Fresh) {
            return Err(status::INTERNAL_ERR);
        }
        Ok(b)
    }

    pub(crate) fn write_mailbox(&mut self, addr: u64, data: &[u8]) -> Result<(), u8> {
        Self::check_mailbox(addr)?;
        if !self.env.dma_write(addr, data, "mailbox") {
            return Err(status::INTERNAL_ERR);
        }
        Ok(())
    }

    /// Firmware initialises a new queue's ownership: every entry zero but
    /// its owner bit (byte 31, bit 7) set, so nothing reads as valid.
    pub(crate) fn owner_init(&mut self, buf: u64, entries: u32, entry_size: u64) -> Result<(), u8> {
        let mut b = vec![0u8; (u64::from(entries) * entry_size) as usize];
        for e in b.chunks_exact_mut(entry_size as usize) {
            e[entry_size as usize - 1] = 0x80;
        }
        if !self.env.dma_write(buf, &b, "owner_init") {
            return Err(status::INTERNAL_ERR);
        }
        Ok(())
    }
}
