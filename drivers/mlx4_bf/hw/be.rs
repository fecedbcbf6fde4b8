// SPDX-License-Identifier: GPL-2.0

//! Big-endian fields of device structures (mailboxes, contexts, CQEs, EQEs)
//! held in byte buffers. Offsets are the structures' named constants; an
//! offset outside the buffer is a driver bug, answered with `-EINVAL` rather
//! than a panic.

use kernel::prelude::*;

fn field<const N: usize>(b: &[u8], at: usize) -> Result<[u8; N]> {
    let s = b.get(at..at.checked_add(N).ok_or(EINVAL)?).ok_or(EINVAL)?;
    let mut v = [0u8; N];
    v.copy_from_slice(s);
    Ok(v)
}

fn put<const N: usize>(b: &mut [u8], at: usize, v: [u8; N]) -> Result {
    b.get_mut(at..at.checked_add(N).ok_or(EINVAL)?)
        .ok_or(EINVAL)?
        .copy_from_slice(&v);
    Ok(())
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

pub(crate) fn put8(b: &mut [u8], at: usize, v: u8) -> Result {
    put(b, at, [v])
}

pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) -> Result {
    put(b, at, v.to_be_bytes())
}

pub(crate) fn put64(b: &mut [u8], at: usize, v: u64) -> Result {
    put(b, at, v.to_be_bytes())
}

/// Writes a 40-bit DMA address into `mtt_base_addr_h` (8 bits at `at`) and
/// `mtt_base_addr_l` (32 bits at `at + 1`): the model takes the buffer's DMA
/// address there instead of an MTT offset. It must be 4 KiB aligned.
pub(crate) fn put_mtt_addr(b: &mut [u8], at: usize, dma: u64) -> Result {
    if dma >> 40 != 0 || dma & 0xfff != 0 {
        return Err(ERANGE);
    }
    put8(b, at, (dma >> 32) as u8)?;
    put32(b, at + 1, dma as u32)
}
