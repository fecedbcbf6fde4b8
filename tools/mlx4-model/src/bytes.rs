//! Big-endian field access for device structures (contexts, mailboxes, WQEs,
//! CQEs, EQEs). Offsets are constants of the layouts, never guest values, and
//! every buffer is sized by the model before these helpers are called.

pub fn be16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

pub fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

pub fn be64(b: &[u8], off: usize) -> u64 {
    (u64::from(be32(b, off)) << 32) | u64::from(be32(b, off + 4))
}

pub fn put_be16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

pub fn put_be32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_be_bytes());
}

pub fn put_be64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_be_bytes());
}

/// Lower-case hex, bytes in bus order.
pub fn hex(b: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(DIGITS[usize::from(x >> 4)] as char);
        s.push(DIGITS[usize::from(x & 0xf)] as char);
    }
    s
}

/// A 40-bit queue buffer address from an `mtt_base_addr_h`/`_l` pair.
pub fn addr40(b: &[u8], off_h: usize, off_l: usize) -> u64 {
    (u64::from(b[off_h]) << 32) | u64::from(be32(b, off_l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut b = [0u8; 16];
        put_be16(&mut b, 0, 0x1234);
        put_be32(&mut b, 2, 0xdead_beef);
        put_be64(&mut b, 6, 0x0102_0304_0506_0708);
        assert_eq!(be16(&b, 0), 0x1234);
        assert_eq!(be32(&b, 2), 0xdead_beef);
        assert_eq!(be64(&b, 6), 0x0102_0304_0506_0708);
        assert_eq!(hex(&b[..3]), "1234de");
    }
}
