//! What the device's components act on besides their own state: guest
//! memory and interrupts (only through `dma`), config space (Bus Master
//! Enable), the tracer, the modelled PCIe clock and the analyzer's
//! counters. A component's method that takes `&mut Env` may touch these;
//! one that does not, cannot.

use crate::counters::Counters;
use crate::pci::ConfigSpace;
use crate::protocol::Code;
use crate::timing::{Clock, Tx};
use crate::trace::Tracer;
use serde_json::json;

pub struct Env<M, I> {
    /// Touched only through `dma`, which checks bus mastering.
    pub(crate) mem: M,
    pub(crate) irq: I,
    pub(crate) pci: ConfigSpace,
    pub(crate) trace: Tracer,
    pub(crate) counters: Counters,
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
}

impl<M, I> Env<M, I> {
    pub fn new(mem: M, irq: I, pci: ConfigSpace, trace: Tracer) -> Self {
        Env {
            mem,
            irq,
            pci,
            trace,
            counters: Counters::default(),
            clock: Clock::default(),
            expect: 0,
            mmio_start_ns: 0,
            post_start_ns: 0,
        }
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
