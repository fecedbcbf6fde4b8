//! The data path: what a send doorbell or a BlueFlame burst sets off. It
//! runs on an [`engine::Engine`], which borrows the environment and the
//! tables a post may touch (the MR table read-only); the BlueFlame
//! collector is the one component of its own here.
//!
//! - `send`: the send doorbell, the send-queue scan, WQE execution and
//!   the requester's completion;
//! - `blueflame`: collecting BF bursts, executing them or falling back;
//! - `deliver`: a SEND on RC or UC to the responder's receive queue;
//! - `recv`: the receiving side a SEND or RDMA_WRITE_IMM shares: the RQ,
//!   the receive WQE, the scatter, the receive completion;
//! - `srq_recv`: the same from a shared receive queue, and its limit event;
//! - `ud`, `ud_recv`: a UD SEND, its datagram routed on the port, dropped
//!   or received;
//! - `rdma`: an RDMA write into the responder's region, an RDMA read from
//!   it;
//! - `atomic`: CMP_SWAP and FETCH_ADD on the responder's region;
//! - `mad`: a send on a special QP (MLX), completed, not delivered;
//! - `rnr`: an RC delivery NAKed for RNR, retried on the timer clock;
//! - `wire`: a message on the port, charged and counted (the PMA's
//!   counters);
//! - `sq_hold`: a send queue that cannot run now (SQD, behind an RNR
//!   retry), and the state a send error leaves.

pub mod atomic;
pub mod blueflame;
pub mod deliver;
pub mod engine;
pub mod mad;
pub mod rdma;
pub mod recv;
pub mod rnr;
pub mod send;
pub mod sq_hold;
pub mod srq_recv;
pub mod ud;
pub mod ud_recv;
pub mod wire;
