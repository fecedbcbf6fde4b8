// SPDX-License-Identifier: GPL-2.0

//! A QP's CQ as user space polls it (the ring and its consumer-index page,
//! mapped from the device file), a QP's receive side (ABI 2: that CQ and the
//! receive buffers), and the CQE (`abi::Cqe`, `struct mlx4_bf_cqe` of the
//! uapi header: big-endian fields).

use std::{
    io,
    mem::offset_of,
    ptr,
    sync::atomic::{fence, AtomicU32, AtomicU8, Ordering},
};

use anyhow::{bail, Context, Result};
use mlx4_bf_core::abi::{
    self, CQE_OPCODE_ERROR, CQE_OPCODE_MASK, CQE_OPCODE_RDMA_WRITE_IMM, CQE_OPCODE_SEND,
    CQE_OPCODE_SEND_IMM, CQE_OWNER,
};

use crate::device::{Device, Mapping};

/// Bytes of the CQE (`abi::Cqe`); a 64-byte entry keeps it in its upper half.
pub const CQE_LEN: usize = size_of::<abi::Cqe>();

/// Is CQE `n` (counted from 0, not wrapped) software's? Its owner bit must
/// equal `!!(n & cq_entries)` (`cq_entries` a power of two).
pub fn cqe_is_sw(owner_byte: u8, n: u32, cq_entries: u32) -> bool {
    mlx4_bf_core::ring::sw_owned(owner_byte & CQE_OWNER != 0, n, cq_entries)
}

/// The consumer index as the adapter reads it: `BE32(n & 0xffffff)`, as
/// the 4 bytes in memory order.
pub fn set_ci_bytes(n: u32) -> [u8; 4] {
    (n & 0xff_ffff).to_be_bytes()
}

/// A receive CQE, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cqe {
    pub my_qpn: u32,
    pub immediate: u32,
    pub src_qpn: u32,
    pub byte_cnt: u32,
    pub wqe_index: u16,
    pub opcode: u8,
    /// Of an error CQE (byte 0x1b).
    pub syndrome: u8,
    pub vendor_syndrome: u8,
}

/// The big-endian word at `at`.
fn be32(b: &[u8; CQE_LEN], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Cqe {
    /// Parses the bytes of an `abi::Cqe`.
    pub fn parse(b: &[u8; CQE_LEN]) -> Self {
        let wqe_index = offset_of!(abi::Cqe, wqe_index);
        Cqe {
            my_qpn: be32(b, offset_of!(abi::Cqe, my_qpn)) & 0xff_ffff,
            immediate: be32(b, offset_of!(abi::Cqe, immed)),
            src_qpn: be32(b, offset_of!(abi::Cqe, src_qpn)) & 0xff_ffff,
            byte_cnt: be32(b, offset_of!(abi::Cqe, byte_cnt)),
            wqe_index: u16::from_be_bytes([b[wqe_index], b[wqe_index + 1]]),
            opcode: b[offset_of!(abi::Cqe, owner_sr_opcode)] & CQE_OPCODE_MASK,
            syndrome: b[offset_of!(abi::Cqe, syndrome)],
            vendor_syndrome: b[offset_of!(abi::Cqe, vendor_err_syndrome)],
        }
    }

    pub fn is_error(&self) -> bool {
        self.opcode == CQE_OPCODE_ERROR
    }

    /// What is wrong with this CQE for a SEND of `len` bytes from
    /// `peer_qpn` to `my_qpn`; `None` if it is that SEND's.
    pub fn check_send(&self, my_qpn: u32, peer_qpn: u32, len: usize) -> Option<String> {
        if self.is_error() {
            return Some(self.error_text());
        }
        if self.opcode != CQE_OPCODE_SEND && self.opcode != CQE_OPCODE_SEND_IMM {
            return Some(format!(
                "CQE opcode {:#04x}, not a received SEND",
                self.opcode
            ));
        }
        if let Some(why) = self.check_qp(my_qpn) {
            return Some(why);
        }
        if self.src_qpn != peer_qpn {
            return Some(format!(
                "SEND from QP {:#x}, not the peer {peer_qpn:#x}",
                self.src_qpn
            ));
        }
        self.check_len(len)
    }

    /// What is wrong with this CQE for an RDMA_WRITE_IMM of `len` bytes
    /// with immediate `imm` from `peer_qpn` to `my_qpn`; `None` if it is
    /// that write's. The source QPN may be left 0 (verbs define it for UD
    /// only); another QP's is wrong.
    pub fn check_write_imm(
        &self,
        my_qpn: u32,
        peer_qpn: u32,
        len: usize,
        imm: u32,
    ) -> Option<String> {
        if self.is_error() {
            return Some(self.error_text());
        }
        if self.opcode != CQE_OPCODE_RDMA_WRITE_IMM {
            return Some(format!(
                "CQE opcode {:#04x}, not a received RDMA_WRITE_IMM ({CQE_OPCODE_RDMA_WRITE_IMM:#04x})",
                self.opcode
            ));
        }
        if let Some(why) = self.check_qp(my_qpn) {
            return Some(why);
        }
        if self.src_qpn != peer_qpn && self.src_qpn != 0 {
            return Some(format!(
                "RDMA_WRITE_IMM from QP {:#x}, not the peer {peer_qpn:#x}",
                self.src_qpn
            ));
        }
        if let Some(why) = self.check_len(len) {
            return Some(why);
        }
        (self.immediate != imm)
            .then(|| format!("immediate {:#010x}, {imm:#010x} was sent", self.immediate))
    }

    /// An error CQE, described.
    fn error_text(&self) -> String {
        format!(
            "error CQE: syndrome {:#04x} ({}), vendor syndrome {:#04x}, receive WQE {}",
            self.syndrome,
            syndrome_name(self.syndrome),
            self.vendor_syndrome,
            self.wqe_index
        )
    }

    fn check_qp(&self, my_qpn: u32) -> Option<String> {
        (self.my_qpn != my_qpn)
            .then(|| format!("CQE for QP {:#x}, not this QP {my_qpn:#x}", self.my_qpn))
    }

    fn check_len(&self, len: usize) -> Option<String> {
        (self.byte_cnt as usize != len)
            .then(|| format!("byte count {}, {len} bytes were sent", self.byte_cnt))
    }
}

/// `MLX4_CQE_SYNDROME_*`.
pub fn syndrome_name(s: u8) -> &'static str {
    match s {
        0x01 => "local length error",
        0x02 => "local QP operation error",
        0x04 => "local protection error",
        0x05 => "work request flushed",
        0x06 => "memory window bind error",
        0x10 => "bad response",
        0x11 => "local access error",
        0x12 => "remote invalid request",
        0x13 => "remote access error",
        0x14 => "remote operation error",
        0x15 => "transport retry counter exceeded",
        0x16 => "RNR retry counter exceeded",
        0x22 => "remote aborted",
        _ => "unknown",
    }
}

/// A QP's CQ as user space polls it: the ring and the consumer-index page.
pub struct CqRing {
    ring: Mapping,
    db: Mapping,
    entries: u32,
    cqe_size: u32,
    /// CQEs consumed so far (not wrapped).
    pub ci: u32,
}

impl CqRing {
    /// Maps the CQ of `qp` from `dev`.
    pub fn map(dev: &Device, qp: &abi::QpInfo) -> Result<Self> {
        let (entries, size) = (qp.cq_entries as usize, qp.cqe_size as usize);
        if !qp.cq_entries.is_power_of_two() || !(size == 32 || size == 64) {
            bail!(
                "the driver reports a CQ of {entries} entries of {size} bytes: \
                 not a power of two of 32- or 64-byte CQEs"
            );
        }
        let ring = dev
            .map(qp.cq_offset, entries * size, false)
            .context("mmap of the CQ")?;
        let db = dev
            .map(qp.cq_db_offset, 4096, true)
            .context("mmap of the CQ consumer index")?;
        Ok(Self::from_mappings(qp, ring, db))
    }

    fn from_mappings(qp: &abi::QpInfo, ring: Mapping, db: Mapping) -> Self {
        CqRing {
            ring,
            db,
            entries: qp.cq_entries,
            cqe_size: qp.cqe_size,
            ci: 0,
        }
    }

    /// The legacy 32 bytes of entry `n`.
    fn cqe_ptr(&self, n: u32) -> *const u8 {
        let size = self.cqe_size as usize;
        let slot = (n & (self.entries - 1)) as usize;
        // SAFETY: slot < entries, so the entry lies inside the mapping.
        unsafe { self.ring.as_ptr().add(slot * size + size - CQE_LEN) }
    }

    /// Is the next CQE (number `ci`) software's? One load of its owner byte.
    pub fn ready(&self) -> bool {
        let p = self
            .cqe_ptr(self.ci)
            .wrapping_add(offset_of!(abi::Cqe, owner_sr_opcode));
        // SAFETY: inside the CQ mapping; the adapter writes it concurrently,
        // so read it atomically.
        let b = unsafe { AtomicU8::from_ptr(p.cast_mut()) }.load(Ordering::Relaxed);
        cqe_is_sw(b, self.ci, self.entries)
    }

    /// Reads the next CQE, which [`ready`](Self::ready) said is software's:
    /// the acquire fence orders the rest after the owner byte.
    pub fn read(&self) -> Cqe {
        fence(Ordering::Acquire);
        let mut b = [0u8; CQE_LEN];
        // SAFETY: 32 bytes inside the CQ mapping; the adapter is done with
        // an entry whose owner bit is software's.
        unsafe { ptr::copy_nonoverlapping(self.cqe_ptr(self.ci), b.as_mut_ptr(), CQE_LEN) };
        Cqe::parse(&b)
    }

    /// Consumes the current CQE: publishes `ci + 1` to the adapter.
    pub fn consume(&mut self) {
        self.ci = self.ci.wrapping_add(1);
        let v = u32::from_ne_bytes(set_ci_bytes(self.ci));
        // SAFETY: the first 4 bytes of the consumer-index page, aligned.
        unsafe { AtomicU32::from_ptr(self.db.as_ptr().cast()) }.store(v, Ordering::Release);
    }
}

/// The receive side of one QP, mapped.
pub struct RecvQueue {
    pub qp: abi::QpInfo,
    cq: CqRing,
    bufs: Mapping,
}

impl RecvQueue {
    /// Maps the CQ ring, its consumer-index page and the receive buffers of
    /// `qp` from `dev`.
    pub fn map(dev: &Device, qp: abi::QpInfo) -> Result<Self> {
        if qp.rq_entries == 0 || qp.recv_buf_size == 0 {
            bail!(
                "the driver reports {} receive buffers of {} bytes",
                qp.rq_entries,
                qp.recv_buf_size
            );
        }
        let cq = CqRing::map(dev, &qp).context("the receive CQ")?;
        let bufs = dev
            .map(
                qp.recv_offset,
                qp.rq_entries as usize * qp.recv_buf_size as usize,
                false,
            )
            .context("mmap of the receive buffers")?;
        Ok(RecvQueue { qp, cq, bufs })
    }

    /// Is the next receive CQE there?
    pub fn ready(&self) -> bool {
        self.cq.ready()
    }

    /// Reads the next CQE, which [`ready`](Self::ready) said is there.
    pub fn read(&self) -> Cqe {
        self.cq.read()
    }

    /// The receive buffer of receive WQE `wqe_index`, `len` bytes of it.
    pub fn buffer(&self, wqe_index: u16, len: usize) -> io::Result<&[u8]> {
        let size = self.qp.recv_buf_size as usize;
        if len > size {
            return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
        }
        let i = usize::from(wqe_index) % self.qp.rq_entries as usize;
        // SAFETY: buffer i < rq_entries, len <= recv_buf_size: inside the
        // mapping; the adapter is done writing it (its CQE is consumed).
        Ok(unsafe { std::slice::from_raw_parts(self.bufs.as_ptr().add(i * size), len) })
    }

    /// Consumes the current CQE.
    pub fn consume(&mut self) {
        self.cq.consume()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cqe(opcode_byte: u8) -> [u8; CQE_LEN] {
        let mut b = [0u8; CQE_LEN];
        b[0..4].copy_from_slice(&0xab00_0041u32.to_be_bytes());
        b[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
        b[8..12].copy_from_slice(&0x8000_0082u32.to_be_bytes());
        b[0x14..0x18].copy_from_slice(&100u32.to_be_bytes());
        b[0x18..0x1a].copy_from_slice(&0x0203u16.to_be_bytes());
        b[0x1a] = 0x77;
        b[0x1b] = 0x01;
        b[0x1f] = opcode_byte;
        b
    }

    #[test]
    fn a_receive_cqe_parses_its_big_endian_fields() {
        let c = Cqe::parse(&cqe(0x80 | CQE_OPCODE_SEND));
        assert_eq!(c.my_qpn, 0x41);
        assert_eq!(c.immediate, 0x1234_5678);
        assert_eq!(c.src_qpn, 0x82, "the GRH bit is not part of the QPN");
        assert_eq!((c.byte_cnt, c.wqe_index, c.opcode), (100, 0x203, 1));
        assert_eq!(c.check_send(0x41, 0x82, 100), None);
        assert!(c
            .check_send(0x41, 0x82, 99)
            .unwrap()
            .contains("byte count 100"));
        assert!(c
            .check_send(0x42, 0x82, 100)
            .unwrap()
            .contains("not this QP"));
        assert!(c
            .check_send(0x41, 0x83, 100)
            .unwrap()
            .contains("not the peer"));
    }

    #[test]
    fn an_rdma_write_imm_cqe_is_checked_by_its_immediate() {
        let mut b = cqe(0x80 | CQE_OPCODE_RDMA_WRITE_IMM);
        let c = Cqe::parse(&b);
        assert_eq!(c.opcode, CQE_OPCODE_RDMA_WRITE_IMM);
        assert_eq!(c.check_write_imm(0x41, 0x82, 100, 0x1234_5678), None);
        assert_eq!(
            c.check_write_imm(0x41, 0x82, 100, 0x1234_5679).unwrap(),
            "immediate 0x12345678, 0x12345679 was sent"
        );
        assert!(c
            .check_write_imm(0x41, 0x82, 99, 0x1234_5678)
            .unwrap()
            .contains("byte count 100"));
        assert!(c
            .check_write_imm(0x41, 0x83, 100, 0x1234_5678)
            .unwrap()
            .contains("not the peer"));
        // No source QPN is fine for an RDMA write.
        b[8..12].fill(0);
        assert_eq!(
            Cqe::parse(&b).check_write_imm(0x41, 0x82, 100, 0x1234_5678),
            None
        );
        // A SEND is not a write, nor a write a SEND.
        let send = Cqe::parse(&cqe(0x80 | CQE_OPCODE_SEND));
        assert!(send
            .check_write_imm(0x41, 0x82, 100, 0x1234_5678)
            .unwrap()
            .contains("not a received RDMA_WRITE_IMM"));
        assert!(c
            .check_send(0x41, 0x82, 100)
            .unwrap()
            .contains("not a received SEND"));
        let err = Cqe::parse(&cqe(CQE_OPCODE_ERROR));
        assert!(err
            .check_write_imm(0x41, 0x82, 100, 0)
            .unwrap()
            .contains("error CQE"));
    }

    #[test]
    fn an_error_cqe_names_its_syndrome() {
        let c = Cqe::parse(&cqe(CQE_OPCODE_ERROR));
        assert!(c.is_error());
        let why = c.check_send(0x41, 0x82, 100).unwrap();
        assert!(why.contains("syndrome 0x01 (local length error)"), "{why}");
        assert!(why.contains("vendor syndrome 0x77"), "{why}");
    }

    #[test]
    fn owner_parity_flips_each_pass_of_the_ring() {
        let n = 8;
        // First pass: owner 0 is software's; the initial 1s are the adapter's.
        assert!(cqe_is_sw(0x01, 0, n) && cqe_is_sw(0x01, 7, n));
        assert!(!cqe_is_sw(0x81, 0, n));
        // Second pass (n & 8 set): owner 1.
        assert!(cqe_is_sw(0x81, 8, n) && cqe_is_sw(0x81, 15, n));
        assert!(!cqe_is_sw(0x01, 8, n));
        // Third pass, and across the u32 wrap.
        assert!(cqe_is_sw(0x00, 16, n));
        assert!(cqe_is_sw(0x80, u32::MAX, n));
        assert!(cqe_is_sw(0x00, u32::MAX.wrapping_add(1), n));
    }

    /// A shared memory file standing in for the device's areas: the
    /// helper's read-only view and the "adapter's" writable one.
    fn memfd(len: usize) -> (std::fs::File, Mapping, Mapping) {
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: a new anonymous file, owned by the File below.
        let fd = unsafe { libc::memfd_create(c"mlx4-bf-test".as_ptr(), 0) };
        assert!(fd >= 0);
        let f = unsafe { std::fs::File::from_raw_fd(fd) };
        f.set_len(len as u64).unwrap();
        let ro = Mapping::new(f.as_raw_fd(), 0, len, false).unwrap();
        let rw = Mapping::new(f.as_raw_fd(), 0, len, true).unwrap();
        (f, ro, rw)
    }

    #[test]
    fn the_ring_is_read_in_order_across_its_wrap() {
        let qp = abi::QpInfo {
            qpn: 0x41,
            rq_entries: 4,
            recv_buf_size: 64,
            cq_entries: 4,
            cqe_size: 32,
            ..Default::default()
        };
        let (_cf, cq, cq_hw) = memfd(4 * 32);
        let (_df, db_view, db) = memfd(4096);
        let (_bf, bufs, bufs_hw) = memfd(4 * 64);
        // The adapter hands out the ring with every owner bit set.
        for i in 0..4 {
            unsafe { *cq_hw.as_ptr().add(i * 32 + 31) = 0x80 };
        }
        let mut rq = RecvQueue {
            cq: CqRing::from_mappings(&qp, cq, db),
            qp,
            bufs,
        };
        for n in 0u32..10 {
            assert!(!rq.ready(), "CQE {n} before it is written");
            let slot = (n % 4) as usize;
            let mut b = cqe(if n & 4 != 0 { 0x80 } else { 0 } | CQE_OPCODE_SEND);
            b[0x18..0x1a].copy_from_slice(&(n as u16).to_be_bytes());
            b[0x14..0x18].copy_from_slice(&3u32.to_be_bytes());
            let buf = unsafe { bufs_hw.as_ptr().add(slot * 64) };
            unsafe { std::ptr::copy_nonoverlapping([n as u8, 1, 2].as_ptr(), buf, 3) };
            // The owner byte last, as the adapter writes it.
            let p = unsafe { cq_hw.as_ptr().add(slot * 32) };
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), p, 31) };
            unsafe { *p.add(31) = b[31] };
            assert!(rq.ready(), "CQE {n}");
            let c = rq.read();
            assert_eq!((c.wqe_index, c.byte_cnt), (n as u16, 3));
            assert_eq!(rq.buffer(c.wqe_index, 3).unwrap(), [n as u8, 1, 2]);
            rq.consume();
            let ci = unsafe { std::ptr::read(db_view.as_ptr().cast::<[u8; 4]>()) };
            assert_eq!(ci, set_ci_bytes(n + 1));
        }
        assert!(rq.buffer(0, 65).is_err());
    }

    #[test]
    fn the_consumer_index_is_24_bits_big_endian() {
        assert_eq!(set_ci_bytes(1), [0, 0, 0, 1]);
        assert_eq!(set_ci_bytes(0x0102_0304), [0, 2, 3, 4]);
        assert_eq!(set_ci_bytes(0x00ff_ffff + 1), [0, 0, 0, 0]);
    }
}
