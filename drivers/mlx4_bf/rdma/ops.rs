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
    counters::HwCounter,
    mad::{MadIn, MadResult, MAD_SIZE},
    object::{Cq, Device, Pd, Qp, Srq, UContext},
    udata::Udata,
    Driver,
};

/// `Some(f)` where the provider implements the op, `None` (the core's "not
/// supported") where it does not.
macro_rules! gated {
    ($has:expr, $f:expr) => {
        if $has {
            Some($f)
        } else {
            None
        }
    };
}

/// The ops table of a [`Driver`].
pub(super) struct Ops<T>(PhantomData<T>);

impl<T: Driver> Ops<T> {
    /// The entry points of the ops `T` implements (`HAS_*`, from
    /// `#[vtable]`), the object sizes, the driver ID and ABI version; the
    /// rest `NULL`, which the core reads as "not supported".
    /// `ib_set_device_ops()` copies it.
    pub(super) const TABLE: bindings::ib_device_ops = {
        type E<T> = Entry<T>;
        bindings::ib_device_ops {
            driver_id: T::DRIVER_ID,
            uverbs_abi_ver: T::ABI_VERSION,
            dealloc_driver: Some(E::<T>::dealloc_driver),
            query_device: Some(E::<T>::query_device),
            query_port: Some(E::<T>::query_port),
            get_port_immutable: Some(E::<T>::get_port_immutable),
            query_gid: Some(E::<T>::query_gid),
            query_pkey: Some(E::<T>::query_pkey),
            process_mad: gated!(T::HAS_PROCESS_MAD, E::<T>::process_mad),
            get_dev_fw_str: gated!(T::HAS_FW_VERSION, E::<T>::get_dev_fw_str),
            alloc_hw_device_stats: gated!(T::HAS_HW_COUNTERS, E::<T>::alloc_hw_device_stats),
            get_hw_stats: gated!(T::HAS_HW_COUNTERS, E::<T>::get_hw_stats),
            alloc_ucontext: Some(E::<T>::alloc_ucontext),
            dealloc_ucontext: Some(E::<T>::dealloc_ucontext),
            mmap: Some(E::<T>::mmap),
            mmap_free: Some(E::<T>::mmap_free),
            disassociate_ucontext: gated!(
                T::HAS_DISASSOCIATE_UCONTEXT,
                E::<T>::disassociate_ucontext
            ),
            alloc_pd: gated!(T::HAS_ALLOC_PD, E::<T>::alloc_pd),
            dealloc_pd: gated!(T::HAS_ALLOC_PD, E::<T>::dealloc_pd),
            create_user_cq: gated!(T::HAS_CREATE_CQ, E::<T>::create_user_cq),
            destroy_cq: gated!(T::HAS_CREATE_CQ, E::<T>::destroy_cq),
            resize_user_cq: gated!(T::HAS_RESIZE_CQ, E::<T>::resize_user_cq),
            create_qp: gated!(T::HAS_CREATE_QP, E::<T>::create_qp),
            modify_qp: gated!(T::HAS_MODIFY_QP, E::<T>::modify_qp),
            query_qp: gated!(T::HAS_QUERY_QP, E::<T>::query_qp),
            destroy_qp: gated!(T::HAS_CREATE_QP, E::<T>::destroy_qp),
            create_srq: gated!(T::HAS_CREATE_SRQ, E::<T>::create_srq),
            modify_srq: gated!(T::HAS_MODIFY_SRQ, E::<T>::modify_srq),
            query_srq: gated!(T::HAS_QUERY_SRQ, E::<T>::query_srq),
            destroy_srq: gated!(T::HAS_CREATE_SRQ, E::<T>::destroy_srq),
            reg_user_mr: gated!(T::HAS_REG_USER_MR, E::<T>::reg_user_mr),
            dereg_mr: gated!(T::HAS_REG_USER_MR, E::<T>::dereg_mr),
            rereg_user_mr: gated!(T::HAS_REREG_USER_MR, E::<T>::rereg_user_mr),
            size_ib_ucontext: UContext::<T>::SIZE,
            size_ib_pd: Pd::<T>::SIZE,
            size_ib_cq: Cq::<T>::SIZE,
            size_ib_qp: Qp::<T>::SIZE,
            size_ib_srq: Srq::<T>::SIZE,
            ..pin_init::zeroed()
        }
    };
}

/// The C entry points of `T`'s ops: the device's here, its objects' in
/// `ops/objects.rs` and `ops/srq.rs`.
struct Entry<T>(PhantomData<T>);

mod objects;
mod srq;

/// `-EOPNOTSUPP` for a call without udata: the kernel's own verbs, which
/// this layer does not offer.
fn user<'a, T: Driver>(udata: Option<Udata<'a, T>>) -> Result<Udata<'a, T>> {
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
                    Udata::<T>::from_raw(udata),
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
    /// `ib` is as for `query_device`; `in_mad` and `out_mad` are the core's
    /// MADs, null or valid for the call, the out one of `*out_mad_size`
    /// bytes, writable (`out_mad_size` null or valid).
    #[allow(clippy::too_many_arguments, reason = "the core's op")]
    unsafe extern "C" fn process_mad(
        ib: *mut bindings::ib_device,
        _flags: c_int,
        port: u32,
        in_wc: *const bindings::ib_wc,
        _in_grh: *const bindings::ib_grh,
        in_mad: *const bindings::ib_mad,
        out_mad: *mut bindings::ib_mad,
        out_mad_size: *mut usize,
        _out_mad_pkey_index: *mut u16,
    ) -> c_int {
        // SAFETY: As the function's contract: a null size is no room.
        let room = unsafe { out_mad_size.as_ref() }.copied().unwrap_or(0);
        if in_mad.is_null() || out_mad.is_null() || room < MAD_SIZE {
            return MadResult::Failure.raw();
        }
        // SAFETY: The device is the core's registered one; the in MAD is
        // read whole into a copy first (the core's two MADs are separate
        // allocations, but a copy needs no such promise); the out MAD has
        // at least MAD_SIZE writable bytes, no one else's for the call.
        let (dev, input, out) = unsafe {
            (
                Device::<T>::from_raw(ib),
                in_mad.cast::<[u8; MAD_SIZE]>().read(),
                &mut *out_mad.cast::<[u8; MAD_SIZE]>(),
            )
        };
        let how = MadIn {
            from_wire: !in_wc.is_null(),
        };
        T::process_mad(dev, port, &how, &input, out).raw()
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

    /// The device's statistics (port 0), described by `T::HW_COUNTERS`;
    /// null (the core's ENOMEM) if the allocation fails or the list is
    /// empty or too long.
    ///
    /// # Safety
    ///
    /// `ib` is as for `query_device`.
    unsafe extern "C" fn alloc_hw_device_stats(
        _ib: *mut bindings::ib_device,
    ) -> *mut bindings::rdma_hw_stats {
        let (descs, n) = HwCounter::descs(T::HW_COUNTERS);
        match c_int::try_from(n) {
            // SAFETY: `descs` points to `n` descriptions that live forever
            // (`'static`), as long as the statistics the core frees.
            Ok(n) if n > 0 => unsafe {
                bindings::rdma_alloc_hw_stats_struct(
                    descs,
                    n,
                    bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as kernel::ffi::c_ulong,
                )
            },
            _ => core::ptr::null_mut(),
        }
    }

    /// Fills every counter of `stats` and returns how many.
    ///
    /// # Safety
    ///
    /// `ib` is as for `query_device`; `stats` is what
    /// `alloc_hw_device_stats` returned for it (the core calls this only
    /// for port 0 when there is no `alloc_hw_port_stats`), its values not
    /// touched by anyone else for the call (sysfs reads them under
    /// `stats->lock`; `ib_setup_device_attrs()` calls before they are
    /// shown).
    unsafe extern "C" fn get_hw_stats(
        ib: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        port: u32,
        _index: c_int,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `stats` is the core's, valid for the call.
            let n = unsafe { (*stats).num_counters };
            if port != 0 || usize::try_from(n) != Ok(T::HW_COUNTERS.len()) {
                return Err(EINVAL);
            }
            // SAFETY: As for `query_device`; `stats` was allocated with
            // `n` values after its header (`rdma_alloc_hw_stats_struct()`),
            // which no one else touches during the call.
            let (dev, values) = unsafe {
                (
                    Device::<T>::from_raw(ib),
                    core::slice::from_raw_parts_mut(
                        core::ptr::addr_of_mut!((*stats).value).cast::<u64>(),
                        T::HW_COUNTERS.len(),
                    ),
                )
            };
            T::hw_counters(dev, values)?;
            Ok(n)
        })
    }

    /// # Safety
    ///
    /// `ib` is a `Device<T>` the core deallocates (`ib_dealloc_device()`):
    /// its data is initialized, no op runs any more and none will.
    unsafe extern "C" fn dealloc_driver(ib: *mut bindings::ib_device) {
        let dev = ib.cast::<Device<T>>();
        // SAFETY: The last op the core calls on the device; the data was
        // initialized before the ops were set (`UnregisteredDevice::new`).
        unsafe { core::ptr::drop_in_place(core::ptr::addr_of_mut!((*dev).data)) };
    }
}
