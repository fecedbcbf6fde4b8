//! The adapter as a pure, synchronous state machine: MMIO in, DMA and
//! interrupts out through the `GuestMemory` and `Irq` traits (only via
//! `env`), every transaction recorded by the tracer. `Device` owns its
//! components (the HCR, the EQ, CQ, QP and MR tables, the BlueFlame
//! collector, the diag block) and the environment they act on (`env`);
//! this file decodes BAR0 and BAR2 and hands each access to the component
//! it is for, lending it the environment and the tables it may touch.

use crate::bytes::{be32, hex};
use crate::config::Config;
use crate::counters::Counters;
use crate::cq::CqTable;
use crate::datapath::blueflame::BfCollector;
use crate::datapath::engine::Engine;
use crate::diag::{DiagState, Gauges};
use crate::env::Env;
use crate::eq::EqTable;
use crate::firmware::Firmware;
use crate::guest_memory::GuestMemory;
use crate::hcr::{Hcr, Tables};
use crate::irq::Irq;
use crate::layout::*;
use crate::mr::MrTable;
use crate::pci::ConfigSpace;
use crate::protocol::Code;
use crate::qp::QpTable;
use crate::regions::{Bar0Region, Bar2Region};
use crate::timing::Tx;
use crate::trace::Tracer;
use serde_json::{json, Value};

pub struct Device<M, I> {
    cfg: Config,
    /// Memory, interrupts, config space, trace, clock and counters.
    env: Env<M, I>,
    hcr: Hcr,
    /// The firmware's life cycle (`firmware`).
    fw: Firmware,
    owned: bool,
    eqs: EqTable,
    cqs: CqTable,
    qps: QpTable,
    /// The MTT and the MPTs in hardware ownership.
    mrs: MrTable,
    bf: BfCollector,
    diag: DiagState,
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
            fw: Firmware::new(),
            owned: false,
            eqs: EqTable::default(),
            cqs: CqTable::default(),
            qps: QpTable::default(),
            mrs: MrTable::default(),
            bf: BfCollector::default(),
            finished: false,
        }
    }

    /// The timer clock (the server's wall clock, a test's chosen time, ns)
    /// reads `now_ns`: RNR retries are scheduled and run
    /// (`datapath::rnr`). Returns when the earliest retry waiting is due
    /// (None: none waits).
    pub fn tick(&mut self, now_ns: u64) -> Option<u64> {
        self.engine().0.run_timers(now_ns)
    }

    /// The modelled PCIe clock now (ns).
    pub fn clock_ns(&self) -> u64 {
        self.env.clock.now()
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn mem(&self) -> &M {
        self.env.mem()
    }

    pub fn mem_mut(&mut self) -> &mut M {
        self.env.mem_mut()
    }

    pub fn irq(&self) -> &I {
        self.env.irq()
    }

    pub fn irq_mut(&mut self) -> &mut I {
        self.env.irq_mut()
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
                    Bar0Region::Hcr => {
                        let tables = Tables {
                            num_uars: self.cfg.num_uars,
                            eqs: &mut self.eqs,
                            cqs: &mut self.cqs,
                            qps: &mut self.qps,
                            mrs: &mut self.mrs,
                            cmd_fault: &mut self.diag.cmd_fault,
                            fw: &mut self.fw,
                        };
                        self.hcr.write(&mut self.env, tables, off - HCR_BASE, data);
                        // SQD2RTS or SQERR2RTS may have released held posts.
                        self.engine().0.resume_flagged();
                    }
                    Bar0Region::Owner => self.owner_write(data),
                    Bar0Region::Reset => self.reset_block_write(off - RESET_BASE, data),
                    Bar0Region::Diag => self.diag.write(&mut self.env, off - DIAG_BASE, data),
                    // mlx4_interrupt's write of clr_mask (INTx): the model's
                    // INTx line is never asserted, so nothing to clear.
                    Bar0Region::ClrInt => {}
                    Bar0Region::Msix | Bar0Region::Catas | Bar0Region::Undefined => {
                        self.env.protocol_error(
                            Code::UndefinedOffset,
                            format!("BAR0 write of {len} bytes at {off:#x}"),
                        )
                    }
                }
            }
            2 => {
                self.env.counters.global.bar2_writes += 1;
                self.env.counters.global.bar2_bytes += len;
                let region = Bar2Region::decode(off, len, self.cfg.num_uars);
                self.env
                    .trace
                    .record("mmio_write", || region.record(off, data));
                match region {
                    Bar2Region::Uar { page, .. } => self.env.counters.uar(page).uar_writes += 1,
                    Bar2Region::Bf { page, .. } => {
                        let u = self.env.counters.uar(page);
                        u.bf_writes += 1;
                        u.bf_bytes += len;
                    }
                    Bar2Region::Undefined => {}
                }
                self.env.charge(match region {
                    Bar2Region::Bf { in_page, .. } => Tx::StoreBlock {
                        off: in_page % BF_HALF,
                        len,
                    },
                    _ => Tx::PostedWrite,
                });
                match region {
                    Bar2Region::Uar { page, in_page } => self.uar_write(page, in_page, data),
                    Bar2Region::Bf { page, in_page } => {
                        let (mut eng, bf) = self.engine();
                        bf.write(&mut eng, page, in_page, data);
                    }
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
                    // core/catas.c:poll_catas: all zero while healthy.
                    Bar0Region::Catas => None,
                    Bar0Region::Diag => {
                        let gauges = self.gauges();
                        self.diag.read(&self.env, &gauges, off - DIAG_BASE, data)
                    }
                    Bar0Region::Msix | Bar0Region::ClrInt | Bar0Region::Undefined => Some((
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
                let region = Bar2Region::decode(off, len, self.cfg.num_uars);
                self.env
                    .trace
                    .record("mmio_read", || region.record(off, data));
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

    /// The data path's borrow of the device for one MMIO write, and the
    /// BlueFlame collector beside it (a BlueFlame write runs on the engine).
    fn engine(&mut self) -> (Engine<'_, M, I>, &mut BfCollector) {
        let eng = Engine {
            env: &mut self.env,
            qps: &mut self.qps,
            cqs: &mut self.cqs,
            eqs: &mut self.eqs,
            mrs: &self.mrs,
            diag: &mut self.diag,
        };
        (eng, &mut self.bf)
    }

    fn uar_write(&mut self, page: u32, in_page: u64, data: &[u8]) {
        match in_page {
            UAR_SEND_DB => {
                self.engine().0.send_doorbell(page, data);
            }
            UAR_CQ_DB | UAR_CQ_DB_HI => {
                self.cqs
                    .doorbell_write(&mut self.env, &mut self.eqs, page, in_page, data)
            }
            o if (UAR_EQ_DB..UAR_EQ_DB + 32).contains(&o) && (o - UAR_EQ_DB).is_multiple_of(8) => {
                let eqn = page as u64 * 4 + (o - UAR_EQ_DB) / 8;
                if data.len() != 4 {
                    self.env.protocol_error(
                        Code::EqDoorbellBadSize,
                        format!("{}-byte EQ doorbell", data.len()),
                    );
                } else {
                    self.eqs.doorbell(&mut self.env, eqn, be32(data, 0));
                }
            }
            o => self.env.protocol_error(
                Code::UndefinedOffset,
                format!("UAR {page} write of {} bytes at +{o:#x}", data.len()),
            ),
        }
    }

    /// Device reset (reset register or the client's DEVICE_RESET): all
    /// contexts gone (the MPTs too), HCR idle with T=0 (a stalled
    /// command's GO cleared), the firmware stopped (firmware area, ICM and
    /// HCA gone); ownership stays taken until a driver writes 0, as
    /// mlx4_core reads it once before its reset
    /// (`core/main.c:mlx4_load_one`). The analyzer state
    /// (counters, EXPECT window, QP_SELECT, FALLBACK_EVERY, an armed
    /// CMD_FAULT) and config space (Bus Master Enable) are kept; the
    /// port's PMA counters are cleared.
    pub fn reset(&mut self, source: &str) {
        self.env
            .trace
            .record("device_reset", || json!({"source": source}));
        self.env.counters.lifetime.device_resets += 1;
        self.hcr = Hcr::default();
        self.fw.reset();
        self.eqs = EqTable::default();
        self.cqs = CqTable::default();
        self.qps = QpTable::default();
        self.mrs = MrTable::default();
        self.bf = BfCollector::default();
        self.env.port = Default::default();
        self.env.trace.flush();
    }

    /// End of the session: judge what is still pending, flush the trace.
    /// Idempotent (QEMU's disconnect and a signal may race).
    pub fn finish(&mut self) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        for ((page, half), burst) in self.bf.take_pending() {
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

    #[cfg(test)]
    pub(crate) fn qps(&self) -> &QpTable {
        &self.qps
    }

    #[cfg(test)]
    pub(crate) fn qps_mut(&mut self) -> &mut QpTable {
        &mut self.qps
    }

    #[cfg(test)]
    pub(crate) fn cqs(&self) -> &CqTable {
        &self.cqs
    }

    #[cfg(test)]
    pub(crate) fn eqs(&self) -> &EqTable {
        &self.eqs
    }

    #[cfg(test)]
    pub(crate) fn fw(&self) -> &Firmware {
        &self.fw
    }

    #[cfg(test)]
    pub(crate) fn mrs(&self) -> &MrTable {
        &self.mrs
    }

    /// What the diag block shows of the device's state.
    fn gauges(&self) -> Gauges {
        let queues = self.eqs.live() + self.cqs.len();
        Gauges {
            live: (queues as u64) | ((self.qps.len() as u64) << 32),
            hw_mpts: self.mrs.hw_mpts(),
            hw_mpt_pages: self.mrs.hw_pages(),
            fw_phase: self.fw.phase() as u64,
            fw_pages: self.fw.host_pages(),
            icm_pages: self.fw.icm().pages(),
        }
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
