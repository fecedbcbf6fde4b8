// SPDX-License-Identifier: GPL-2.0

//! The entry points of shared receive queues: create, modify (the limit),
//! query and destroy. A basic SRQ only: XRC SRQs, whose creation names an
//! XRC domain and a CQ, are refused. The core's guarantees they rely on are
//! `ops.rs`', and: a QP made on an SRQ holds it (`srq->usecnt`), so the SRQ
//! is destroyed only after every QP that uses it (`ib_destroy_srq_user()`
//! refuses while one does).

use core::ptr::NonNull;
use kernel::{bindings, error::from_result, ffi::c_int, prelude::*};

use super::{super::not_supported, user, Entry};
use crate::rdma::{
    attr::SrqAttr,
    object::{InCore, Pd, Srq},
    udata::Udata,
    Driver, SrqData,
};

impl<T: Driver> Entry<T> {
    /// # Safety
    ///
    /// `srq` is the core's fresh, zeroed SRQ of `Srq::<T>::SIZE` bytes, its
    /// `device` ours and its `pd` a live PD of it, published only if this
    /// returns 0; `init` is the core's attributes and `udata` null or the
    /// call's udata, both valid for the call.
    pub(super) unsafe extern "C" fn create_srq(
        srq: *mut bindings::ib_srq,
        init: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core's attributes and the call's udata.
            let (raw, udata) = unsafe { (&mut *init, Udata::<T>::from_raw(udata)) };
            if raw.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
                return Err(not_supported());
            }
            let mut udata = user(udata)?;
            // SAFETY: The core's fresh SRQ, whose PD it set (non-null checked).
            let pd = unsafe {
                let pd = (*srq).pd;
                if pd.is_null() {
                    return Err(EINVAL);
                }
                Pd::<T>::from_core(pd)
            };
            let mut attr = SrqAttr::from_raw(&raw.attr);
            let made = T::create_srq(pd, &mut attr, &mut udata);
            // SAFETY: A fresh SRQ of `Srq<T>::SIZE`, not published.
            unsafe { InCore::<_, T::Srq>::init(srq, made)? };
            // SAFETY: Just constructed; its destroy op takes it out of the
            // events before it goes.
            let this = unsafe { Srq::<T>::from_core(srq) };
            let core = NonNull::new(srq).ok_or(EINVAL)?;
            // SAFETY: A live SRQ of the device, taken out by `destroy_srq`.
            let entered = unsafe { pd.device().events().add_srq(this.data().number(), core) };
            if let Err(e) = entered {
                // SAFETY: Not published: the core frees it after this error.
                unsafe { InCore::<_, T::Srq>::drop_data(srq) };
                return Err(e);
            }
            // What was made: mainline reports the queue's size back.
            attr.write_to(&mut raw.attr);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `srq` is a live SRQ `create_srq` made; `attr` is the core's
    /// attributes and `udata` null or the call's udata, both valid for the
    /// call.
    pub(super) unsafe extern "C" fn modify_srq(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: A live SRQ of ours; the core's attributes; the call's
            // udata.
            let (this, raw, udata) = unsafe {
                (
                    Srq::<T>::from_core(srq),
                    &*attr,
                    Udata::<T>::from_raw(udata),
                )
            };
            let mut udata = user(udata)?;
            T::modify_srq(this, &SrqAttr::from_raw(raw), mask, &mut udata)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `srq` is a live SRQ `create_srq` made; `attr` is valid for writes
    /// for the call (the core's, maybe uninitialized).
    pub(super) unsafe extern "C" fn query_srq(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: A live SRQ of ours.
            let this = unsafe { Srq::<T>::from_core(srq) };
            let answer = T::query_srq(this)?;
            // SAFETY: Valid for writes (the contract): written whole before
            // the reference is made; nobody else uses it during the call.
            let raw = unsafe {
                attr.write(pin_init::zeroed());
                &mut *attr
            };
            answer.write_to(raw);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `srq` is a live SRQ `create_srq` made, which the core destroys after
    /// every QP that uses it: nobody else uses it, and the core frees it
    /// afterwards without reading its data.
    pub(super) unsafe extern "C" fn destroy_srq(
        srq: *mut bindings::ib_srq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core destroys an SRQ `create_srq` made, after every QP
        // on it: out of the events (no delivery holds it on return), then
        // its data dropped.
        unsafe {
            let this = Srq::<T>::from_core(srq);
            let n = this.data().number();
            this.device()
                .events()
                .remove_srq(n, NonNull::new_unchecked(srq));
            InCore::<_, T::Srq>::drop_data(srq);
        }
        0
    }
}
