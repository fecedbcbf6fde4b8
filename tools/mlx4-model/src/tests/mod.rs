//! Device-level tests: the pure `Device` driven through MMIO against a fake
//! guest memory, as a driver would.

pub(crate) mod bringup;
mod cq_modify;
mod data_fault;
mod device;
mod fault;
mod firmware;
mod fuzz;
pub(crate) mod harness;
mod latency;
mod mr;
mod pma;
mod receive;
mod record;
mod rereg;
mod strict_atomic;
mod strict_datapath;
mod strict_mr;
mod strict_qp_states;
mod strict_queues;
mod strict_rc;
mod strict_rnr;
mod strict_srq;
mod strict_ud;
mod strict_ud_rules;
