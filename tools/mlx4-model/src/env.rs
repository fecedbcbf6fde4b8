//! What the device's components act on besides their own state: guest
//! memory and interrupts, config space (Bus Master Enable), the tracer,
//! the modelled PCIe clock and the analyzer's counters. A component's
//! method that takes `&mut Env` may touch these; one that does not, cannot.
//!
//! The function's own requests on the bus: every DMA read and write of
//! guest memory and every MSI-X message goes out here, and nowhere else.
//! While the command register's Bus Master Enable is clear the function may
//! not issue them: the request is not made (a read gives zeroes, a write and
//! an MSI are dropped), costs no bus time, is counted (diag NO_MASTER_DMA)
//! and recorded (`no_master_dma`), and the operation that needed it is
//! abandoned as if its memory were unreachable. Not a protocol error in
//! itself: a test asserts on the count (what the abandoned operation
//! leads to may be one, e.g. a doorbell with nothing to fetch).

use crate::bytes::hex;
use crate::counters::Counters;
use crate::guest_memory::{DmaError, GuestMemory};
use crate::irq::Irq;
use crate::pci::ConfigSpace;
use crate::port_counters::PortCounters;
use crate::protocol::Code;
use crate::timing::{Clock, Read, Tx};
use crate::trace::Tracer;
use serde_json::{json, Value};

pub struct Env<M, I> {
    /// Touched only through the DMA and MSI-X methods below, which check
    /// bus mastering.
    mem: M,
    irq: I,
    pub(crate) pci: ConfigSpace,
    pub(crate) trace: Tracer,
    pub(crate) counters: Counters,
    /// Port 1's traffic, as its PMA reports it (not the analyzer's).
    pub(crate) port: PortCounters,
    /// The modelled PCIe clock (`timing`).
    pub(crate) clock: Clock,
    /// Diag EXPECT: nonzero while a test's window is open; the protocol
    /// errors inside it count as expected.
    pub(crate) expect: u32,
    /// When the MMIO write being handled started (its record's t_ns).
    pub(crate) mmio_start_ns: u64,
    /// When the post whose WQEs run now started: its doorbell or the first
    /// write of its BlueFlame burst.
    pub(crate) post_start_ns: u64,
    /// Whether the WQE running now is timed from `post_start_ns`: false
    /// for one a doorbell's scan ran ahead to (the guest wrote it, its own
    /// doorbell is still on its way), whose post has not reached the bus.
    pub(crate) post_timed: bool,
}

impl<M, I> Env<M, I> {
    pub fn new(mem: M, irq: I, pci: ConfigSpace, trace: Tracer) -> Self {
        Env {
            mem,
            irq,
            pci,
            trace,
            counters: Counters::default(),
            port: PortCounters::default(),
            clock: Clock::default(),
            expect: 0,
            mmio_start_ns: 0,
            post_start_ns: 0,
            post_timed: true,
        }
    }

    pub fn mem(&self) -> &M {
        &self.mem
    }

    /// The guest memory itself, outside the device's bus (tests, the
    /// shell's DMA maps): nothing is checked, recorded or charged.
    pub fn mem_mut(&mut self) -> &mut M {
        &mut self.mem
    }

    pub fn irq(&self) -> &I {
        &self.irq
    }

    pub fn irq_mut(&mut self) -> &mut I {
        &mut self.irq
    }

    /// Advances the clock by one transaction's cost; later records carry
    /// the new time.
    pub(crate) fn charge(&mut self, tx: Tx) {
        self.clock.advance(tx);
        self.trace.set_time(self.clock.now());
    }

    /// A protocol error: counted (as expected inside an EXPECT window),
    /// recorded and flushed.
    pub(crate) fn protocol_error(&mut self, code: Code, detail: impl Into<String>) {
        let expected = self.expect != 0;
        let detail = detail.into();
        self.counters.protocol_error(code, expected);
        log::debug!("protocol error {}: {detail}", code.as_str());
        self.trace.record(
            "protocol_error",
            || json!({"code": code.as_str(), "detail": detail, "expected": expected}),
        );
        self.trace.flush();
    }
}

/// Why a DMA access was not made or failed. Already counted and recorded
/// (and a protocol error if the memory is unreachable); the operation that
/// needed it is abandoned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DmaFailed {
    /// Bus Master Enable is clear: the request was not made.
    #[error("bus mastering is off")]
    NoBusMaster,
    /// The guest memory refused it.
    #[error(transparent)]
    Memory(#[from] DmaError),
}

impl<M: GuestMemory, I: Irq> Env<M, I> {
    /// False (counted, recorded with `fields`) if bus mastering is off.
    fn may_master(&mut self, fields: impl FnOnce() -> Value) -> bool {
        if self.pci.bus_master() {
            return true;
        }
        self.counters.lifetime.no_master_dma += 1;
        self.trace.record("no_master_dma", fields);
        false
    }

    /// DMA read, charged as `read` says; a failure is recorded as
    /// `dma_unmapped`.
    pub(crate) fn dma_read(
        &mut self,
        addr: u64,
        buf: &mut [u8],
        what: &'static str,
        read: Read,
    ) -> Result<(), DmaFailed> {
        let len = buf.len();
        if !self.may_master(|| json!({"op": "read", "addr": addr, "len": len, "what": what})) {
            buf.fill(0);
            return Err(DmaFailed::NoBusMaster);
        }
        let r = self.mem.read(addr, buf);
        self.trace.record("dma_read", || {
            let mut rec = json!({"addr": addr, "len": buf.len(), "what": what});
            if r.is_ok() && matches!(what, "wqe" | "db_rec" | "mailbox" | "rwqe") {
                rec["data"] = hex(buf).into();
            }
            if r.is_err() {
                rec["ok"] = false.into();
            }
            rec
        });
        self.charge(Tx::DmaRead {
            len: buf.len() as u64,
            read,
        });
        if let Err(e) = &r {
            self.protocol_error(Code::DmaUnmapped, format!("{what} read: {e}"));
        }
        Ok(r?)
    }

    /// DMA write (posted, charged); counted when it succeeds.
    pub(crate) fn dma_write(
        &mut self,
        addr: u64,
        data: &[u8],
        what: &'static str,
    ) -> Result<(), DmaFailed> {
        let len = data.len();
        if !self.may_master(|| json!({"op": "write", "addr": addr, "len": len, "what": what})) {
            return Err(DmaFailed::NoBusMaster);
        }
        let r = self.mem.write(addr, data);
        self.trace.record("dma_write", || {
            let mut rec = json!({"addr": addr, "len": data.len(), "what": what});
            if r.is_ok() && what == "mailbox" {
                rec["data"] = hex(data).into();
            }
            if r.is_err() {
                rec["ok"] = false.into();
            }
            rec
        });
        self.charge(Tx::DmaWrite {
            len: data.len() as u64,
        });
        match &r {
            Ok(()) => self.counters.global.dma_writes += 1,
            Err(e) => self.protocol_error(Code::DmaUnmapped, format!("{what} write: {e}")),
        }
        Ok(r?)
    }

    /// MSI-X `vector`: on PCIe a memory write, so it needs bus mastering
    /// too.
    pub(crate) fn raise(&mut self, vector: u16) {
        if !self.may_master(|| json!({"op": "msi", "vector": vector})) {
            return;
        }
        self.counters.global.msix_irqs += 1;
        let delivered = self.irq.raise(vector);
        self.trace
            .record("irq", || json!({"vector": vector, "delivered": delivered}));
        self.charge(Tx::Msi);
        if !delivered {
            self.protocol_error(
                Code::MsixNotEnabled,
                format!("MSI-X vector {vector} raised but not set up by the guest"),
            );
        }
    }
}
