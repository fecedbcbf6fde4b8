//! The model's diagnostic block at BAR0 + 0xe0000 (not mlx4's): magic,
//! version, little-endian counters, QP_SELECT, MARK, EXPECT, FALLBACK_EVERY,
//! the counter reset, the records of the last executed WQE and the last
//! send doorbell, (version 3) the receive, DMA and latency counters and
//! the modelled PCIe clock, (version 4) the memory-region gauges, the
//! protection faults and the RDMA write counters, and (version 5) command
//! fault injection and what a teardown leaves: resets, live queues, DMA
//! refused without bus mastering, (version 6) the firmware's counters,
//! (version 7) what the firmware holds of the host: its phase, firmware
//! area and aux pages, ICM pages, (version 8) the RDMA read counters,
//! (version 9) data fault injection, (version 10) the UAR page counters,
//! (version 11) the RDMA writes' modelled one-way latency and the latency
//! sums' sample counts, (version 12) command faults that fire on the
//! Nth command with their opcode, (version 13) the atomics' counters,
//! (version 14) the UD datagrams' counters, and (version 15) the shared
//! receive queues' counters.

use crate::env::Env;
use crate::fault::{CmdFault, DataFault};
use crate::protocol::Code;
use serde_json::json;

pub const MAGIC: u32 = 0x4d4c_584d; // "MXLM"
/// 2: the BAR2 write counter (0x78) and the records (0xc0..0x4ff).
/// 3: receive, DMA and latency counters and the clock (0x500..0x58f).
/// 4: memory regions, protection faults and RDMA writes (0x590..0x5c7).
/// 5: command faults, resets, live queues, DMA without bus mastering
/// (0x5c8..0x5e7).
/// 6: the firmware: refused commands, ICM errors, special-QP sends
/// (0x5e8..0x5ff).
/// 7: the firmware's gauges: phase, host pages it holds (0x600..0x617).
/// 8: RDMA reads executed and their bytes (0x618..0x627).
/// 9: data faults (0x628..0x62f).
/// 10: UAR_SELECT and the writes to its pages, the UAR of a QP
/// (0x630..0x657).
/// 11: the RDMA writes' modelled one-way latencies (0x658), and how many
/// WQEs and RDMA writes the latency sums hold (0x660, 0x668).
/// 12: CMD_FAULT's skip (bits 20..31): the fault fires on the command with
/// its opcode after that many more (no new register).
/// 13: atomics executed, CMP_SWAP and FETCH_ADD, and refused
/// (0x670..0x687).
/// 14: UD SENDs transmitted, their datagrams delivered, dropped and
/// refused by the receiver, and UD SENDs the sender refused
/// (0x688..0x6af).
/// 15: SRQ WQEs consumed, SRQ_LIMIT events, SRQ refusals (0x6b0..0x6c7).
pub const VERSION: u32 = 15;

pub const QP_SELECT: u64 = 0x08;
pub const MARK: u64 = 0x0c;
pub const EXPECT: u64 = 0x10;
pub const FALLBACK_EVERY: u64 = 0x14;
pub const RESET_COUNTERS: u64 = 0x18;

/// The last executed WQE: 4-byte registers from `LAST_WQE`, then its bytes.
pub const LAST_WQE: u64 = 0xc0;
/// The last send doorbell: its UAR page, then its 4 bytes as on the bus.
pub const LAST_DOORBELL: u64 = 0xd8;
/// The bytes of the last executed WQE, `LAST_WQE_BYTES_SIZE` of them.
pub const LAST_WQE_BYTES: u64 = 0x100;
/// Room for the largest WQE (DS 63: 1008 bytes).
pub const LAST_WQE_BYTES_SIZE: usize = 0x400;
/// The modelled PCIe clock now (ns); not a counter, never reset.
pub const CLOCK: u64 = 0x578;
/// Gauges of the device's state, never reset: MPTs in hardware ownership
/// and the pages they translate.
pub const HW_MPTS: u64 = 0x590;
pub const HW_MPT_PAGES: u64 = 0x598;
/// Protection faults, which the counter reset keeps: local (data segments)
/// and remote (rkeys).
pub const LOCAL_PROT_FAULTS: u64 = 0x5a0;
pub const REMOTE_ACCESS_FAULTS: u64 = 0x5a8;
/// Write: arm (`opcode | mode << 16 | skip << 20`) or disarm (mode 0) a
/// command fault, for the command with the opcode after `skip` more (skip
/// version 12). Read: the armed value, its skip counting down, then the
/// faults fired since the model started.
pub const CMD_FAULT: u64 = 0x5c8;
/// Device resets since the model started, whatever their source.
pub const RESETS: u64 = 0x5d0;
/// Gauge: EQs and CQs in hardware ownership, then QPs out of RESET.
pub const LIVE: u64 = 0x5d8;
/// DMA accesses and MSI-X refused because Bus Master Enable was clear.
pub const NO_MASTER_DMA: u64 = 0x5e0;
/// The firmware (counters, reset by the counter reset): commands refused
/// with BAD_SYS_STATE, commands failed with ICM_ERROR, sends on the
/// special QPs.
pub const FW_REFUSED: u64 = 0x5e8;
pub const ICM_ERRORS: u64 = 0x5f0;
pub const MAD_SENDS: u64 = 0x5f8;
/// Gauges of the firmware: its phase (0 off, 1 running, 2 HCA up), the
/// firmware area and aux pages it holds (4 KiB), the ICM pages mapped. A
/// driver's teardown must bring all three back to 0.
pub const FW_PHASE: u64 = 0x600;
pub const FW_PAGES: u64 = 0x608;
pub const ICM_PAGES: u64 = 0x610;
/// RDMA reads whose data landed, and their bytes (counters).
pub const RDMA_READS: u64 = 0x618;
pub const RDMA_READ_BYTES: u64 = 0x620;
/// Atomics executed, CMP_SWAP (matched or not) and FETCH_ADD, and atomics
/// refused (counters).
pub const ATOMICS_CMP_SWAP: u64 = 0x670;
pub const ATOMICS_FETCH_ADD: u64 = 0x678;
pub const ATOMICS_REFUSED: u64 = 0x680;
/// UD SENDs transmitted (completed in success); their datagrams delivered,
/// dropped silently, refused by the receive WQE they reached; UD SENDs
/// the sender refused (counters, `datapath::ud`).
pub const UD_SENDS: u64 = 0x688;
pub const UD_DELIVERED: u64 = 0x690;
pub const UD_DROPPED: u64 = 0x698;
pub const UD_REFUSED: u64 = 0x6a0;
pub const UD_RECV_ERRORS: u64 = 0x6a8;
/// Shared receive queues (counters, `srq::SrqCounters`): SRQ WQEs
/// consumed by receives, in success or in error; SRQ_LIMIT events (an
/// armed SRQ fell below its watermark, which disarmed it); refusals: SRQ
/// commands failed, RST2INIT_QPs naming an SRQ not in hardware ownership,
/// SRQ doorbell records ahead of the SRQ's size, next segments unreadable.
pub const SRQ_WQES: u64 = 0x6b0;
pub const SRQ_LIMIT_EVENTS: u64 = 0x6b8;
pub const SRQ_REFUSED: u64 = 0x6c0;
/// Write: arm (`offset + 1`) or disarm (0) a data fault. Read: the armed
/// value, then the faults fired since the model started.
pub const DATA_FAULT: u64 = 0x628;
/// Write: the UAR index whose page counters (0x638..0x64f) show, as
/// QP_SELECT does for a QP's.
pub const UAR_SELECT: u64 = 0x630;

/// The device's state the diag block shows, never reset.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gauges {
    /// LIVE: what the device still owns, so still may write to: EQs and
    /// CQs in hardware ownership (low half), QPs out of RESET (high half;
    /// the model drops a QP at 2RST).
    pub live: u64,
    /// MPTs in hardware ownership and the pages they translate.
    pub hw_mpts: u64,
    pub hw_mpt_pages: u64,
    /// FW_PHASE, FW_PAGES, ICM_PAGES.
    pub fw_phase: u64,
    pub fw_pages: u64,
    pub icm_pages: u64,
}

/// Where the last executed WQE came from (register 0xc4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WqeSource {
    /// Nothing executed yet.
    #[default]
    None = 0,
    /// The BlueFlame bytes.
    BlueFlame = 1,
    /// Fetched from the send queue by DMA (doorbell or BF fallback).
    Dma = 2,
}

/// The record of the last executed WQE, as the diag block shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LastWqe {
    pub qpn: u32,
    pub source: WqeSource,
    /// BF: the page the burst was written to; DMA: the UAR page of the
    /// doorbell or fallback that caused the fetch.
    pub page: u32,
    /// BF: the half (0/1); DMA: 0.
    pub half: u32,
    /// The WQE's send-queue index (the consumer index it ran at).
    pub index: u32,
    /// BF: the whole burst as written (DS*16 rounded up to 64, padding
    /// included); DMA: the DS*16 bytes fetched. At most
    /// `LAST_WQE_BYTES_SIZE`.
    pub bytes: Vec<u8>,
}

/// The record of the last send doorbell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LastDoorbell {
    pub page: u32,
    /// As on the bus (the first 4 bytes of the write, zero-padded).
    pub bytes: [u8; 4],
}

impl LastWqe {
    /// The 8 little-endian bytes at record offset `base` (8-aligned, in
    /// 0xc0..0xd8 or the byte window); None outside the record.
    fn value(&self, base: u64) -> Option<u64> {
        let pair = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
        match base {
            0xc0 => Some(pair(self.qpn, self.source as u32)),
            0xc8 => Some(pair(self.page, self.half)),
            0xd0 => Some(pair(self.bytes.len() as u32, self.index)),
            b if (LAST_WQE_BYTES..LAST_WQE_BYTES + LAST_WQE_BYTES_SIZE as u64).contains(&b) => {
                let start = (b - LAST_WQE_BYTES) as usize;
                let mut v = [0u8; 8];
                if let Some(src) = self.bytes.get(start..) {
                    let n = src.len().min(8);
                    v[..n].copy_from_slice(&src[..n]);
                }
                Some(u64::from_le_bytes(v))
            }
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct DiagState {
    pub qp_select: u32,
    pub uar_select: u32,
    pub fallback_every: u32,
    /// Valid BF posts since FALLBACK_EVERY was last set.
    valid_posts: u64,
    /// Kept across counter and device resets: they describe the last event,
    /// whenever it was.
    pub last_wqe: LastWqe,
    pub last_doorbell: LastDoorbell,
    /// Kept across both resets too, until they fire or are disarmed.
    pub cmd_fault: CmdFault,
    pub data_fault: DataFault,
}

impl DiagState {
    pub fn new(fallback_every: u32) -> Self {
        DiagState {
            qp_select: 0,
            uar_select: 0,
            fallback_every,
            valid_posts: 0,
            last_wqe: LastWqe::default(),
            last_doorbell: LastDoorbell::default(),
            cmd_fault: CmdFault::default(),
            data_fault: DataFault::default(),
        }
    }

    /// Counts a valid BF post; true if it is the Nth and must fall back.
    pub fn count_valid_bf_post(&mut self) -> bool {
        self.valid_posts += 1;
        self.fallback_every != 0
            && self
                .valid_posts
                .is_multiple_of(u64::from(self.fallback_every))
    }
}

impl DiagState {
    /// Returns a protocol error to record (after the read's trace record).
    pub(crate) fn read<M, I>(
        &self,
        env: &Env<M, I>,
        gauges: &Gauges,
        off: u64,
        data: &mut [u8],
    ) -> Option<(Code, String)> {
        let len = data.len() as u64;
        if !(len == 4 || len == 8) || !off.is_multiple_of(len) {
            return Some((
                Code::DiagBadAccess,
                format!("{len}-byte diag read at +{off:#x}"),
            ));
        }
        // Counters are 64-bit; a 4-byte read returns the addressed half.
        let base = off & !7;
        let value: Option<u64> = match base {
            0x00 => Some(u64::from(MAGIC) | (u64::from(VERSION) << 32)),
            0x08 => Some(u64::from(self.qp_select)),
            0x10 => Some(u64::from(env.expect) | (u64::from(self.fallback_every) << 32)),
            UAR_SELECT => Some(u64::from(self.uar_select)),
            0x18 => Some(0),
            LAST_DOORBELL => Some(
                u64::from(self.last_doorbell.page)
                    | (u64::from(u32::from_le_bytes(self.last_doorbell.bytes)) << 32),
            ),
            CLOCK => Some(env.clock.now()),
            HW_MPTS => Some(gauges.hw_mpts),
            HW_MPT_PAGES => Some(gauges.hw_mpt_pages),
            CMD_FAULT => Some(
                u64::from(self.cmd_fault.armed()) | (env.counters.lifetime.command_faults << 32),
            ),
            DATA_FAULT => {
                Some(u64::from(self.data_fault.armed()) | (env.counters.lifetime.data_faults << 32))
            }
            LIVE => Some(gauges.live),
            FW_PHASE => Some(gauges.fw_phase),
            FW_PAGES => Some(gauges.fw_pages),
            ICM_PAGES => Some(gauges.icm_pages),
            o if (LAST_WQE..LAST_WQE_BYTES + LAST_WQE_BYTES_SIZE as u64).contains(&o) => {
                self.last_wqe.value(o)
            }
            o => env.counters.diag_value(o, self.qp_select, self.uar_select),
        };
        let Some(v) = value else {
            return Some((
                Code::UndefinedOffset,
                format!("diag read at undefined +{off:#x}"),
            ));
        };
        let bytes = v.to_le_bytes();
        let start = (off - base) as usize;
        data.copy_from_slice(&bytes[start..start + data.len()]);
        None
    }

    pub(crate) fn write<M, I>(&mut self, env: &mut Env<M, I>, off: u64, data: &[u8]) {
        if data.len() != 4 || !off.is_multiple_of(4) {
            env.protocol_error(
                Code::DiagBadAccess,
                format!("{}-byte diag write at +{off:#x}", data.len()),
            );
            return;
        }
        let v = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        match off {
            QP_SELECT => self.qp_select = v,
            UAR_SELECT => self.uar_select = v,
            MARK => {
                env.trace.record("mark", || json!({"value": v}));
                env.trace.flush();
            }
            EXPECT => env.expect = v,
            FALLBACK_EVERY => {
                self.fallback_every = v;
                self.valid_posts = 0;
            }
            RESET_COUNTERS => env.counters.reset(),
            CMD_FAULT => {
                if let Err(detail) = self.cmd_fault.write(v) {
                    env.protocol_error(Code::DiagBadAccess, detail);
                }
            }
            DATA_FAULT => {
                if let Err(detail) = self.data_fault.write(v) {
                    env.protocol_error(Code::DiagBadAccess, detail);
                }
            }
            _ => env.protocol_error(
                Code::UndefinedOffset,
                format!("diag write at read-only or undefined +{off:#x}"),
            ),
        }
    }
}
