// SPDX-License-Identifier: GPL-2.0

//! The entry points of the objects user space makes: contexts (and their
//! mmaps), PDs, CQs, QPs, memory regions. The core's guarantees they rely
//! on are `ops.rs`'.

use core::ptr::NonNull;
use kernel::{
    bindings,
    error::from_result,
    ffi::{c_int, c_uint},
    prelude::*,
};

use super::{super::not_supported, user, Entry};
use crate::rdma::{
    attr::{CqInit, MrChange, QpAttr, QpCap, QpInit, QpType},
    mmap::{self, MmapTable},
    object::{Cq, CtxData, Device, InCore, Mr, Pd, Qp, Srq, UContext},
    udata::Udata,
    CqData, Driver, QpData,
};

impl<T: Driver> Entry<T> {
    /// # Safety
    ///
    /// `ctx` is the core's fresh, zeroed context of `UContext::<T>::SIZE`
    /// bytes, its `device` a registered `Device<T>` and its mmap table
    /// initialized, published only if this returns 0; `udata` is null or
    /// the call's udata, valid for the call.
    pub(super) unsafe extern "C" fn alloc_ucontext(
        ctx: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core's fresh context of our device; the call's udata.
            let (dev, udata) = unsafe {
                (
                    Device::<T>::from_raw((*ctx).device),
                    Udata::<T>::from_raw(udata),
                )
            };
            let mut udata = user(udata)?;
            // SAFETY: The context being allocated outlives the table, which
            // goes into it below or is dropped here.
            let mut mmaps = unsafe { MmapTable::new(ctx)? };
            let init = T::alloc_ucontext(dev, &mut udata, &mut mmaps);
            // SAFETY: A fresh context of `UContext<T>::SIZE`, not published:
            // the provider's data is constructed in place, then the table is
            // moved in beside it.
            unsafe {
                let data = InCore::<_, CtxData<T::UContext>>::data_ptr(ctx);
                init.__pinned_init(core::ptr::addr_of_mut!((*data).data))?;
                core::ptr::addr_of_mut!((*data).mmaps).write(mmaps);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ctx` is a context `alloc_ucontext` made, which the core destroys
    /// after every object of it and every mapping of its file: nobody else
    /// uses it, and the core frees it afterwards without reading its data.
    pub(super) unsafe extern "C" fn dealloc_ucontext(ctx: *mut bindings::ib_ucontext) {
        // SAFETY: The core destroys a context `alloc_ucontext` made, after
        // every object of it. Dropping its mmap table removes its entries,
        // whose mappings are gone: the core frees them (`mmap_free`) before
        // it checks the context's mmap table is empty.
        unsafe { InCore::<_, CtxData<T::UContext>>::drop_data(ctx) };
    }

    /// # Safety
    ///
    /// `ctx` is a live context `alloc_ucontext` made; `vma` is the VMA an
    /// `mmap()` of its file is setting up (`ib_uverbs_mmap()`), valid for
    /// the call.
    pub(super) unsafe extern "C" fn mmap(
        ctx: *mut bindings::ib_ucontext,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        // SAFETY: As the function's contract; the entries of our contexts
        // are the layer's (`MmapTable::offer`).
        from_result(|| unsafe { mmap::map(ctx, vma) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// `entry` is an entry of one of our contexts whose last reference is
    /// gone.
    pub(super) unsafe extern "C" fn mmap_free(entry: *mut bindings::rdma_user_mmap_entry) {
        // SAFETY: Every entry of our contexts is the layer's.
        unsafe { mmap::free(entry) };
    }

    /// # Safety
    ///
    /// `ctx` is a live context `alloc_ucontext` made, whose objects the core
    /// has destroyed (the device is going away).
    pub(super) unsafe extern "C" fn disassociate_ucontext(ctx: *mut bindings::ib_ucontext) {
        // SAFETY: A live context of ours, whose objects the core destroyed.
        T::disassociate_ucontext(unsafe { UContext::<T>::from_core(ctx) });
    }

    /// # Safety
    ///
    /// `pd` is the core's fresh, zeroed PD of `Pd::<T>::SIZE` bytes,
    /// published only if this returns 0; `udata` is null (the kernel's own PD)
    /// or the call's udata, valid for the call.
    pub(super) unsafe extern "C" fn alloc_pd(
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The call's udata.
            let mut udata = user(unsafe { Udata::<T>::from_raw(udata) })?;
            let ctx = udata.ucontext()?;
            let init = T::alloc_pd(ctx, &mut udata);
            // SAFETY: A fresh PD of `Pd<T>::SIZE`, not published.
            unsafe { InCore::<_, T::Pd>::init(pd, init)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `pd` is a PD `alloc_pd` made, which the core destroys after every
    /// object that uses it: nobody else uses it, and the core frees it
    /// afterwards without reading its data.
    pub(super) unsafe extern "C" fn dealloc_pd(
        pd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core destroys a PD `alloc_pd` made, after every
        // object that uses it.
        unsafe { InCore::<_, T::Pd>::drop_data(pd) };
        0
    }

    /// # Safety
    ///
    /// `cq` is the core's fresh, zeroed CQ of `Cq::<T>::SIZE` bytes, its
    /// handlers set, published only if this returns 0; `attr` is the core's
    /// attributes and `attrs` the call's bundle, both valid for the call.
    pub(super) unsafe extern "C" fn create_user_cq(
        cq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core's attributes and the call's bundle, whose
            // driver udata is the provider's.
            let (init, udata) = unsafe {
                let a = &*attr;
                let init = CqInit {
                    entries: a.cqe,
                    flags: a.flags,
                    comp_vector: a.comp_vector,
                };
                (
                    init,
                    Udata::<T>::from_raw(
                        &mut (*attrs).__bindgen_anon_1.__bindgen_anon_1.driver_udata,
                    ),
                )
            };
            let mut udata = user(udata)?;
            let ctx = udata.ucontext()?;
            let made = T::create_cq(ctx, &init, &mut udata);
            // SAFETY: A fresh CQ of `Cq<T>::SIZE`, not published.
            unsafe { InCore::<_, T::Cq>::init(cq, made)? };
            // SAFETY: Just constructed; its destroy op takes it out of the
            // events before it goes.
            let this = unsafe { Cq::<T>::from_core(cq) };
            this.publish();
            let raw = NonNull::new(cq).ok_or(EINVAL)?;
            // SAFETY: A live CQ of the device, taken out by `destroy_cq`.
            let entered = unsafe { ctx.device().events().add_cq(this.data().number(), raw) };
            if let Err(e) = entered {
                // SAFETY: Not published: the core frees it after this error.
                unsafe { InCore::<_, T::Cq>::drop_data(cq) };
                return Err(e);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `cq` is a live CQ `create_user_cq` made (its uobject held shared for
    /// the call: other resizes may run, its destroy does not); `udata` is
    /// the call's driver udata, valid for the call.
    pub(super) unsafe extern "C" fn resize_user_cq(
        cq: *mut bindings::ib_cq,
        entries: c_uint,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: A live CQ of ours; the call's udata.
            let (this, udata) = unsafe { (Cq::<T>::from_core(cq), Udata::<T>::from_raw(udata)) };
            let mut udata = user(udata)?;
            T::resize_cq(this, entries, &mut udata)?;
            this.republish();
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `cq` is a live CQ `create_user_cq` made, its `device` ours, which the
    /// core destroys after every QP that uses it: nobody else uses it, and the
    /// core frees it afterwards without reading its data.
    pub(super) unsafe extern "C" fn destroy_cq(
        cq: *mut bindings::ib_cq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: A live CQ of ours (the contract): out of the events (no
        // delivery holds it on return), then its data dropped.
        unsafe {
            let this = Cq::<T>::from_core(cq);
            let n = this.data().number();
            this.device()
                .events()
                .remove_cq(n, NonNull::new_unchecked(cq));
            InCore::<_, T::Cq>::drop_data(cq);
        }
        0
    }

    /// # Safety
    ///
    /// `qp` is the core's fresh, zeroed QP of `Qp::<T>::SIZE` bytes, its
    /// `pd` null or a live PD of the device, published only if this returns
    /// 0; `init` is the core's attributes, whose non-null CQs and SRQ are
    /// live ones of ours, and `udata` null or the call's udata, both valid
    /// for the call.
    pub(super) unsafe extern "C" fn create_qp(
        qp: *mut bindings::ib_qp,
        init: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core's attributes and the call's udata.
            let (raw, udata) = unsafe { (&mut *init, Udata::<T>::from_raw(udata)) };
            let qp_type = QpType::from_raw(raw.qp_type);
            // An XRC target QP has no PD (`ib_create_qp_user()`), and neither
            // it nor an XRC initiator is made by this layer.
            if qp_type == QpType::Other(bindings::ib_qp_type_IB_QPT_XRC_TGT) {
                return Err(not_supported());
            }
            let mut udata = user(udata)?;
            // SAFETY: The core's fresh QP, whose PD it set (non-null checked).
            let pd = unsafe {
                let pd = (*qp).pd;
                if pd.is_null() {
                    return Err(EINVAL);
                }
                Pd::<T>::from_core(pd)
            };
            if raw.send_cq.is_null() || raw.recv_cq.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: CQs the core found by handle for this call: live, ours.
            let (send_cq, recv_cq) = unsafe {
                (
                    Cq::<T>::from_core(raw.send_cq),
                    Cq::<T>::from_core(raw.recv_cq),
                )
            };
            // SAFETY: An SRQ the core found by handle for this call, held
            // by the QP from here on (`srq->usecnt`): live, made by our
            // create op (the only one of the device's SRQs).
            let srq = (!raw.srq.is_null()).then(|| unsafe { Srq::<T>::from_core(raw.srq) });
            let qp_init = QpInit {
                qp_type,
                send_cq,
                recv_cq,
                srq,
                has_xrc_or_rss: !raw.xrcd.is_null() || !raw.rwq_ind_tbl.is_null(),
                create_flags: raw.create_flags,
                sq_sig_all: raw.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
            };
            let mut cap = QpCap::from_raw(&raw.cap);
            let made = T::create_qp(pd, &qp_init, &mut cap, &mut udata);
            // SAFETY: A fresh QP of `Qp<T>::SIZE`, not published.
            unsafe { InCore::<_, T::Qp>::init(qp, made)? };
            cap.write_to(&mut raw.cap);
            // SAFETY: Just constructed; its destroy op takes it out of the
            // events before it goes.
            let this = unsafe { Qp::<T>::from_core(qp) };
            this.publish();
            let core = NonNull::new(qp).ok_or(EINVAL)?;
            // SAFETY: A live QP of the device, taken out by `destroy_qp`.
            let entered = unsafe { pd.device().events().add_qp(this.data().qp_num(), core) };
            if let Err(e) = entered {
                // SAFETY: Not published: the core frees it after this error.
                unsafe { InCore::<_, T::Qp>::drop_data(qp) };
                return Err(e);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `qp` is a live QP `create_qp` made; `attr` is the core's attributes and
    /// `udata` null or the call's udata, both valid for the call.
    pub(super) unsafe extern "C" fn modify_qp(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: A live QP of ours; the core's attributes; the call's udata.
            let (this, raw, udata) =
                unsafe { (Qp::<T>::from_core(qp), &*attr, Udata::<T>::from_raw(udata)) };
            let mut udata = user(udata)?;
            let attr = QpAttr::from_raw(raw, mask as u32)?;
            T::modify_qp(this, &attr, &mut udata)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `qp` is a live QP `create_qp` made; `attr` and `init` are valid for
    /// writes for the call (the core's allocations, maybe uninitialized).
    pub(super) unsafe extern "C" fn query_qp(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        _mask: c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: A live QP of ours.
            let this = unsafe { Qp::<T>::from_core(qp) };
            let answer = T::query_qp(this)?;
            // SAFETY: Valid for writes (the contract): written whole before
            // any reference is made, so the references see initialized
            // values; nobody else uses them during the call.
            let (attr, init) = unsafe {
                attr.write(pin_init::zeroed());
                init.write(pin_init::zeroed());
                (&mut *attr, &mut *init)
            };
            answer.write_to(attr, init);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `qp` is a live QP `create_qp` made, its `device` ours, which the core
    /// destroys: nobody else uses it, and the core frees it afterwards without
    /// reading its data.
    pub(super) unsafe extern "C" fn destroy_qp(
        qp: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: A live QP of ours (the contract): out of the events (no
        // delivery holds it on return), then its data dropped.
        unsafe {
            let this = Qp::<T>::from_core(qp);
            let n = this.data().qp_num();
            this.device()
                .events()
                .remove_qp(n, NonNull::new_unchecked(qp));
            InCore::<_, T::Qp>::drop_data(qp);
        }
        0
    }

    /// # Safety
    ///
    /// `pd` is a live PD `alloc_pd` made; `udata` is null or the call's
    /// udata, valid for the call. The core keeps the returned region until it
    /// passes it to `dereg_mr`.
    pub(super) unsafe extern "C" fn reg_user_mr(
        pd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        _dmah: *mut bindings::ib_dmah,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        let made = (|| {
            // SAFETY: A live PD of ours; the call's udata.
            let (pd, udata) = unsafe { (Pd::<T>::from_core(pd), Udata::<T>::from_raw(udata)) };
            let mut udata = user(udata)?;
            let init = T::reg_user_mr(pd, (start, length, iova), access as u32, &mut udata);
            Mr::<T>::new(init)
        })();
        match made {
            // The core owns the region until `dereg_mr`.
            // SAFETY: The region is not moved out of its box: the box is
            // only turned into a pointer, and back in `dereg_mr`.
            Ok(mr) => unsafe { KBox::into_raw(Pin::into_inner_unchecked(mr)) }.cast(),
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// `mr` is a region `reg_user_mr` returned, not deregistered (the core
    /// holds its uobject exclusively for the call); `pd` a live PD of the
    /// device (held shared); `udata` the call's udata, valid for the call.
    #[allow(clippy::too_many_arguments, reason = "the core's op")]
    pub(super) unsafe extern "C" fn rereg_user_mr(
        mr: *mut bindings::ib_mr,
        flags: c_int,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        let done = (|| {
            // SAFETY: A live region and PD of ours; the call's udata.
            let (this, pd, udata) = unsafe {
                (
                    Mr::<T>::from_core(mr),
                    Pd::<T>::from_core(pd),
                    Udata::<T>::from_raw(udata),
                )
            };
            let mut udata = user(udata)?;
            let change = MrChange::from_raw(flags, (start, length, iova), access);
            T::rereg_user_mr(this, &change, pd, &mut udata)
        })();
        match done {
            // In place: the core keeps the region it has.
            Ok(()) => core::ptr::null_mut(),
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// `mr` is a region `reg_user_mr` returned, which the core passes here
    /// once and does not use afterwards.
    pub(super) unsafe extern "C" fn dereg_mr(
        mr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: A region `reg_user_mr` made (the `ib_mr` is the first
        // field of the boxed `Mr<T>`), deregistered once by the core.
        drop(unsafe { KBox::from_raw(mr.cast::<Mr<T>>()) });
        0
    }
}
