// SPDX-License-Identifier: GPL-2.0

//! The ops table (`struct ib_device_ops`) of a [`Driver`], and the C entry
//! points the core calls: each turns the core's pointers into the typed
//! values of this layer, calls the provider and turns its answer back.
//!
//! The core's guarantees every entry point relies on: it calls an op only
//! on a registered device; an object passed to an op other than its create
//! op is live (created, not yet destroyed) for the call; a create op's
//! object is the core's fresh, zeroed allocation of the declared size,
//! published only if the op returns 0; a destroy op's object is used by no
//! one else, and freed by the core afterwards (`rdma_zalloc_drv_obj()`,
//! `rdma_restrack`, `uverbs` uobject locking).

use core::marker::PhantomData;
use kernel::{bindings, error::from_result, ffi::c_int, prelude::*};

use super::{
    attr::{CqInit, QpAttr, QpCap, QpInit, QpType},
    object::{Cq, Device, InCore, Mr, Pd, Qp, UContext},
    udata::Udata,
    vma::Vma,
    CqData, Driver, QpData,
};

/// The ops table of `T`: every entry point below, the object sizes, the
/// driver ID and ABI version. `ib_set_device_ops()` copies it.
pub(super) fn table<T: Driver>() -> bindings::ib_device_ops {
    type E<T> = Entry<T>;
    bindings::ib_device_ops {
        owner: crate::THIS_MODULE.as_ptr(),
        driver_id: T::DRIVER_ID,
        uverbs_abi_ver: T::ABI_VERSION,
        query_device: Some(E::<T>::query_device),
        query_port: Some(E::<T>::query_port),
        get_port_immutable: Some(E::<T>::get_port_immutable),
        query_gid: Some(E::<T>::query_gid),
        query_pkey: Some(E::<T>::query_pkey),
        get_dev_fw_str: Some(E::<T>::get_dev_fw_str),
        alloc_ucontext: Some(E::<T>::alloc_ucontext),
        dealloc_ucontext: Some(E::<T>::dealloc_ucontext),
        mmap: Some(E::<T>::mmap),
        disassociate_ucontext: Some(E::<T>::disassociate_ucontext),
        alloc_pd: Some(E::<T>::alloc_pd),
        dealloc_pd: Some(E::<T>::dealloc_pd),
        create_user_cq: Some(E::<T>::create_user_cq),
        destroy_cq: Some(E::<T>::destroy_cq),
        create_qp: Some(E::<T>::create_qp),
        modify_qp: Some(E::<T>::modify_qp),
        destroy_qp: Some(E::<T>::destroy_qp),
        reg_user_mr: Some(E::<T>::reg_user_mr),
        dereg_mr: Some(E::<T>::dereg_mr),
        size_ib_ucontext: UContext::<T>::SIZE,
        size_ib_pd: Pd::<T>::SIZE,
        size_ib_cq: Cq::<T>::SIZE,
        size_ib_qp: Qp::<T>::SIZE,
        ..pin_init::zeroed()
    }
}

struct Entry<T>(PhantomData<T>);

/// `-EOPNOTSUPP` for a call without udata: the kernel's own verbs, which
/// this layer does not offer.
fn user<'a>(udata: Option<Udata<'a>>) -> Result<Udata<'a>> {
    udata.ok_or(Error::from_errno(-(bindings::EOPNOTSUPP as i32)))
}

impl<T: Driver> Entry<T> {
    /// # Safety
    ///
    /// `ib` is the `ib_device` of a `Device<T>`, registered or being
    /// registered (`ib_register_device()`); `attr` is the core's attribute
    /// buffer and `udata` null or the call's udata, both valid for the call.
    unsafe extern "C" fn query_device(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core calls ops on a device it registers or has
            // registered, with its own attribute buffer and the call's udata
            // (or null).
            let (dev, raw, mut udata) = unsafe {
                (
                    Device::<T>::from_raw(ib),
                    &mut *attr,
                    Udata::from_raw(udata),
                )
            };
            let attr = T::query_device(dev, udata.as_mut())?;
            attr.write_to(raw);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ib` is as for `query_device`; `attr` is the core's attribute buffer,
    /// zeroed, valid for the call.
    unsafe extern "C" fn query_port(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As above; the core zeroed `attr`.
            let (dev, raw) = unsafe { (Device::<T>::from_raw(ib), &mut *attr) };
            T::query_port(dev, port)?.write_to(raw);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ib` is as for `query_device`; `imm` is the port's immutable data in
    /// the core's zeroed port data, valid for the call.
    unsafe extern "C" fn get_port_immutable(
        ib: *mut bindings::ib_device,
        port: u32,
        imm: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As above.
            let (dev, raw) = unsafe { (Device::<T>::from_raw(ib), &mut *imm) };
            let got = T::port_immutable(dev, port)?;
            raw.pkey_tbl_len = got.pkey_tbl_len as i32;
            raw.gid_tbl_len = got.gid_tbl_len as i32;
            raw.core_cap_flags = got.core_cap_flags;
            raw.max_mad_size = got.max_mad_size;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ib` is as for `query_device`; `gid` is the core's buffer, valid for
    /// the call.
    unsafe extern "C" fn query_gid(
        ib: *mut bindings::ib_device,
        port: u32,
        index: c_int,
        gid: *mut bindings::ib_gid,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As above; `gid` is the core's.
            let (dev, raw) = unsafe { (Device::<T>::from_raw(ib), &mut *gid) };
            raw.raw = T::query_gid(dev, port, u32::try_from(index)?)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ib` is as for `query_device`; `pkey` is the core's buffer, valid for
    /// the call.
    unsafe extern "C" fn query_pkey(
        ib: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As above; `pkey` is the core's.
            let (dev, raw) = unsafe { (Device::<T>::from_raw(ib), &mut *pkey) };
            *raw = T::query_pkey(dev, port, index)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ib` is as for `query_device`; `out` is the core's buffer of
    /// `IB_FW_VERSION_NAME_MAX` bytes, writable for the call.
    unsafe extern "C" fn get_dev_fw_str(ib: *mut bindings::ib_device, out: *mut c_char) {
        // SAFETY: As above; `out` has `IB_FW_VERSION_NAME_MAX` bytes.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        let (major, minor, sub) = T::fw_version(dev);
        let mut buf = [0u8; bindings::IB_FW_VERSION_NAME_MAX as usize];
        let mut w = kernel::str::Formatter::new(&mut buf);
        // A version that does not fit is cut short, as snprintf() would.
        let _ = core::fmt::Write::write_fmt(&mut w, format_args!("{major}.{minor}.{sub}"));
        let n = w.bytes_written().min(buf.len() - 1);
        // SAFETY: `out` holds `IB_FW_VERSION_NAME_MAX` bytes; `n + 1` fit.
        unsafe {
            core::ptr::copy_nonoverlapping(buf.as_ptr(), out.cast(), n);
            *out.add(n) = 0;
        }
    }

    /// # Safety
    ///
    /// `ctx` is the core's fresh, zeroed context of `UContext::<T>::SIZE`
    /// bytes, its `device` a registered `Device<T>`, published only if this
    /// returns 0; `udata` is null or the call's udata, valid for the call.
    unsafe extern "C" fn alloc_ucontext(
        ctx: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core's fresh context of our device; the call's udata.
            let (dev, udata) =
                unsafe { (Device::<T>::from_raw((*ctx).device), Udata::from_raw(udata)) };
            let mut udata = user(udata)?;
            let init = T::alloc_ucontext(dev, &mut udata);
            // SAFETY: A fresh context of `UContext<T>::SIZE`, not published.
            unsafe { InCore::<_, T::UContext>::init(ctx, init)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ctx` is a context `alloc_ucontext` made, which the core destroys
    /// after every object of it: nobody else uses it, and the core frees it
    /// afterwards without reading its data.
    unsafe extern "C" fn dealloc_ucontext(ctx: *mut bindings::ib_ucontext) {
        // SAFETY: The core destroys a context `alloc_ucontext` made, after
        // every object of it.
        unsafe { InCore::<_, T::UContext>::drop_data(ctx) };
    }

    /// # Safety
    ///
    /// `ctx` is a live context `alloc_ucontext` made; `vma` is the VMA an
    /// `mmap()` of its file is setting up, with `mmap_lock` held for writing,
    /// valid for the call.
    unsafe extern "C" fn mmap(
        ctx: *mut bindings::ib_ucontext,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        from_result(|| {
            // SAFETY: A live context of ours; the VMA of this mmap() of its file.
            let (ctx, vma) = unsafe { (UContext::<T>::from_core(ctx), Vma::from_raw(vma)) };
            T::mmap(ctx, &vma)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ctx` is a live context `alloc_ucontext` made, whose objects the core
    /// has destroyed (the device is going away).
    unsafe extern "C" fn disassociate_ucontext(ctx: *mut bindings::ib_ucontext) {
        // SAFETY: A live context of ours, whose objects the core destroyed.
        T::disassociate_ucontext(unsafe { UContext::<T>::from_core(ctx) });
    }

    /// # Safety
    ///
    /// `pd` is the core's fresh, zeroed PD of `Pd::<T>::SIZE` bytes,
    /// published only if this returns 0; `udata` is null (the kernel's own PD)
    /// or the call's udata, valid for the call.
    unsafe extern "C" fn alloc_pd(
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The call's udata.
            let mut udata = user(unsafe { Udata::from_raw(udata) })?;
            let ctx = udata.ucontext::<T>()?;
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
    unsafe extern "C" fn dealloc_pd(
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
    /// `cq` is the core's fresh, zeroed CQ of `Cq::<T>::SIZE` bytes, published
    /// only if this returns 0; `attr` is the core's attributes and `attrs` the
    /// call's bundle, both valid for the call.
    unsafe extern "C" fn create_user_cq(
        cq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core's attributes and the call's bundle, whose
            // driver udata is the provider's.
            let (init, udata) = unsafe {
                let a = &*attr;
                // One completion vector: `comp_vector` names none other.
                let init = CqInit {
                    entries: a.cqe,
                    flags: a.flags,
                };
                (
                    init,
                    Udata::from_raw(&mut (*attrs).__bindgen_anon_1.__bindgen_anon_1.driver_udata),
                )
            };
            let mut udata = user(udata)?;
            let ctx = udata.ucontext::<T>()?;
            let made = T::create_cq(ctx, &init, &mut udata);
            // SAFETY: A fresh CQ of `Cq<T>::SIZE`, not published.
            unsafe { InCore::<_, T::Cq>::init(cq, made)? };
            // SAFETY: Just constructed.
            let this = unsafe { Cq::<T>::from_core(cq) };
            this.publish();
            // SAFETY: Just made; `destroy_cq` removes it before it goes.
            let entered = unsafe { ctx.device().events().add_cq(this.data().number(), cq) };
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
    /// `cq` is a live CQ `create_user_cq` made, its `device` ours, which the
    /// core destroys after every QP that uses it: nobody else uses it, and the
    /// core frees it afterwards without reading its data.
    unsafe extern "C" fn destroy_cq(
        cq: *mut bindings::ib_cq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core destroys a live CQ `create_user_cq` made, after
        // every QP that uses it.
        unsafe {
            Device::<T>::from_raw((*cq).device).events().remove_cq(cq);
            InCore::<_, T::Cq>::drop_data(cq);
        }
        0
    }

    /// # Safety
    ///
    /// `qp` is the core's fresh, zeroed QP of `Qp::<T>::SIZE` bytes, its `pd`
    /// a live PD `alloc_pd` made, published only if this returns 0; `init` is
    /// the core's attributes, whose non-null CQs are live CQs of ours, and
    /// `udata` null or the call's udata, both valid for the call.
    unsafe extern "C" fn create_qp(
        qp: *mut bindings::ib_qp,
        init: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core's fresh QP, whose PD it set, and its attributes.
            let (pd, raw, udata) = unsafe {
                (
                    Pd::<T>::from_core((*qp).pd),
                    &mut *init,
                    Udata::from_raw(udata),
                )
            };
            let mut udata = user(udata)?;
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
            let qp_init = QpInit {
                qp_type: QpType::from_raw(raw.qp_type),
                send_cq,
                recv_cq,
                has_srq_or_xrc: !raw.srq.is_null()
                    || !raw.xrcd.is_null()
                    || !raw.rwq_ind_tbl.is_null(),
                create_flags: raw.create_flags,
            };
            let mut cap = QpCap::from_raw(&raw.cap);
            let made = T::create_qp(pd, &qp_init, &mut cap, &mut udata);
            // SAFETY: A fresh QP of `Qp<T>::SIZE`, not published.
            unsafe { InCore::<_, T::Qp>::init(qp, made)? };
            cap.write_to(&mut raw.cap);
            // SAFETY: Just constructed.
            let this = unsafe { Qp::<T>::from_core(qp) };
            this.publish();
            // SAFETY: Just made; `destroy_qp` removes it before it goes.
            let entered = unsafe { pd.device().events().add_qp(this.data().qp_num(), qp) };
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
    unsafe extern "C" fn modify_qp(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: A live QP of ours; the core's attributes; the call's udata.
            let (this, raw, udata) =
                unsafe { (Qp::<T>::from_core(qp), &*attr, Udata::from_raw(udata)) };
            let mut udata = user(udata)?;
            let attr = QpAttr::from_raw(raw, mask as u32)?;
            T::modify_qp(this, &attr, &mut udata)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `qp` is a live QP `create_qp` made, its `device` ours, which the core
    /// destroys: nobody else uses it, and the core frees it afterwards without
    /// reading its data.
    unsafe extern "C" fn destroy_qp(
        qp: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core destroys a live QP `create_qp` made.
        unsafe {
            Device::<T>::from_raw((*qp).device).events().remove_qp(qp);
            InCore::<_, T::Qp>::drop_data(qp);
        }
        0
    }

    /// # Safety
    ///
    /// `pd` is a live PD `alloc_pd` made; `udata` is null or the call's
    /// udata, valid for the call. The core keeps the returned region until it
    /// passes it to `dereg_mr`.
    unsafe extern "C" fn reg_user_mr(
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
            let (pd, udata) = unsafe { (Pd::<T>::from_core(pd), Udata::from_raw(udata)) };
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
    /// `mr` is a region `reg_user_mr` returned, which the core passes here
    /// once and does not use afterwards.
    unsafe extern "C" fn dereg_mr(
        mr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: A region `reg_user_mr` made (the `ib_mr` is the first
        // field of the boxed `Mr<T>`), deregistered once by the core.
        drop(unsafe { KBox::from_raw(mr.cast::<Mr<T>>()) });
        0
    }
}
