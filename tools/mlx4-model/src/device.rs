//! The adapter as a pure, synchronous state machine: MMIO in, DMA and
//! interrupts out through the `GuestMemory` and `Irq` traits (only via
//! `dma`), every transaction recorded by the tracer. The per-concern
//! logic lives in the sibling modules as further `impl Device` blocks.

use crate::blueflame::BfCollector;
use crate::bytes::{be32, hex};
use crate::counters::Counters;
use crate::cq::Cq;
use crate::diag::DiagState;
use crate::env::Env;
use crate::eq::Eq;
use crate::guest_memory::GuestMemory;
use crate::hcr::Hcr;
use crate::irq::Irq;
use crate::layout::*;
use crate::mr::Mrs;
use crate::pci::ConfigSpace;
use crate::protocol::Code;
use crate::qp::Qp;
use crate::timing::Tx;
use crate::trace::Tracer;
use serde_json::{json, Value};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub num_uars: u32,
    /// Every Nth valid BlueFlame post falls back (0: never).
    pub fallback_every: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            num_uars: 1024,
            fallback_every: 0,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("num_uars {0} must be a power of two in {MIN_UARS}..={MAX_UARS}")]
    NumUars(u32),
}

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let n = self.num_uars;
        if !n.is_power_of_two() || !(MIN_UARS..=MAX_UARS).contains(&n) {
            return Err(ConfigError::NumUars(n));
        }
        Ok(())
    }

    pub fn bar2_size(&self) -> u64 {
        2 * u64::from(self.num_uars) * PAGE_SIZE
    }
}

/// What a BAR0 access hits; the whole access must lie inside one register
/// block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bar0Region {
    Hcr,
    Owner,
    Reset,
    Diag,
    Msix,
    Undefined,
}

impl Bar0Region {
    fn decode(off: u64, len: u64) -> Self {
        let inside = |base: u64, size: u64| off >= base && off.saturating_add(len) <= base + size;
        if len == 0 {
            Bar0Region::Undefined
        } else if inside(HCR_BASE, HCR_SIZE) {
            Bar0Region::Hcr
        } else if inside(OWNER_OFF, 4) {
            Bar0Region::Owner
        } else if inside(RESET_BASE, RESET_SIZE) {
            Bar0Region::Reset
        } else if inside(DIAG_BASE, DIAG_SIZE) {
            Bar0Region::Diag
        } else if inside(MSIX_TABLE_OFF, PAGE_SIZE) || inside(MSIX_PBA_OFF, PAGE_SIZE) {
            Bar0Region::Msix
        } else {
            Bar0Region::Undefined
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Bar0Region::Hcr => "hcr",
            Bar0Region::Owner => "ownership",
            Bar0Region::Reset => "reset",
            Bar0Region::Diag => "diag",
            Bar0Region::Msix => "msix",
            Bar0Region::Undefined => "none",
        }
    }
}

/// What a BAR2 access hits: a UAR page or a BlueFlame page (numbered like
/// the UAR it belongs to), never crossing a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bar2Region {
    Uar { page: u32, in_page: u64 },
    Bf { page: u32, in_page: u64 },
    Undefined,
}

pub struct Device<M, I> {
    pub(crate) cfg: Config,
    /// Memory, interrupts, config space, trace, clock and counters.
    pub(crate) env: Env<M, I>,
    pub(crate) hcr: Hcr,
    pub(crate) owned: bool,
    pub(crate) eqs: Vec<Option<Eq>>,
    /// Event type -> EQ (MAP_EQ).
    pub(crate) event_map: [Option<u8>; 64],
    pub(crate) cqs: BTreeMap<u32, Cq>,
    pub(crate) qps: BTreeMap<u32, Qp>,
    /// The MTT and the MPTs in hardware ownership.
    pub(crate) mrs: Mrs,
    pub(crate) bf: BfCollector,
    /// First half (dword0) of a CQ doorbell sent as two 32-bit writes, per UAR.
    pub(crate) cq_db_half: BTreeMap<u32, u32>,
    pub(crate) diag: DiagState,
    finished: bool,
}

impl<M: GuestMemory, I: Irq> Device<M, I> {
    /// `cfg` must have passed `Config::validate`.
    pub fn new(cfg: Config, mem: M, irq: I, trace: Tracer) -> Self {
        Device {
            env: Env::new(mem, irq, ConfigSpace::new(cfg.bar2_size()), trace),
            diag: DiagState::new(cfg.fallback_every),
            cfg,
            hcr: Hcr::default(),
            owned: false,
            eqs: vec![None; NUM_EQS],
            event_map: [None; 64],
            cqs: BTreeMap::new(),
            qps: BTreeMap::new(),
            mrs: Mrs::default(),
            bf: BfCollector::default(),
            cq_db_half: BTreeMap::new(),
            finished: false,
        }
    }

    /// The modelled PCIe clock now (ns).
    pub fn clock_ns(&self) -> u64 {
        self.env.clock.now()
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn mem(&self) -> &M {
        &self.env.mem
    }

    pub fn mem_mut(&mut self) -> &mut M {
        &mut self.env.mem
    }

    pub fn irq(&self) -> &I {
        &self.env.irq
    }

    pub fn irq_mut(&mut self) -> &mut I {
        &mut self.env.irq
    }

    pub fn counters(&self) -> &Counters {
        &self.env.counters
    }

    pub fn tracer(&self) -> &Tracer {
        &self.env.trace
    }

    /// A record from the shell (DMA maps, interrupt setup); `fields` is
    /// only called if the trace level keeps `kind`.
    pub fn record(&mut self, kind: &str, fields: impl FnOnce() -> Value) {
        self.env.trace.record(kind, fields);
    }

    pub fn flush_trace(&mut self) {
        self.env.trace.flush();
    }

    pub fn msix_enabled(&self) -> bool {
        self.env.pci.msix_enabled()
    }

    pub fn config_read(&mut self, off: u64, data: &mut [u8]) {
        self.env.pci.read(off, data);
        self.env.trace.record(
            "config_read",
            || json!({"off": off, "len": data.len(), "data": hex(data)}),
        );
        self.env.charge(Tx::NonPosted);
    }

    pub fn config_write(&mut self, off: u64, data: &[u8]) {
        self.env.trace.record(
            "config_write",
            || json!({"off": off, "len": data.len(), "data": hex(data)}),
        );
        self.env.charge(Tx::NonPosted);
        self.env.pci.write(off, data);
    }

    fn bar2_decode(&self, off: u64, len: u64) -> Bar2Region {
        let page = off / PAGE_SIZE;
        let in_page = off % PAGE_SIZE;
        let uars = u64::from(self.cfg.num_uars);
        if len == 0 || in_page.saturating_add(len) > PAGE_SIZE || page >= 2 * uars {
            Bar2Region::Undefined
        } else if page < uars {
            Bar2Region::Uar {
                page: page as u32,
                in_page,
            }
        } else {
            Bar2Region::Bf {
                page: (page - uars) as u32,
                in_page,
            }
        }
    }

    fn bar2_record(off: u64, data: &[u8], region: Bar2Region) -> Value {
        let mut rec = json!({"bar": 2, "off": off, "len": data.len(), "data": hex(data)});
        match region {
            Bar2Region::Uar { page, .. } => {
                rec["region"] = "uar".into();
                rec["page"] = page.into();
            }
            Bar2Region::Bf { page, in_page } => {
                rec["region"] = "bf".into();
                rec["page"] = page.into();
                rec["half"] = ((in_page % BF_REG_SIZE) / BF_HALF).into();
                rec["chunk_off"] = (in_page % BF_HALF).into();
            }
            Bar2Region::Undefined => rec["region"] = "none".into(),
        }
        rec
    }

    /// An MMIO write: recorded at the clock's time, charged (a posted write;
    /// a BlueFlame write at the store-block rate), then handled.
    pub fn mmio_write(&mut self, bar: u32, off: u64, data: &[u8]) {
        let len = data.len() as u64;
        self.env.mmio_start_ns = self.env.clock.now();
        match bar {
            0 => {
                let region = Bar0Region::decode(off, len);
                self.env.trace.record("mmio_write", || {
                    json!({"bar": 0, "off": off, "len": len, "data": hex(data),
                           "region": region.as_str()})
                });
                self.env.charge(Tx::PostedWrite);
                match region {
                    Bar0Region::Hcr => self.hcr_write(off - HCR_BASE, data),
                    Bar0Region::Owner => self.owner_write(data),
                    Bar0Region::Reset => self.reset_block_write(off - RESET_BASE, data),
                    Bar0Region::Diag => self.diag_write(off - DIAG_BASE, data),
                    Bar0Region::Msix | Bar0Region::Undefined => self.env.protocol_error(
                        Code::UndefinedOffset,
                        format!("BAR0 write of {len} bytes at {off:#x}"),
                    ),
                }
            }
            2 => {
                self.env.counters.global.bar2_writes += 1;
                self.env.counters.global.bar2_bytes += len;
                let region = self.bar2_decode(off, len);
                self.env
                    .trace
                    .record("mmio_write", || Self::bar2_record(off, data, region));
                self.env.charge(match region {
                    Bar2Region::Bf { in_page, .. } => Tx::StoreBlock {
                        off: in_page % BF_HALF,
                        len,
                    },
                    _ => Tx::PostedWrite,
                });
                match region {
                    Bar2Region::Uar { page, in_page } => self.uar_write(page, in_page, data),
                    Bar2Region::Bf { page, in_page } => self.bf_write(page, in_page, data),
                    Bar2Region::Undefined => self.env.protocol_error(
                        Code::UndefinedOffset,
                        format!("BAR2 write of {len} bytes at {off:#x}"),
                    ),
                }
            }
            _ => {
                self.env.trace.record(
                    "mmio_write",
                    || json!({"bar": bar, "off": off, "len": len, "data": hex(data), "region": "none"}),
                );
                self.env.charge(Tx::PostedWrite);
                self.env
                    .protocol_error(Code::UndefinedRegion, format!("write to region {bar}"));
            }
        }
    }

    pub fn mmio_read(&mut self, bar: u32, off: u64, data: &mut [u8]) {
        data.fill(0);
        let len = data.len() as u64;
        match bar {
            0 => {
                let region = Bar0Region::decode(off, len);
                let err = match region {
                    Bar0Region::Hcr => {
                        self.hcr.read((off - HCR_BASE) as usize, data);
                        None
                    }
                    Bar0Region::Owner => self.owner_read(data),
                    Bar0Region::Reset => None, // the semaphore (and the rest) reads 0
                    Bar0Region::Diag => self.diag_read(off - DIAG_BASE, data),
                    Bar0Region::Msix | Bar0Region::Undefined => Some((
                        Code::UndefinedOffset,
                        format!("BAR0 read of {len} bytes at {off:#x}"),
                    )),
                };
                self.env.trace.record("mmio_read", || {
                    json!({"bar": 0, "off": off, "len": len, "data": hex(data),
                           "region": region.as_str()})
                });
                self.env.charge(Tx::NonPosted);
                if let Some((code, detail)) = err {
                    self.env.protocol_error(code, detail);
                }
            }
            2 => {
                let region = self.bar2_decode(off, len);
                self.env
                    .trace
                    .record("mmio_read", || Self::bar2_record(off, data, region));
                self.env.charge(Tx::NonPosted);
                let hits_register = match region {
                    Bar2Region::Uar { in_page, .. } => {
                        matches!(in_page, UAR_SEND_DB | UAR_CQ_DB | UAR_CQ_DB_HI)
                            || (UAR_EQ_DB..UAR_EQ_DB + 32).contains(&in_page)
                    }
                    _ => false,
                };
                if !hits_register {
                    self.env.protocol_error(
                        Code::UndefinedOffset,
                        format!("BAR2 read of {len} bytes at {off:#x} hits nothing"),
                    );
                }
            }
            _ => {
                self.env.trace.record(
                    "mmio_read",
                    || json!({"bar": bar, "off": off, "len": len, "data": hex(data), "region": "none"}),
                );
                self.env.charge(Tx::NonPosted);
                self.env
                    .protocol_error(Code::UndefinedRegion, format!("read of region {bar}"));
            }
        }
    }

    fn owner_read(&mut self, data: &mut [u8]) -> Option<(Code, String)> {
        if data.len() != 4 {
            return Some((
                Code::BadAccessSize,
                format!("{}-byte ownership read", data.len()),
            ));
        }
        // Reads 0 while free (and takes ownership), then 1.
        let v: u32 = if self.owned { 1 } else { 0 };
        self.owned = true;
        data.copy_from_slice(&v.to_be_bytes());
        None
    }

    fn owner_write(&mut self, data: &[u8]) {
        if data.len() != 4 || be32(data, 0) != 0 {
            self.env.protocol_error(
                Code::OwnershipBadWrite,
                format!("ownership write {} (only a 32-bit 0 frees it)", hex(data)),
            );
            return;
        }
        self.owned = false;
    }

    fn reset_block_write(&mut self, off: u64, data: &[u8]) {
        if off == RESET_REG && data.len() == 4 && be32(data, 0) == 1 {
            self.reset("reset_register");
        } else {
            self.env.protocol_error(
                Code::ResetBadWrite,
                format!(
                    "reset block write {} at +{off:#x} (only swab32(1) at +0x10)",
                    hex(data)
                ),
            );
        }
    }

    fn uar_write(&mut self, page: u32, in_page: u64, data: &[u8]) {
        match in_page {
            UAR_SEND_DB => self.send_doorbell(page, data),
            UAR_CQ_DB | UAR_CQ_DB_HI => self.cq_doorbell_write(page, in_page, data),
            o if (UAR_EQ_DB..UAR_EQ_DB + 32).contains(&o) && (o - UAR_EQ_DB).is_multiple_of(8) => {
                let eqn = page as u64 * 4 + (o - UAR_EQ_DB) / 8;
                if data.len() != 4 {
                    self.env.protocol_error(
                        Code::EqDoorbellBadSize,
                        format!("{}-byte EQ doorbell", data.len()),
                    );
                } else {
                    self.eq_doorbell(eqn, be32(data, 0));
                }
            }
            o => self.env.protocol_error(
                Code::UndefinedOffset,
                format!("UAR {page} write of {} bytes at +{o:#x}", data.len()),
            ),
        }
    }

    /// Device reset (reset register or the client's DEVICE_RESET): all
    /// contexts gone (MPTs and the MTT's contents too), HCR idle with T=0
    /// (a stalled command's GO cleared), ownership free. The analyzer state
    /// (counters, EXPECT window, QP_SELECT, FALLBACK_EVERY, an armed
    /// CMD_FAULT) and config space (Bus Master Enable) are kept.
    pub fn reset(&mut self, source: &str) {
        self.env
            .trace
            .record("device_reset", || json!({"source": source}));
        self.env.counters.lifetime.device_resets += 1;
        self.hcr = Hcr::default();
        self.owned = false;
        self.eqs = vec![None; NUM_EQS];
        self.event_map = [None; 64];
        self.cqs.clear();
        self.qps.clear();
        self.mrs = Mrs::default();
        self.bf = BfCollector::default();
        self.cq_db_half.clear();
        self.env.trace.flush();
    }

    /// End of the session: judge what is still pending, flush the trace.
    /// Idempotent (QEMU's disconnect and a signal may race).
    pub fn finish(&mut self) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        for ((page, half), burst) in std::mem::take(&mut self.bf.bursts) {
            self.env.protocol_error(
                Code::BfIncomplete,
                format!(
                    "BlueFlame burst on page {page} half {half} still pending at exit ({} bytes)",
                    burst.bytes.len()
                ),
            );
        }
        self.env.trace.record("exit", || json!({}));
        self.env.trace.flush();
    }

    pub fn summary(&self) -> Value {
        let mut v = self.env.counters.summary();
        v["clock_ns"] = self.env.clock.now().into();
        v["trace_records"] = self.env.trace.seq().into();
        v["trace_level"] = self.env.trace.level().as_str().into();
        v["trace_lines"] = self.env.trace.written().into();
        v["num_uars"] = self.cfg.num_uars.into();
        v["hw_mpts"] = self.mrs.hw_mpts().into();
        v["hw_mpt_pages"] = self.mrs.hw_pages().into();
        v
    }
}
