// SPDX-License-Identifier: GPL-2.0

//! The bytes of the messages: each message's own payload pattern and
//! immediate (so a stale buffer never passes the receiver's check), and an
//! endpoint's payload and WQE buffers.

use anyhow::{anyhow, bail, Result};
use mlx4_bf_core::{wqe, wqe_build};

use crate::rdma_write::{build_rdma_write, set_imm, Carry};

/// The side that sends a payload; part of its pattern.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Client = 0x00,
    Server = 0xa5,
}

/// The payload of message `seq` from `side`: different for every message
/// that reuses a receive buffer (or, RDMA-written, the same place of the
/// peer's region), so a buffer the adapter did not write never passes the
/// check.
pub(super) fn fill(buf: &mut [u8], side: Side, seq: u32) {
    let s = (seq as u8).wrapping_mul(31) ^ (seq >> 8) as u8 ^ (seq >> 16) as u8 ^ side as u8;
    for (j, b) in buf.iter_mut().enumerate() {
        *b = s ^ (j as u8).wrapping_mul(7) ^ (j >> 8) as u8;
    }
}

/// The immediate of RDMA_WRITE_IMM message `seq` from `side`: its
/// sequence number, with the side in the top byte.
pub(super) fn imm_of(side: Side, seq: u32) -> u32 {
    seq ^ ((side as u32) << 24)
}

/// Whether `got` (where message `seq` landed: `place`) holds the bytes
/// sent, `expect`.
pub(super) fn check_bytes(got: &[u8], expect: &[u8], seq: u32, place: &str) -> Result<()> {
    match got.iter().zip(expect).position(|(g, e)| g != e) {
        None if got.len() == expect.len() => Ok(()),
        None => bail!(
            "message {seq} ({} bytes, {place}): {} bytes arrived",
            expect.len(),
            got.len()
        ),
        Some(i) => bail!(
            "message {seq} ({} bytes, {place}): byte {i} is {:#04x}, {:#04x} was sent",
            expect.len(),
            got[i],
            expect[i]
        ),
    }
}

/// Payload and WQE buffers of one endpoint.
pub(super) struct Buffers {
    pub(super) payload: Vec<u8>,
    pub(super) expect: Vec<u8>,
    pub(super) wqe: [u8; wqe::MAX_WQE_LEN],
}

impl Buffers {
    pub(super) fn new() -> Self {
        Buffers {
            payload: vec![0; 65536],
            expect: vec![0; 65536],
            wqe: [0; wqe::MAX_WQE_LEN],
        }
    }

    /// The RDMA_WRITE_IMM of message `seq` of `size` bytes from `side` to
    /// `dst` (`(raddr, rkey)`), the immediate its sequence number: inline
    /// if it fits `max_wqe`, else gathered from `src` (`(addr, lkey)`),
    /// where `gathered` puts the payload. Returns the WQE's length.
    pub(super) fn write_imm(
        &mut self,
        (size, side, seq): (usize, Side, u32),
        src: (u64, u32),
        dst: (u64, u32),
        max_wqe: usize,
        gathered: impl FnOnce(&[u8]),
    ) -> Result<usize> {
        let payload = &mut self.payload[..size];
        fill(payload, side, seq);
        let (len, how) = build_rdma_write(
            &mut self.wqe,
            wqe::OPCODE_RDMA_WRITE_IMM,
            payload,
            src,
            dst,
            false,
            max_wqe,
        )
        .ok_or_else(|| anyhow!("a {size}-byte RDMA write does not fit a WQE"))?;
        if how == Carry::Gather {
            // The peer has answered the previous message: the adapter is
            // done reading the region.
            gathered(payload);
        }
        set_imm(&mut self.wqe[..len], imm_of(side, seq));
        Ok(len)
    }

    /// The inline SEND of message `seq` from `side`; its length.
    pub(super) fn build(&mut self, size: usize, side: Side, seq: u32) -> Result<usize> {
        fill(&mut self.payload[..size], side, seq);
        wqe_build::build_inline(&mut self.wqe, wqe::OPCODE_SEND, None, &self.payload[..size])
            .ok_or_else(|| anyhow!("a {size}-byte payload does not fit a WQE inline"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn immediates_differ_between_sides_and_messages() {
        assert_eq!(imm_of(Side::Client, 7), 7);
        assert_eq!(imm_of(Side::Server, 7), 0xa500_0007);
        for seq in [0u32, 1, 0xff_ffff, 0x100_0000, u32::MAX] {
            assert_ne!(imm_of(Side::Client, seq), imm_of(Side::Server, seq));
            assert_ne!(
                imm_of(Side::Client, seq),
                imm_of(Side::Client, seq.wrapping_add(1))
            );
        }
    }

    #[test]
    fn payloads_differ_between_messages_sharing_a_buffer_and_between_sides() {
        let (mut a, mut b) = ([0u8; 300], [0u8; 300]);
        for rq_entries in [1u32, 16, 256, 512] {
            for seq in [0u32, 1, 255, 1000] {
                fill(&mut a, Side::Client, seq);
                fill(&mut b, Side::Client, seq + rq_entries);
                assert!(
                    a.iter().zip(&b).all(|(x, y)| x != y),
                    "seq {seq} + {rq_entries}"
                );
            }
        }
        fill(&mut a, Side::Client, 7);
        fill(&mut b, Side::Server, 7);
        assert!(a.iter().zip(&b).all(|(x, y)| x != y));
    }
}
