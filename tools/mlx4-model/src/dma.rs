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
use crate::env::Env;
use crate::guest_memory::{DmaError, GuestMemory};
use crate::irq::Irq;
use crate::protocol::Code;
use crate::timing::{Read, Tx};
use serde_json::{json, Value};

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
