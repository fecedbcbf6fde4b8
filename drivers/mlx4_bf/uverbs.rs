// SPDX-License-Identifier: GPL-2.0

//! The uverbs-style wire format of `MLX4_BF_IOCTL`: a header, then up to
//! `MLX4_BF_MAX_ATTRS` attributes, read with `copy_from_user` into a bundle
//! on the stack. Methods pick their attributes out of the bundle; what is left
//! over is refused if it was marked mandatory and ignored otherwise, so the
//! ABI grows the way uverbs does.

use kernel::{
    prelude::*,
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice},
};

use crate::abi::{self, Attr, IoctlHdr, ATTR_F_MANDATORY, ATTR_F_VALID_OUTPUT, MAX_ATTRS};

// SAFETY: Plain `repr(C)` integers without padding: any bit pattern is valid.
unsafe impl FromBytes for IoctlHdr {}
// SAFETY: As above.
unsafe impl FromBytes for Attr {}
// SAFETY: `repr(C)` integers without padding.
unsafe impl AsBytes for abi::DeviceInfo {}
// SAFETY: As above.
unsafe impl AsBytes for abi::ContextInfo {}
// SAFETY: As above.
unsafe impl AsBytes for abi::QpInfo {}
// SAFETY: As above.
unsafe impl AsBytes for abi::PostResult {}
// SAFETY: As above.
unsafe impl AsBytes for abi::Stats {}

// The kernel crate's `error::code` has neither of these two in 7.2.

/// `-EPROTONOSUPPORT`: no such object or method (what uverbs answers).
pub(crate) fn eprotonosupport() -> Error {
    Error::from_errno(-(kernel::bindings::EPROTONOSUPPORT as i32))
}

/// `-EOPNOTSUPP`: a mandatory attribute this kernel does not know.
fn eopnotsupp() -> Error {
    Error::from_errno(-(kernel::bindings::EOPNOTSUPP as i32))
}

const HDR_LEN: usize = core::mem::size_of::<IoctlHdr>();
const ATTR_LEN: usize = core::mem::size_of::<Attr>();
/// Offset of `flags` in `struct mlx4_bf_attr`.
const ATTR_FLAGS_OFFSET: usize = 4;

/// One call: the header and its attributes, and which of them a method used.
pub(crate) struct Bundle {
    pub(crate) object_id: u16,
    pub(crate) method_id: u16,
    user: usize,
    attrs: [Attr; MAX_ATTRS],
    count: usize,
    used: u32,
}

impl Bundle {
    /// Reads and checks the header and attributes at user address `arg`.
    pub(crate) fn read(arg: usize) -> Result<Self> {
        let hdr: IoctlHdr = UserSlice::new(UserPtr::from_addr(arg), HDR_LEN)
            .reader()
            .read()?;
        let count = abi::check_hdr(&hdr).map_err(|_| EINVAL)?;
        let mut reader =
            UserSlice::new(UserPtr::from_addr(arg + HDR_LEN), count * ATTR_LEN).reader();
        let mut attrs = [Attr::default(); MAX_ATTRS];
        for i in 0..count {
            let attr: Attr = reader.read()?;
            // Unknown flag bits are reserved; an attribute given twice is ambiguous.
            if attr.reserved != 0
                || attr.flags & !ATTR_F_MANDATORY != 0
                || attrs[..i].iter().any(|a| a.attr_id == attr.attr_id)
            {
                return Err(EINVAL);
            }
            attrs[i] = attr;
        }
        Ok(Bundle {
            object_id: hdr.object_id,
            method_id: hdr.method_id,
            user: arg,
            attrs,
            count,
            used: 0,
        })
    }

    fn find(&mut self, attr_id: u16) -> Option<(usize, Attr)> {
        let i = self.attrs[..self.count]
            .iter()
            .position(|a| a.attr_id == attr_id)?;
        self.used |= 1 << i;
        Some((i, self.attrs[i]))
    }

    /// An input passed inline: exactly `N` bytes in `data`.
    pub(crate) fn inline<const N: usize>(&mut self, attr_id: u16) -> Result<Option<[u8; N]>> {
        match self.find(attr_id) {
            None => Ok(None),
            Some((_, a)) if usize::from(a.len) != N || N > 8 => Err(EINVAL),
            Some((_, a)) => {
                let mut v = [0u8; N];
                v.copy_from_slice(&a.data.to_ne_bytes()[..N]);
                Ok(Some(v))
            }
        }
    }

    pub(crate) fn inline_u32(&mut self, attr_id: u16) -> Result<Option<u32>> {
        Ok(self.inline::<4>(attr_id)?.map(u32::from_ne_bytes))
    }

    /// An input passed by pointer: its user slice.
    pub(crate) fn input_ptr(&mut self, attr_id: u16) -> Option<UserSlice> {
        let (_, a) = self.find(attr_id)?;
        Some(UserSlice::new(
            UserPtr::from_addr(a.data as usize),
            usize::from(a.len),
        ))
    }

    /// Marks an output attribute as present; write it with [`Self::write`].
    pub(crate) fn output(&mut self, attr_id: u16) -> Option<usize> {
        self.find(attr_id).map(|(i, _)| i)
    }

    /// Writes `value` to output attribute `index` (its `len` must match) and
    /// sets `MLX4_BF_ATTR_F_VALID_OUTPUT` in the caller's copy of its flags.
    pub(crate) fn write<T: AsBytes>(&self, index: usize, value: &T) -> Result {
        let a = self.attrs[index];
        if usize::from(a.len) != core::mem::size_of::<T>() {
            return Err(EINVAL);
        }
        UserSlice::new(UserPtr::from_addr(a.data as usize), usize::from(a.len))
            .writer()
            .write(value)?;
        let flags = a.flags | ATTR_F_VALID_OUTPUT;
        let at = self.user + HDR_LEN + index * ATTR_LEN + ATTR_FLAGS_OFFSET;
        UserSlice::new(UserPtr::from_addr(at), 2)
            .writer()
            .write(&flags)
    }

    /// After a method took its attributes: refuses unknown mandatory ones.
    pub(crate) fn check_unused(&self) -> Result {
        let unknown_mandatory = self.attrs[..self.count]
            .iter()
            .enumerate()
            .any(|(i, a)| self.used & (1 << i) == 0 && a.flags & ATTR_F_MANDATORY != 0);
        if unknown_mandatory {
            Err(eopnotsupp())
        } else {
            Ok(())
        }
    }
}
