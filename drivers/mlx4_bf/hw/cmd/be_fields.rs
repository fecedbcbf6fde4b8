// SPDX-License-Identifier: GPL-2.0

//! Big-endian fields of device structures.
//!
//! The contexts this driver writes (EQ, CQ, QP) are `#[repr(C)]` structs of
//! these types, laid out as mlx4's C structs (alignment 1, no padding: the
//! `IntoBytes` derive checks it, const asserts pin the offsets). Mailboxes
//! mlx4 itself reads with `MLX4_GET()` at offsets (QUERY_FW,
//! QUERY_DEV_CAP) are read the same way here, with `get*`; an offset outside
//! the buffer is a driver bug, answered with `-EINVAL` rather than a panic.

use kernel::prelude::*;
use zerocopy::byteorder::{BigEndian, U16, U32, U64};

/// `__be16`.
pub(crate) type Be16 = U16<BigEndian>;
/// `__be32`.
pub(crate) type Be32 = U32<BigEndian>;
/// `__be64`.
pub(crate) type Be64 = U64<BigEndian>;

/// `mtt_base_addr_h` (8 bits) and `mtt_base_addr_l` (32 bits) of a
/// context: a 40-bit MTT byte address.
pub(crate) fn mtt_fields(mtt_addr: u64) -> Result<(u8, Be32)> {
    if mtt_addr >> 40 != 0 || mtt_addr % crate::region::MTT_ENTRY_LEN != 0 {
        return Err(ERANGE);
    }
    Ok(((mtt_addr >> 32) as u8, Be32::new(mtt_addr as u32)))
}

fn field<const N: usize>(b: &[u8], at: usize) -> Result<[u8; N]> {
    let s = b.get(at..at.checked_add(N).ok_or(EINVAL)?).ok_or(EINVAL)?;
    let mut v = [0u8; N];
    v.copy_from_slice(s);
    Ok(v)
}

pub(crate) fn get8(b: &[u8], at: usize) -> Result<u8> {
    Ok(field::<1>(b, at)?[0])
}

pub(crate) fn get16(b: &[u8], at: usize) -> Result<u16> {
    Ok(u16::from_be_bytes(field(b, at)?))
}

pub(crate) fn get32(b: &[u8], at: usize) -> Result<u32> {
    Ok(u32::from_be_bytes(field(b, at)?))
}

pub(crate) fn get64(b: &[u8], at: usize) -> Result<u64> {
    Ok(u64::from_be_bytes(field(b, at)?))
}
