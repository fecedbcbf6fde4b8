//! mlx4-model: a ConnectX-3 (mlx4) adapter for the test bed, served to QEMU
//! over vfio-user. It decodes what the driver writes with its own code,
//! executes it and records every transaction like a PCI analyzer.
//!
//! The device is a pure, synchronous state machine ([`Device`]); guest
//! memory and interrupts are behind the small [`GuestMemory`] and [`Irq`]
//! traits, and the vfio-user glue lives in [`server`].
//! Documentation/mlx4-model.rst is the interface, mlx4-model-design.rst the
//! inside.

pub mod bytes;
pub mod command;
pub mod config;
pub mod counters;
pub mod cq;
pub mod datapath;
pub mod device;
pub mod diag;
pub mod env;
pub mod eq;
pub mod fault;
pub mod firmware;
pub mod guest_memory;
pub mod hcr;
pub mod irq;
pub mod keys;
pub mod layout;
pub mod mr;
pub mod pci;
pub mod port_counters;
pub mod protocol;
pub mod qbuf;
pub mod qp;
pub mod regions;
pub mod rq;
pub mod server;
pub mod srq;
pub mod timing;
pub mod trace;
pub mod wqe;

#[cfg(test)]
mod tests;

pub use config::Config;
pub use device::Device;
pub use guest_memory::{DmaError, FakeMemory, GuestMemory};
pub use irq::{Irq, RecordingIrq};
pub use trace::{TraceLevel, Tracer};
