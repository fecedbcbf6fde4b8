// SPDX-License-Identifier: GPL-2.0

//! The wire format of `MLX4_BF_IOCTL`: a header, then up to
//! `MLX4_BF_MAX_ATTRS` attributes, read with `copy_from_user` into a bundle
//! on the stack. Methods pick their attributes out of the bundle; what is left
//! over is refused if it was marked mandatory and ignored otherwise, so the
//! ABI grows the way uverbs does.

use kernel::{
    prelude::*,
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice},
};

use core::mem::MaybeUninit;

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
// SAFETY: As above.
unsafe impl AsBytes for abi::MrInfo {}
// SAFETY: As above.
unsafe impl AsBytes for abi::QpSendInfo {}

const HDR_LEN: usize = core::mem::size_of::<IoctlHdr>();
const ATTR_LEN: usize = core::mem::size_of::<Attr>();
/// Offset of `flags` in `struct mlx4_bf_attr`.
const ATTR_FLAGS_OFFSET: usize = 4;

/// Attribute ids the index of a bundle covers (all the ABI defines).
const ATTR_IDS: usize = 32;

/// Where a call's attributes are read to: the caller's stack, left
/// uninitialized (a post's cost is counted per byte stored, see
/// Documentation/performance.rst, and a bundle that owned them would be
/// copied when returned).
pub(crate) type AttrStore = [MaybeUninit<Attr>; MAX_ATTRS];

pub(crate) const fn attr_store() -> AttrStore {
    [const { MaybeUninit::uninit() }; MAX_ATTRS]
}

/// One call: the header and its attributes, and which of them a method used.
pub(crate) struct Bundle<'a> {
    pub(crate) object_id: u16,
    pub(crate) method_id: u16,
    user: usize,
    /// The first `count` are initialized.
    attrs: &'a AttrStore,
    count: usize,
    /// Per attribute id below `ATTR_IDS`: 1 + its index in `attrs`, 0 if
    /// absent; larger ids are unknown to every method. A byte each: one
    /// load per lookup (as four bits of a `u128`, every lookup was a
    /// 128-bit shift).
    by_id: [u8; ATTR_IDS],
    used: u32,
}

impl<'a> Bundle<'a> {
    /// Reads and checks the header and attributes at user address `arg`:
    /// two copies from user space, however many attributes. Inlined into the
    /// ioctl, so the bundle is built in place.
    #[inline(always)]
    pub(crate) fn read(arg: usize, attrs: &'a mut AttrStore) -> Result<Self> {
        let hdr: IoctlHdr = UserSlice::new(UserPtr::from_addr(arg), HDR_LEN)
            .reader()
            .read()?;
        let count = abi::check_hdr(&hdr).map_err(|_| EINVAL)?;
        // The attributes straight into the caller's store: `struct
        // mlx4_bf_attr` is integers only, so any bytes are a valid `Attr`
        // (native-endian, as user space laid them out).
        // SAFETY: The store is `MAX_ATTRS` `Attr`s, as many bytes as viewed
        // here, and is only written through this view until the loop below.
        let raw = unsafe {
            core::slice::from_raw_parts_mut(
                attrs.as_mut_ptr().cast::<MaybeUninit<u8>>(),
                MAX_ATTRS * ATTR_LEN,
            )
        };
        if count != 0 {
            UserSlice::new(UserPtr::from_addr(arg + HDR_LEN), count * ATTR_LEN)
                .reader()
                .read_raw(&mut raw[..count * ATTR_LEN])?;
        }
        let mut by_id = [0u8; ATTR_IDS];
        for i in 0..count {
            // SAFETY: `read_raw()` initialized the first `count` attributes.
            let attr = unsafe { attrs[i].assume_init_ref() };
            let id = usize::from(attr.attr_id);
            // Unknown flag bits are reserved; an attribute given twice is
            // ambiguous (an unknown id twice too: it is never looked up).
            let twice = if id < ATTR_IDS {
                by_id[id] != 0
            } else {
                attrs[..i]
                    .iter()
                    // SAFETY: As above (`i < count`).
                    .any(|a| unsafe { a.assume_init_ref() }.attr_id == attr.attr_id)
            };
            if attr.reserved != 0 || attr.flags & !ATTR_F_MANDATORY != 0 || twice {
                return Err(EINVAL);
            }
            if id < ATTR_IDS {
                by_id[id] = i as u8 + 1;
            }
        }
        Ok(Bundle {
            object_id: hdr.object_id,
            method_id: hdr.method_id,
            user: arg,
            attrs,
            count,
            by_id,
            used: 0,
        })
    }

    #[inline]
    fn find(&mut self, attr_id: u16) -> Option<(usize, Attr)> {
        let id = usize::from(attr_id);
        if id >= ATTR_IDS {
            return None;
        }
        let i = usize::from(self.by_id[id]);
        let i = i.checked_sub(1)?;
        self.used |= 1 << i;
        Some((i, self.attr(i)))
    }

    /// Attribute `i` (< `count`: `by_id` holds no other index).
    #[inline]
    fn attr(&self, i: usize) -> Attr {
        debug_assert!(i < self.count);
        // SAFETY: `read()` initialized the first `count` attributes, and
        // every index handed out comes from `by_id`, which names only those.
        unsafe { self.attrs[i].assume_init() }
    }

    /// An input passed inline: exactly `len` bytes at the start of `data`
    /// (as user space stored them), returned as all of `data`.
    #[inline]
    fn inline(&mut self, attr_id: u16, len: u16) -> Result<Option<u64>> {
        match self.find(attr_id) {
            None => Ok(None),
            Some((_, a)) if a.len != len => Err(EINVAL),
            Some((_, a)) => Ok(Some(a.data)),
        }
    }

    /// An inline `__u32`: the first four bytes of `data` in memory.
    #[inline]
    pub(crate) fn inline_u32(&mut self, attr_id: u16) -> Result<Option<u32>> {
        let first_half = |d: u64| {
            if cfg!(target_endian = "big") {
                (d >> 32) as u32
            } else {
                d as u32
            }
        };
        Ok(self.inline(attr_id, 4)?.map(first_half))
    }

    /// An inline `__u64`.
    #[inline]
    pub(crate) fn inline_u64(&mut self, attr_id: u16) -> Result<Option<u64>> {
        self.inline(attr_id, 8)
    }

    /// An input passed by pointer: its user slice.
    #[inline]
    pub(crate) fn input_ptr(&mut self, attr_id: u16) -> Option<UserSlice> {
        let (_, a) = self.find(attr_id)?;
        Some(UserSlice::new(
            UserPtr::from_addr(a.data as usize),
            usize::from(a.len),
        ))
    }

    /// Marks an output attribute as present; write it with [`Self::write`].
    #[inline]
    pub(crate) fn output(&mut self, attr_id: u16) -> Option<usize> {
        self.find(attr_id).map(|(i, _)| i)
    }

    /// Writes `value` to output attribute `index` (its `len` must match) and
    /// sets `MLX4_BF_ATTR_F_VALID_OUTPUT` in the caller's copy of its flags.
    pub(crate) fn write<T: AsBytes>(&self, index: usize, value: &T) -> Result {
        if index >= self.count {
            return Err(EINVAL);
        }
        let a = self.attr(index);
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
    #[inline]
    pub(crate) fn check_unused(&self) -> Result {
        let unused = !self.used & ((1u32 << self.count) - 1);
        if unused == 0 {
            return Ok(());
        }
        self.check_unknown(unused)
    }

    /// The attributes no method took: only optional ones may be among them.
    #[cold]
    fn check_unknown(&self, unused: u32) -> Result {
        let unknown_mandatory = (0..self.count)
            .any(|i| unused & (1 << i) != 0 && self.attr(i).flags & ATTR_F_MANDATORY != 0);
        if unknown_mandatory {
            Err(crate::sys::errno::eopnotsupp())
        } else {
            Ok(())
        }
    }
}
