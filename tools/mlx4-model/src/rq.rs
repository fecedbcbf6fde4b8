//! Receive queues (§5.6, §6), pure decoding: the RQ doorbell record and a
//! receive WQE's scatter list. A receive WQE is an array of 16-byte data
//! segments (byte_count, lkey, addr) filling the stride, without an owner
//! bit; a segment with lkey MLX4_INVALID_LKEY ends it early.

use crate::bytes::{be32, be64};
use crate::keys::INVALID_LKEY;

pub const RECV_SEG_SIZE: usize = 16;
/// The RQ doorbell record: 4 bytes, big-endian, low 16 bits = head.
pub const RQ_DB_LEN: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvSeg {
    pub len: u32,
    pub lkey: u32,
    pub addr: u64,
}

/// The producer count ("head") in a doorbell record.
pub fn head(rec: &[u8]) -> u16 {
    (be32(rec, 0) & 0xffff) as u16
}

/// Receive WQEs posted and not consumed, given the record's head and the
/// consumer index: (how many the model may use, whether the head claimed
/// more than the RQ holds).
pub fn available(head: u16, rq_ci: u32, entries: u32) -> (u32, bool) {
    let n = u32::from(head.wrapping_sub(rq_ci as u16));
    (n.min(entries), n > entries)
}

/// The scatter list of the receive WQE in `b` (one stride).
pub fn parse(b: &[u8]) -> Vec<RecvSeg> {
    b.chunks_exact(RECV_SEG_SIZE)
        .map(|s| RecvSeg {
            len: be32(s, 0),
            lkey: be32(s, 4),
            addr: be64(s, 8),
        })
        .take_while(|s| s.lkey != INVALID_LKEY)
        .collect()
}

/// Bytes the scatter list can take.
pub fn capacity(segs: &[RecvSeg]) -> u64 {
    segs.iter().map(|s| u64::from(s.len)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::{put_be32, put_be64};

    fn seg(b: &mut [u8], i: usize, len: u32, lkey: u32, addr: u64) {
        put_be32(b, i * 16, len);
        put_be32(b, i * 16 + 4, lkey);
        put_be64(b, i * 16 + 8, addr);
    }

    #[test]
    fn invalid_lkey_ends_the_list() {
        let mut b = [0u8; 64];
        seg(&mut b, 0, 100, 8, 0x1000);
        seg(&mut b, 1, 50, 8, 0x2000);
        seg(&mut b, 2, 0, INVALID_LKEY, 0);
        seg(&mut b, 3, 999, 8, 0x3000);
        let s = parse(&b);
        assert_eq!(s.len(), 2);
        assert_eq!(
            s[1],
            RecvSeg {
                len: 50,
                lkey: 8,
                addr: 0x2000
            }
        );
        assert_eq!(capacity(&s), 150);
        // A full stride without a terminator: every segment counts.
        seg(&mut b, 2, 1, 8, 0x4000);
        assert_eq!(capacity(&parse(&b)), 1150);
    }

    #[test]
    fn head_and_available() {
        assert_eq!(head(&[0xff, 0xff, 0x00, 0x05]), 5);
        assert_eq!(available(5, 3, 16), (2, false));
        assert_eq!(available(3, 3, 16), (0, false));
        // Wraps at 2^16, whatever the consumer index's upper bits.
        assert_eq!(available(2, 0x1_fffe, 16), (4, false));
        assert_eq!(available(20, 0, 16), (16, true));
    }
}
