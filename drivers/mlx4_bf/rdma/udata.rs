// SPDX-License-Identifier: GPL-2.0

//! A provider's part of a verbs call (`struct ib_udata`): the request user
//! space appended for the provider and room for the provider's response,
//! read and written as typed values under the core's rules
//! (`include/rdma/ib_verbs.h`, "udata"): a request at least as long as its
//! first version and zero past what the kernel knows; a response cut to
//! what user space has room for and zero-filled beyond.

use core::marker::PhantomData;
use kernel::{bindings, error::to_result, prelude::*};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::{object::UContext, Driver};

/// The udata of one verbs call on a device of `T`.
///
/// # Invariants
///
/// `raw` is the call's `struct ib_udata`, valid for the call, which is a
/// call on a device of `T`.
pub(crate) struct Udata<'a, T: Driver> {
    raw: &'a mut bindings::ib_udata,
    _t: PhantomData<T>,
}

impl<'a, T: Driver> Udata<'a, T> {
    /// # Safety
    ///
    /// `raw` is null or the udata of the verbs call being served on a
    /// device of `T`, valid for `'a`.
    pub(super) unsafe fn from_raw(raw: *mut bindings::ib_udata) -> Option<Self> {
        // SAFETY: By the caller's guarantee.
        unsafe { raw.as_mut() }.map(|raw| Udata {
            raw,
            _t: PhantomData,
        })
    }

    /// The request, at least `min_len` bytes of it (the size of its first
    /// version): `-EINVAL` if shorter, `-EOPNOTSUPP` if user space set
    /// bytes past what `R` knows, `-EFAULT` if unreadable
    /// (`ib_copy_validate_udata_in()`).
    pub(crate) fn read<R>(&self, min_len: usize) -> Result<R>
    where
        R: FromBytes + IntoBytes + KnownLayout + Immutable,
    {
        let mut req = R::new_zeroed();
        let raw = core::ptr::from_ref::<bindings::ib_udata>(self.raw).cast_mut();
        // SAFETY: `raw` is the call's udata (type invariant); `req` is valid
        // for `size_of::<R>()` bytes, any of which make a valid `R`.
        to_result(unsafe {
            bindings::_ib_copy_validate_udata_in(
                raw,
                req.as_mut_bytes().as_mut_ptr().cast(),
                core::mem::size_of::<R>(),
                min_len,
            )
        })?;
        Ok(req)
    }

    /// `-EOPNOTSUPP` unless the request is empty or all zero
    /// (`ib_is_udata_in_empty()`): for calls without a provider request.
    pub(crate) fn expect_empty(&self) -> Result {
        if self.raw.inlen == 0 {
            return Ok(());
        }
        let _: [u8; 0] = self.read(0)?;
        Ok(())
    }

    /// Whether user space sent a request at all.
    pub(crate) fn has_request(&self) -> bool {
        self.raw.inlen != 0
    }

    /// Room user space left for the response.
    pub(crate) fn out_len(&self) -> usize {
        self.raw.outlen
    }

    /// Writes the response, cut to the room user space left and zero-filled
    /// past it (`ib_respond_udata()`).
    pub(crate) fn respond<W: IntoBytes + Immutable>(&mut self, resp: &W) -> Result {
        let bytes = resp.as_bytes();
        // SAFETY: `raw` is the call's udata (type invariant); `bytes` is valid
        // for its length.
        to_result(unsafe {
            bindings::_ib_respond_udata(self.raw, bytes.as_ptr().cast(), bytes.len())
        })
    }

    /// The verbs context of the call, live for the call.
    pub(crate) fn ucontext(&self) -> Result<&'a UContext<T>> {
        let raw = core::ptr::from_ref::<bindings::ib_udata>(self.raw).cast_mut();
        // SAFETY: `raw` is the udata of a uverbs call, which is embedded in
        // its attribute bundle, as the helper expects.
        let ctx = unsafe { bindings::rdma_udata_to_drv_context(raw) };
        if ctx.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: A non-null context of a call on a device of `T` (type
        // invariant) is one `T`'s `alloc_ucontext` constructed (calls come
        // only once it returned), live for the call.
        Ok(unsafe { UContext::from_core(ctx) })
    }
}
