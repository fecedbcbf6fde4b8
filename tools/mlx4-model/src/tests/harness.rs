//! A tiny "driver" for tests: HCR commands, the firmware bring-up
//! (`bringup`), queue creation on MTT-described buffers, posts.

use crate::bytes::{be32, put_be16, put_be32, put_be64};
use crate::command::op;
use crate::diag;
use crate::hcr::{EVENT, GO, TOGGLE};
use crate::layout::*;
use crate::pci::{COMMAND, COMMAND_MASTER};
use crate::trace::{TraceLevel, Tracer};
use crate::{Config, Device, FakeMemory, RecordingIrq};
use serde_json::Value;

/// log2 of the test profile's MPTs (`bringup::init_hca_mailbox`).
pub(crate) const LOG_MPTS: u32 = 10;
/// The MTT entries `Harness::new` writes for every page of the fake
/// memory, in order, from this entry on (`mtt_of`); the first MTT page
/// stays for the tests' own entries.
pub(crate) const MTT_WINDOW: u64 = 512;

/// The byte offset in the MTT table (what a context's mtt_base_addr
/// holds) of the entries `Harness::new` wrote for the pages from `buf` on:
/// a buffer in the fake memory is described page by page, as mlx4 would.
pub(crate) fn mtt_of(buf: u64) -> u64 {
    8 * (MTT_WINDOW + (buf.wrapping_sub(MEM_BASE) >> 12))
}

pub const MEM_BASE: u64 = 0x10_0000;
pub const MEM_LEN: usize = 0x4_0000;
pub const IN_MB: u64 = 0x10_0000;
pub const OUT_MB: u64 = 0x10_1000;
pub const EQ0_BUF: u64 = 0x10_2000;
pub const EQ1_BUF: u64 = 0x10_3000;
pub const CQ_BUF: u64 = 0x10_4000;
pub const CQ_DB: u64 = 0x10_5000;
pub const QP_BUF: u64 = 0x10_6000;
pub const QP2_BUF: u64 = 0x10_7000;
/// The receive CQ and the doorbell records share CQ_DB's page.
pub const RCQ_BUF: u64 = 0x10_8000;
pub const RCQ_DB: u64 = CQ_DB + 0x40;
pub const RQ_DB: u64 = CQ_DB + 0x80;
pub const RQ2_DB: u64 = CQ_DB + 0xc0;
pub const RCQ2_DB: u64 = CQ_DB + 0x100;
/// The RQ record of `qp_mailbox`'s one-WQE RQ, never written: empty.
pub const EMPTY_RQ_DB: u64 = CQ_DB + 0x200;
/// Receive buffers: RECV_LEN bytes per receive WQE index.
pub const RECV_BUF: u64 = 0x10_9000;
pub const RECV_LEN: u32 = 256;
/// Where tests put gathered payload.
pub const GATHER_BUF: u64 = 0x10_b000;
pub const RCQ2_BUF: u64 = 0x10_c000;
/// Receive buffers of the second QP of `pair()`.
pub const RECV2_BUF: u64 = 0x10_d000;
/// The receive CQ of the second QP of `pair()`.
pub const RCQN2: u32 = 3;

pub const QPN: u32 = 0x40;
pub const QPN2: u32 = 0x41;
pub const UAR: u32 = 2;
pub const CQN: u32 = 1;
pub const EQ_LOG: u8 = 3;
pub const CQ_LOG: u8 = 4;
pub const SQ_LOG: u8 = 4;
pub const SQ_STRIDE_LOG: u8 = 6;
/// The receive CQ of `setup()`'s QP.
pub const RCQN: u32 = 2;
pub const RCQ_LOG: u8 = 5;
/// RQ: 32 entries of 16 bytes (one data segment), after the SQ.
pub const RQ_LOG: u8 = 5;
pub const RQ_STRIDE_LOG: u8 = 4;
/// The RQ's offset in the QP buffer: after the 16 x 64 B SQ.
pub const RQ_OFF: u64 = (1 << SQ_LOG) * 64;
pub use crate::layout::RESERVED_LKEY;
/// Command register: Memory Space Enable.
const COMMAND_MEMORY: u8 = 1 << 1;

pub type TestDevice = Device<FakeMemory, RecordingIrq>;

pub struct Harness {
    pub dev: TestDevice,
    toggle: u32,
}

impl Harness {
    /// A device just out of reset: the firmware not running, so only
    /// QUERY_FW, MAP_FA, RUN_FW and UNMAP_FA work.
    pub fn fresh() -> Self {
        Self::fresh_at(Config::default(), TraceLevel::All)
    }

    /// `fresh` with `cfg`, the trace at `level`.
    pub fn fresh_at(cfg: Config, level: TraceLevel) -> Self {
        cfg.validate().unwrap();
        let mut dev = Device::new(
            cfg,
            FakeMemory::with_range(MEM_BASE, MEM_LEN),
            RecordingIrq::default(),
            Tracer::memory().with_level(level),
        );
        // What the driver's probe does through the PCI core
        // (pci_enable_device_mem, pci_set_master): without bus mastering
        // the device may not DMA.
        dev.config_write(COMMAND as u64, &[COMMAND_MEMORY | COMMAND_MASTER, 0]);
        Harness { dev, toggle: 1 }
    }

    /// Sets or clears Bus Master Enable (memory decoding stays on), as
    /// pci_set_master() / pci_clear_master() write it.
    pub fn set_master(&mut self, on: bool) {
        let v = COMMAND_MEMORY | if on { COMMAND_MASTER } else { 0 };
        self.dev.config_write(COMMAND as u64, &[v, 0]);
    }

    pub fn records(&self) -> Vec<Value> {
        self.dev
            .tracer()
            .lines()
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub fn records_of(&self, kind: &str) -> Vec<Value> {
        self.records()
            .into_iter()
            .filter(|r| r["kind"] == kind)
            .collect()
    }

    pub fn error_codes(&self) -> Vec<String> {
        self.records_of("protocol_error")
            .iter()
            .map(|r| r["code"].as_str().unwrap().to_string())
            .collect()
    }

    pub fn write32(&mut self, bar: u32, off: u64, v: u32) {
        self.dev.mmio_write(bar, off, &v.to_be_bytes());
    }

    pub fn read32(&mut self, bar: u32, off: u64) -> u32 {
        let mut b = [0u8; 4];
        self.dev.mmio_read(bar, off, &mut b);
        u32::from_be_bytes(b)
    }

    pub fn mem(&self, addr: u64, len: usize) -> Vec<u8> {
        self.dev.mem().bytes(addr, len).to_vec()
    }

    pub fn poke(&mut self, addr: u64, data: &[u8]) {
        self.dev
            .mem_mut()
            .bytes_mut(addr, data.len())
            .copy_from_slice(data);
    }

    /// Posts a command through the HCR; returns the status byte.
    pub fn cmd_full(
        &mut self,
        opcode: u16,
        op_mod: u8,
        in_param: u64,
        in_mod: u32,
        out_param: u64,
        event: Option<u16>,
    ) -> u8 {
        let t = if self.toggle == 1 { TOGGLE } else { 0 };
        let st = self.cmd_go(opcode, op_mod, in_param, in_mod, out_param, event);
        assert_eq!(st & GO, 0, "GO cleared");
        assert_eq!(st & TOGGLE, t, "T kept as written");
        (st >> 24) as u8
    }

    /// Writes a command to the HCR with GO; returns dword 6 as read back
    /// right after (GO still set if the command did not complete).
    pub fn cmd_go(
        &mut self,
        opcode: u16,
        op_mod: u8,
        in_param: u64,
        in_mod: u32,
        out_param: u64,
        event: Option<u16>,
    ) -> u32 {
        let token = event.unwrap_or(0xffff);
        let dwords = [
            (in_param >> 32) as u32,
            in_param as u32,
            in_mod,
            (out_param >> 32) as u32,
            out_param as u32,
            u32::from(token) << 16,
        ];
        for (i, d) in dwords.iter().enumerate() {
            self.write32(0, HCR_BASE + 4 * i as u64, *d);
        }
        let e = if event.is_some() { EVENT } else { 0 };
        let t = if self.toggle == 1 { TOGGLE } else { 0 };
        self.write32(
            0,
            HCR_BASE + 0x18,
            GO | e | t | (u32::from(op_mod) << 12) | u32::from(opcode),
        );
        self.toggle ^= 1;
        self.read32(0, HCR_BASE + 0x18)
    }

    /// The reset register, then T read back from the HCR as mlx4's probe
    /// does, so that the next command toggles it.
    pub fn reset_adapter(&mut self) {
        self.write32(0, RESET_BASE + RESET_REG, 1);
        let t = self.read32(0, HCR_BASE + 0x18) & TOGGLE;
        self.toggle = u32::from(t == 0);
    }

    pub fn cmd(&mut self, opcode: u16, op_mod: u8, in_mod: u32) -> u8 {
        self.cmd_full(opcode, op_mod, IN_MB, in_mod, OUT_MB, None)
    }

    /// An EQ context: 2^`log` EQEs, MSI-X `intr`, 4 KiB pages, MTT
    /// entries from byte `mtt`; not armed until its first doorbell.
    pub fn eq_ctx(log: u8, intr: u8, mtt: u64) -> [u8; 0x40] {
        let mut c = [0u8; 0x40];
        c[0x0c] = log;
        c[0x17] = intr;
        c[0x1b] = (mtt >> 32) as u8;
        put_be32(&mut c, 0x1c, mtt as u32);
        c
    }

    /// SW2HW_EQ of an EQ on the pages from `buf` (through `mtt_of`).
    pub fn sw2hw_eq(&mut self, eqn: u32, log: u8, intr: u8, buf: u64) -> u8 {
        let c = Self::eq_ctx(log, intr, mtt_of(buf));
        self.poke(IN_MB, &c);
        self.cmd(op::SW2HW_EQ, 0, eqn)
    }

    /// A CQ context: 2^`log` CQEs on UAR `uar` completing to EQ `eqn`, 4
    /// KiB pages, MTT entries from byte `mtt`, doorbell record `db`.
    pub fn cq_ctx(log: u8, uar: u32, eqn: u8, mtt: u64, db: u64) -> [u8; 0x40] {
        let mut c = [0u8; 0x40];
        put_be32(&mut c, 0x0c, (u32::from(log) << 24) | uar);
        c[0x17] = eqn;
        c[0x1b] = (mtt >> 32) as u8;
        put_be32(&mut c, 0x1c, mtt as u32);
        put_be64(&mut c, 0x38, db);
        c
    }

    /// SW2HW_CQ of a CQ on the pages from `buf` (through `mtt_of`).
    pub fn sw2hw_cq(&mut self, cqn: u32, log: u8, uar: u32, eqn: u8, buf: u64, db: u64) -> u8 {
        let c = Self::cq_ctx(log, uar, eqn, mtt_of(buf), db);
        self.poke(IN_MB, &c);
        self.cmd(op::SW2HW_CQ, 0, cqn)
    }

    /// An RC QP connected to itself on its primary path to the port's own
    /// LID, remote writes, reads and atomics enabled, its queues on 4 KiB pages
    /// whose MTT entries start at byte `mtt` (`mtt_of`), and the least RQ
    /// mlx4 gives a QP (1 x 16 B, `ib/qp.c:set_rq_size`), its record at
    /// EMPTY_RQ_DB reading 0: always empty (no QP is without an RQ or an
    /// SRQ, and the model refuses a QP naming an SRQ not in hardware
    /// ownership).
    pub fn qp_mailbox(qpn: u32, usr_page: u32, cqn: u32, mtt: u64, sq_log: u8) -> Vec<u8> {
        let mut mb = vec![0u8; 0x100];
        let c = &mut mb[8..];
        put_be32(c, 0x00, 0); // RC
        c[0x0a] = (sq_log << 3) | (SQ_STRIDE_LOG - 4);
        put_be32(c, 0x0c, usr_page);
        put_be32(c, 0x10, qpn);
        put_be32(c, 0x14, qpn);
        put_be16(c, 0x18 + 0x06, crate::firmware::mad::LID);
        put_be32(c, 0x7c, cqn);
        put_be32(c, 0x90, (1 << 15) | (1 << 14) | (1 << 13)); // RRE, RWE, RAE
        put_be32(c, 0x9c, cqn);
        put_be64(c, 0xa0, EMPTY_RQ_DB);
        c[0xcb] = (mtt >> 32) as u8;
        put_be32(c, 0xcc, mtt as u32);
        mb
    }

    /// Adds an RQ (RQ_LOG x 16 B) with receive CQ `rcqn`, its doorbell
    /// record at `rq_db`, and rlkey.
    pub fn with_rq(mut mb: Vec<u8>, rcqn: u32, rq_db: u64) -> Vec<u8> {
        let c = &mut mb[8..];
        put_be32(c, 0xac, 0);
        c[0x09] = (RQ_LOG << 3) | (RQ_STRIDE_LOG - 4);
        c[0x0b] |= 0x10;
        put_be32(c, 0x9c, rcqn);
        put_be64(c, 0xa0, rq_db);
        mb
    }

    /// Sets the protection domain (ctx 0x04) in a QP mailbox.
    pub fn with_pd(mut mb: Vec<u8>, pd: u32) -> Vec<u8> {
        put_be32(&mut mb[8..], 0x04, pd);
        mb
    }

    /// WRITE_MTT of `entries` (DMA addresses; PRESENT added) from MTT index
    /// `first`; returns the status.
    pub fn write_mtt(&mut self, first: u64, entries: &[u64]) -> u8 {
        let mut mb = vec![0u8; 16 + 8 * entries.len()];
        put_be64(&mut mb, 0, first);
        for (i, e) in entries.iter().enumerate() {
            put_be64(&mut mb, 16 + 8 * i, e | 1);
        }
        self.poke(IN_MB, &mb);
        self.cmd(op::WRITE_MTT, 0, entries.len() as u32)
    }

    /// A struct mlx4_mpt_entry for the region of lkey `key` (MPT index
    /// `key >> 8`, tag `key & 0xff`): REGION and `access`, protection domain
    /// `pd`, `length` bytes from virtual address `start`, translated by the
    /// MTT from entry `mtt`, 4 KiB pages.
    pub fn mpt_entry(
        key: u32,
        access: u32,
        pd: u32,
        start: u64,
        length: u64,
        mtt: u64,
    ) -> [u8; 64] {
        let mut b = [0u8; 64];
        put_be32(&mut b, 0x00, crate::mr::flag::REGION | access);
        put_be32(&mut b, 0x08, crate::keys::hw_index(key));
        put_be32(&mut b, 0x0c, pd);
        put_be64(&mut b, 0x10, start);
        put_be64(&mut b, 0x18, length);
        put_be64(&mut b, 0x2c, mtt * 8);
        put_be32(&mut b, 0x38, 12);
        b
    }

    /// SW2HW_MPT of `entry` for the MPT its key names; returns the status.
    pub fn sw2hw_mpt(&mut self, entry: &[u8; 64]) -> u8 {
        let index = be32(entry, 0x08) & ((1 << LOG_MPTS) - 1);
        self.poke(IN_MB, entry);
        self.cmd(op::SW2HW_MPT, 0, index)
    }

    /// Sets the remote QPN in a QP mailbox.
    pub fn connect_to(mut mb: Vec<u8>, remote: u32) -> Vec<u8> {
        put_be32(&mut mb[8..], 0x14, remote);
        mb
    }

    /// Writes receive WQE `index` of the RQ in `buf`: one data segment.
    pub fn post_recv(&mut self, buf: u64, index: u32, len: u32, lkey: u32, addr: u64) {
        let mut seg = [0u8; 16];
        put_be32(&mut seg, 0, len);
        put_be32(&mut seg, 4, lkey);
        put_be64(&mut seg, 8, addr);
        let slot = u64::from(index % (1 << RQ_LOG)) * 16;
        self.poke(buf + RQ_OFF + slot, &seg);
    }

    /// The RQ doorbell record: head in the low 16 bits.
    pub fn set_rq_head(&mut self, db: u64, head: u32) {
        self.poke(db, &(head & 0xffff).to_be_bytes());
    }

    /// Fills the whole RQ of the QP in `buf` (RECV_LEN bytes each from
    /// `data`) and rings its record.
    pub fn fill_rq(&mut self, buf: u64, db: u64, data: u64) {
        for i in 0..1u32 << RQ_LOG {
            let addr = data + u64::from(i * RECV_LEN);
            self.post_recv(buf, i, RECV_LEN, RESERVED_LKEY, addr);
        }
        self.set_rq_head(db, 1 << RQ_LOG);
    }

    /// RST2INIT with the given mailbox, then INIT2RTR and RTR2RTS.
    pub fn create_qp_with(&mut self, qpn: u32, mb: &[u8]) {
        self.poke(IN_MB, mb);
        assert_eq!(self.cmd(op::RST2INIT_QP, 0, qpn), 0);
        assert_eq!(self.cmd(op::INIT2RTR_QP, 0, qpn), 0);
        assert_eq!(self.cmd(op::RTR2RTS_QP, 0, qpn), 0);
    }

    /// Software's SQ initialisation: every WQE owner=1 (§4.4).
    pub fn init_sq(&mut self, buf: u64, sq_log: u8) {
        for i in 0..(1u64 << sq_log) {
            self.poke(buf + i * 64, &0x8000_0000u32.to_be_bytes());
        }
    }

    /// `new()`, then EQ 0 (async, vector 0) and EQ 1 (completions, vector 1), send CQ 1,
    /// receive CQ 2 (32 entries), and RC QP 0x40 connected to itself, with
    /// a 16 x 64 B SQ on UAR 2, rlkey, and a 32 x 16 B RQ filled with
    /// 256-byte buffers; everything armed off.
    pub fn setup() -> Self {
        Self::setup_with(Config::default())
    }

    pub fn setup_with(cfg: Config) -> Self {
        Self::setup_at(cfg, TraceLevel::All)
    }

    pub fn setup_at(cfg: Config, level: TraceLevel) -> Self {
        let mut h = Self::up_at(cfg, level);
        assert_eq!(h.sw2hw_eq(0, EQ_LOG, 0, EQ0_BUF), 0);
        assert_eq!(h.sw2hw_eq(1, EQ_LOG, 1, EQ1_BUF), 0);
        assert_eq!(h.sw2hw_cq(CQN, CQ_LOG, UAR, 1, CQ_BUF, CQ_DB), 0);
        assert_eq!(h.sw2hw_cq(RCQN, RCQ_LOG, UAR, 1, RCQ_BUF, RCQ_DB), 0);
        h.init_sq(QP_BUF, SQ_LOG);
        let mb = Self::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG);
        let mb = Self::with_rq(mb, RCQN, RQ_DB);
        h.create_qp_with(QPN, &mb);
        h.fill_rq(QP_BUF, RQ_DB, RECV_BUF);
        h
    }

    /// `setup()`'s devices with two RC QPs connected to each other: QP 0x40
    /// (receive CQ 2, RQ filled from RECV_BUF) and QP 0x41 (buffer QP2_BUF,
    /// receive CQ 3, RQ filled from RECV2_BUF), both on UAR 2 with send CQ
    /// 1 and rlkey.
    pub fn pair() -> Self {
        Self::pair_with_pds(0, 0)
    }

    /// `pair()` with QP 0x40 in protection domain `pd` and QP 0x41 in
    /// `pd2`.
    pub fn pair_with_pds(pd: u32, pd2: u32) -> Self {
        let mut h = Self::new();
        assert_eq!(h.sw2hw_eq(0, EQ_LOG, 0, EQ0_BUF), 0);
        assert_eq!(h.sw2hw_eq(1, EQ_LOG, 1, EQ1_BUF), 0);
        assert_eq!(h.sw2hw_cq(CQN, CQ_LOG, UAR, 1, CQ_BUF, CQ_DB), 0);
        assert_eq!(h.sw2hw_cq(RCQN, RCQ_LOG, UAR, 1, RCQ_BUF, RCQ_DB), 0);
        assert_eq!(h.sw2hw_cq(RCQN2, RCQ_LOG, UAR, 1, RCQ2_BUF, RCQ2_DB), 0);
        for (qpn, peer, buf, rcqn, db, data, pd) in [
            (QPN, QPN2, QP_BUF, RCQN, RQ_DB, RECV_BUF, pd),
            (QPN2, QPN, QP2_BUF, RCQN2, RQ2_DB, RECV2_BUF, pd2),
        ] {
            h.init_sq(buf, SQ_LOG);
            let mb = Self::qp_mailbox(qpn, UAR, CQN, mtt_of(buf), SQ_LOG);
            let mb = Self::connect_to(Self::with_rq(mb, rcqn, db), peer);
            let mb = Self::with_pd(mb, pd);
            h.create_qp_with(qpn, &mb);
            h.fill_rq(buf, db, data);
        }
        h
    }

    /// An RC inline SEND: the payload in inline segments that never cross
    /// a 64-byte boundary (44 bytes after the control segment, then 60 per
    /// 64-byte chunk), as libmlx4 writes them.
    pub fn inline_send(qpn: u32, index: u32, payload: &[u8], signaled: bool) -> Vec<u8> {
        let mut b = vec![0u8; 16];
        let mut rest = payload;
        loop {
            let room = 64 - (b.len() % 64) - 4;
            let n = rest.len().min(room);
            let mut hdr = [0u8; 4];
            put_be32(&mut hdr, 0, (1 << 31) | n as u32);
            b.extend_from_slice(&hdr);
            b.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            if rest.is_empty() {
                break;
            }
            b.resize(b.len().div_ceil(64) * 64, 0);
        }
        b.resize(b.len().div_ceil(16) * 16, 0);
        let ds = b.len() / 16;
        let owner = if index & (1 << SQ_LOG) != 0 {
            1u32 << 31
        } else {
            0
        };
        put_be32(&mut b, 0, owner | ((index & 0xffff) << 8) | 0x0a);
        put_be32(&mut b, 4, (qpn << 8) | ds as u32);
        put_be32(&mut b, 8, if signaled { 0xc } else { 0 });
        b
    }

    pub fn write_wqe(&mut self, buf: u64, index: u32, wqe: &[u8]) {
        let off = u64::from(index & ((1 << SQ_LOG) - 1)) * 64;
        self.poke(buf + off, wqe);
    }

    pub fn doorbell(&mut self, page: u32, qpn: u32) {
        self.write32(2, u64::from(page) * PAGE_SIZE + UAR_SEND_DB, qpn << 8);
    }

    /// Copies `wqe` (padded to 64) to BF page `page`, half `half`, in
    /// `chunk`-byte ascending writes.
    pub fn bf_copy(&mut self, page: u32, half: u32, wqe: &[u8], chunk: usize) {
        let mut b = wqe.to_vec();
        b.resize(wqe.len().div_ceil(64) * 64, 0);
        let base = (u64::from(self.dev.config().num_uars) + u64::from(page)) * PAGE_SIZE
            + u64::from(half) * BF_HALF;
        for (i, c) in b.chunks(chunk).enumerate() {
            self.dev.mmio_write(2, base + (i * chunk) as u64, c);
        }
    }

    pub fn bf_addr(&self, page: u32, half: u32, off: u64) -> u64 {
        (u64::from(self.dev.config().num_uars) + u64::from(page)) * PAGE_SIZE
            + u64::from(half) * BF_HALF
            + off
    }

    pub fn set_ci(&mut self, ci: u32) {
        self.poke(CQ_DB, &(ci & 0xff_ffff).to_be_bytes());
    }

    pub fn arm_cq(&mut self, page: u32, cqn: u32, cmd: u32, ci: u32) {
        let mut b = [0u8; 8];
        put_be32(&mut b, 0, (1 << 28) | (cmd << 24) | cqn);
        put_be32(&mut b, 4, ci);
        self.dev
            .mmio_write(2, u64::from(page) * PAGE_SIZE + UAR_CQ_DB, &b);
    }

    pub fn eq_doorbell(&mut self, eqn: u32, ci: u32, arm: bool) {
        let off = u64::from(eqn / 4) * PAGE_SIZE + UAR_EQ_DB + 8 * u64::from(eqn % 4);
        self.write32(2, off, ci | if arm { 1 << 31 } else { 0 });
    }

    pub fn cqe(&self, index: u32) -> Vec<u8> {
        self.mem(CQ_BUF + u64::from(index % (1 << CQ_LOG)) * 32, 32)
    }

    pub fn recv_cqe(&self, index: u32) -> Vec<u8> {
        self.mem(RCQ_BUF + u64::from(index % (1 << RCQ_LOG)) * 32, 32)
    }

    pub fn rq_ci(&self, qpn: u32) -> u32 {
        self.dev.qps().get(qpn).unwrap().rq_ci
    }

    pub fn eqe(&self, buf: u64, index: u32) -> Vec<u8> {
        self.mem(buf + u64::from(index % (1 << EQ_LOG)) * 32, 32)
    }

    pub fn diag_write(&mut self, off: u64, v: u32) {
        self.dev.mmio_write(0, DIAG_BASE + off, &v.to_le_bytes());
    }

    pub fn diag_read(&mut self, off: u64) -> u64 {
        let mut b = [0u8; 8];
        self.dev.mmio_read(0, DIAG_BASE + off, &mut b);
        u64::from_le_bytes(b)
    }

    pub fn select(&mut self, qpn: u32) {
        self.diag_write(diag::QP_SELECT, qpn);
    }

    pub fn sq_ci(&self, qpn: u32) -> u32 {
        self.dev.qps().get(qpn).unwrap().sq_ci
    }

    pub fn qp_state_from_query(&mut self, qpn: u32) -> (u32, u16) {
        assert_eq!(self.cmd(op::QUERY_QP, 0, qpn), 0);
        let mb = self.mem(OUT_MB, 0x100);
        (
            be32(&mb, 8) >> 28,
            u16::from_be_bytes([mb[8 + 0xb6], mb[8 + 0xb7]]),
        )
    }

    /// QUERY_QP's rq_wqe_counter (ctx 0xb4).
    pub fn rq_counter_from_query(&mut self, qpn: u32) -> u16 {
        assert_eq!(self.cmd(op::QUERY_QP, 0, qpn), 0);
        let mb = self.mem(OUT_MB, 0x100);
        u16::from_be_bytes([mb[8 + 0xb4], mb[8 + 0xb5]])
    }

    /// Counter consistency, and every access the fake memory refused is a
    /// recorded `dma_unmapped` (unless the counters were reset meanwhile).
    pub fn check_invariants(&self, counters_reset: bool) {
        self.dev.counters().check_consistency().unwrap();
        let unmapped = self
            .dev
            .counters()
            .by_code
            .get(&crate::protocol::Code::DmaUnmapped)
            .copied()
            .unwrap_or(0);
        if !counters_reset {
            assert_eq!(self.dev.mem().refused(), unmapped);
        }
    }
}

/// A WQE of `qpn` at SQ `index`: ctrl with `opcode`, the raddr segment if
/// given, `inline` bytes in one inline segment, then data segments (len,
/// lkey, addr). Signalled.
pub(crate) fn data_wqe(
    qpn: u32,
    index: u32,
    opcode: u8,
    raddr: Option<(u64, u32)>,
    inline: &[u8],
    segs: &[(u32, u32, u64)],
) -> Vec<u8> {
    let mut b = vec![0u8; 16];
    if let Some((addr, rkey)) = raddr {
        let mut r = [0u8; 16];
        put_be64(&mut r, 0, addr);
        put_be32(&mut r, 8, rkey);
        b.extend_from_slice(&r);
    }
    if !inline.is_empty() {
        let mut hdr = [0u8; 4];
        put_be32(&mut hdr, 0, (1 << 31) | inline.len() as u32);
        b.extend_from_slice(&hdr);
        b.extend_from_slice(inline);
        b.resize(b.len().div_ceil(16) * 16, 0);
    }
    for &(len, lkey, addr) in segs {
        let mut s = [0u8; 16];
        put_be32(&mut s, 0, len);
        put_be32(&mut s, 4, lkey);
        put_be64(&mut s, 8, addr);
        b.extend_from_slice(&s);
    }
    let ds = b.len() / 16;
    let owner = if index & (1 << SQ_LOG) != 0 {
        1 << 31
    } else {
        0
    };
    put_be32(
        &mut b,
        0,
        owner | ((index & 0xffff) << 8) | u32::from(opcode),
    );
    put_be32(&mut b, 4, (qpn << 8) | ds as u32);
    put_be32(&mut b, 8, 0xc);
    b
}
