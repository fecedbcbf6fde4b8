//! What a command is (§3, contract "Commands"): opcodes, the status byte,
//! the request the HCR hands over, the typed error a command fails with,
//! and the mailboxes it reads and writes by DMA. The HCR (`hcr`) decodes
//! and dispatches; each table's commands live with the table (`eq`, `cq`,
//! `qp`, `mr`).

use crate::env::DmaFailed;
use crate::env::Env;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::qbuf::QueueBuf;
use crate::timing::Read;

pub mod op {
    pub const QUERY_DEV_CAP: u16 = 0x03;
    pub const QUERY_FW: u16 = 0x04;
    pub const QUERY_ADAPTER: u16 = 0x06;
    pub const INIT_HCA: u16 = 0x07;
    pub const CLOSE_HCA: u16 = 0x08;
    pub const INIT_PORT: u16 = 0x09;
    pub const CLOSE_PORT: u16 = 0x0a;
    pub const SET_PORT: u16 = 0x0c;
    pub const QUERY_HCA: u16 = 0x0b;
    pub const SW2HW_MPT: u16 = 0x0d;
    pub const HW2SW_MPT: u16 = 0x0f;
    pub const WRITE_MTT: u16 = 0x11;
    pub const MAP_EQ: u16 = 0x12;
    pub const SW2HW_EQ: u16 = 0x13;
    pub const HW2SW_EQ: u16 = 0x14;
    pub const SW2HW_CQ: u16 = 0x16;
    pub const HW2SW_CQ: u16 = 0x17;
    pub const MODIFY_CQ: u16 = 0x2c;
    pub const RST2INIT_QP: u16 = 0x19;
    pub const INIT2RTR_QP: u16 = 0x1a;
    pub const RTR2RTS_QP: u16 = 0x1b;
    pub const RTS2RTS_QP: u16 = 0x1c;
    pub const SQERR2RTS_QP: u16 = 0x1d;
    pub const RTS2SQD_QP: u16 = 0x1f;
    pub const SQD2RTS_QP: u16 = 0x20;
    pub const INIT2INIT_QP: u16 = 0x2d;
    pub const SQD2SQD_QP: u16 = 0x38;
    pub const TO_ERR_QP: u16 = 0x1e;
    pub const TO_RST_QP: u16 = 0x21;
    pub const QUERY_QP: u16 = 0x22;
    pub const CONF_SPECIAL_QP: u16 = 0x23;
    pub const MAD_IFC: u16 = 0x24;
    pub const DIAG_RPRT: u16 = 0x30;
    pub const SYNC_TPT: u16 = 0x2f;
    pub const NOP: u16 = 0x31;
    pub const MOD_STAT_CFG: u16 = 0x34;
    pub const SW2HW_SRQ: u16 = 0x35;
    pub const HW2SW_SRQ: u16 = 0x36;
    pub const QUERY_SRQ: u16 = 0x37;
    pub const ARM_SRQ: u16 = 0x40;
    pub const QUERY_PORT: u16 = 0x43;
    pub const RUN_FW: u16 = 0xff6;
    pub const UNMAP_ICM: u16 = 0xff9;
    pub const MAP_ICM: u16 = 0xffa;
    pub const UNMAP_ICM_AUX: u16 = 0xffb;
    pub const MAP_ICM_AUX: u16 = 0xffc;
    pub const SET_ICM_SIZE: u16 = 0xffd;
    pub const UNMAP_FA: u16 = 0xffe;
    pub const MAP_FA: u16 = 0xfff;
}

/// mlx4 `CMD_STAT_*`.
pub mod status {
    pub const OK: u8 = 0x00;
    pub const INTERNAL_ERR: u8 = 0x01;
    pub const BAD_OP: u8 = 0x02;
    pub const BAD_PARAM: u8 = 0x03;
    pub const BAD_SYS_STATE: u8 = 0x04;
    pub const BAD_RESOURCE: u8 = 0x05;
    pub const RESOURCE_BUSY: u8 = 0x06;
    pub const BAD_RES_STATE: u8 = 0x09;
    pub const BAD_INDEX: u8 = 0x0a;
    pub const ICM_ERROR: u8 = 0x0c;
    pub const BAD_QP_STATE: u8 = 0x10;
    pub const BAD_SIZE: u8 = 0x40;
}

/// Why a command failed; its `status()` is the HCR's status byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CmdError {
    #[error("internal error")]
    Internal,
    #[error("bad opcode")]
    BadOp,
    #[error("bad parameter")]
    BadParam,
    /// The firmware not running, or the HCA not initialised.
    #[error("bad system state")]
    BadSysState,
    #[error("bad resource")]
    BadResource,
    #[error("resource busy")]
    ResourceBusy,
    #[error("bad resource state")]
    BadResState,
    #[error("bad index")]
    BadIndex,
    /// ICM (or the firmware area) not mapped as needed.
    #[error("ICM error")]
    IcmError,
    #[error("bad QP state")]
    BadQpState,
    #[error("bad size")]
    BadSize,
}

/// A mailbox or queue buffer the command needs cannot be reached.
impl From<DmaFailed> for CmdError {
    fn from(_: DmaFailed) -> Self {
        CmdError::Internal
    }
}

impl CmdError {
    pub fn status(self) -> u8 {
        match self {
            CmdError::Internal => status::INTERNAL_ERR,
            CmdError::BadOp => status::BAD_OP,
            CmdError::BadParam => status::BAD_PARAM,
            CmdError::BadSysState => status::BAD_SYS_STATE,
            CmdError::BadResource => status::BAD_RESOURCE,
            CmdError::ResourceBusy => status::RESOURCE_BUSY,
            CmdError::BadResState => status::BAD_RES_STATE,
            CmdError::BadIndex => status::BAD_INDEX,
            CmdError::IcmError => status::ICM_ERROR,
            CmdError::BadQpState => status::BAD_QP_STATE,
            CmdError::BadSize => status::BAD_SIZE,
        }
    }
}

pub fn name(opcode: u16) -> &'static str {
    match opcode {
        op::QUERY_DEV_CAP => "QUERY_DEV_CAP",
        op::QUERY_FW => "QUERY_FW",
        op::QUERY_ADAPTER => "QUERY_ADAPTER",
        op::INIT_HCA => "INIT_HCA",
        op::CLOSE_HCA => "CLOSE_HCA",
        op::INIT_PORT => "INIT_PORT",
        op::CLOSE_PORT => "CLOSE_PORT",
        op::SET_PORT => "SET_PORT",
        op::CONF_SPECIAL_QP => "CONF_SPECIAL_QP",
        op::MAD_IFC => "MAD_IFC",
        op::QUERY_HCA => "QUERY_HCA",
        op::MOD_STAT_CFG => "MOD_STAT_CFG",
        op::QUERY_PORT => "QUERY_PORT",
        op::RUN_FW => "RUN_FW",
        op::UNMAP_ICM => "UNMAP_ICM",
        op::MAP_ICM => "MAP_ICM",
        op::UNMAP_ICM_AUX => "UNMAP_ICM_AUX",
        op::MAP_ICM_AUX => "MAP_ICM_AUX",
        op::SET_ICM_SIZE => "SET_ICM_SIZE",
        op::UNMAP_FA => "UNMAP_FA",
        op::MAP_FA => "MAP_FA",
        op::SW2HW_MPT => "SW2HW_MPT",
        op::HW2SW_MPT => "HW2SW_MPT",
        op::WRITE_MTT => "WRITE_MTT",
        op::MAP_EQ => "MAP_EQ",
        op::SW2HW_EQ => "SW2HW_EQ",
        op::HW2SW_EQ => "HW2SW_EQ",
        op::SW2HW_CQ => "SW2HW_CQ",
        op::HW2SW_CQ => "HW2SW_CQ",
        op::MODIFY_CQ => "MODIFY_CQ",
        op::RST2INIT_QP => "RST2INIT_QP",
        op::INIT2RTR_QP => "INIT2RTR_QP",
        op::RTR2RTS_QP => "RTR2RTS_QP",
        op::RTS2RTS_QP => "RTS2RTS_QP",
        op::SQERR2RTS_QP => "SQERR2RTS_QP",
        op::RTS2SQD_QP => "RTS2SQD_QP",
        op::SQD2RTS_QP => "SQD2RTS_QP",
        op::INIT2INIT_QP => "INIT2INIT_QP",
        op::SQD2SQD_QP => "SQD2SQD_QP",
        op::TO_ERR_QP => "2ERR_QP",
        op::TO_RST_QP => "2RST_QP",
        op::QUERY_QP => "QUERY_QP",
        op::SW2HW_SRQ => "SW2HW_SRQ",
        op::HW2SW_SRQ => "HW2SW_SRQ",
        op::QUERY_SRQ => "QUERY_SRQ",
        op::ARM_SRQ => "ARM_SRQ",
        op::DIAG_RPRT => "DIAG_RPRT",
        op::SYNC_TPT => "SYNC_TPT",
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

/// Ok(immediate out_param, if the command has one) or the error.
pub type CmdResult = Result<Option<u64>, CmdError>;

const MAILBOX_SIZE: u64 = 4096;

fn check_mailbox(addr: u64) -> Result<(), CmdError> {
    if addr == 0 || !addr.is_multiple_of(MAILBOX_SIZE) {
        return Err(CmdError::BadParam);
    }
    Ok(())
}

/// `len` bytes of the mailbox at `addr`.
pub(crate) fn read_mailbox<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    addr: u64,
    len: usize,
) -> Result<Vec<u8>, CmdError> {
    check_mailbox(addr)?;
    let mut b = vec![0u8; len];
    env.dma_read(addr, &mut b, "mailbox", Read::Fresh)?;
    Ok(b)
}

pub(crate) fn write_mailbox<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    addr: u64,
    data: &[u8],
) -> Result<(), CmdError> {
    check_mailbox(addr)?;
    env.dma_write(addr, data, "mailbox")?;
    Ok(())
}

/// Firmware initialises a new queue's ownership: every entry zero but
/// its owner bit (byte 31, bit 7) set, so nothing reads as valid; one
/// write per page of the buffer.
pub(crate) fn owner_init<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    buf: &QueueBuf,
    entries: u32,
    entry_size: u64,
) -> Result<(), CmdError> {
    for (addr, len) in buf.runs(u64::from(entries) * entry_size) {
        let mut b = vec![0u8; len as usize];
        for e in b.chunks_exact_mut(entry_size as usize) {
            e[entry_size as usize - 1] = 0x80;
        }
        env.dma_write(addr, &b, "owner_init")?;
    }
    Ok(())
}
