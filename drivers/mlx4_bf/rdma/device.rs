// SPDX-License-Identifier: GPL-2.0

//! Registering an ib_device: allocated by the core with room for the
//! provider's data (`_ib_alloc_device()`, what the `ib_alloc_device()` macro
//! calls), registered with the provider's ops, unregistered and freed when
//! the [`Registration`] is dropped.

use core::ptr::{addr_of_mut, NonNull};
use kernel::{
    bindings,
    device::{self, Bound},
    error::to_result,
    ffi::c_char,
    prelude::*,
    sync::Arc,
};

use super::{event::Events, method::Definitions, object::Device, ops, Driver};

/// The `struct device` of `dev` (`device::Device` is a transparent wrapper
/// of it).
fn raw_device(dev: &device::Device<Bound>) -> *mut bindings::device {
    core::ptr::from_ref(dev).cast_mut().cast()
}

/// How the device presents itself.
pub(crate) struct DeviceInfo {
    /// The name, with one `%d` the core fills in (`"mlx4_%d"`).
    pub(crate) name: &'static CStr,
    /// `node_guid`, as the adapter reports it.
    pub(crate) node_guid: u64,
    /// `node_desc`.
    pub(crate) node_desc: &'static CStr,
    /// Ports, numbered from 1.
    pub(crate) ports: u32,
    /// Completion vectors (EQs) user space may pick from.
    pub(crate) comp_vectors: u32,
    /// The provider's own uverbs methods, if it has any.
    pub(crate) driver_def: Option<&'static Definitions>,
}

/// A registered ib_device; dropping it unregisters the device (which
/// destroys every object user space still has and disassociates its
/// contexts), drops the provider's data and frees the device.
pub(crate) struct Registration<T: Driver> {
    dev: NonNull<Device<T>>,
}

// SAFETY: The device is shared with the core, which locks what it changes;
// the provider's data is `Send + Sync`.
unsafe impl<T: Driver> Send for Registration<T> where T::Device: Send + Sync {}
// SAFETY: As above.
unsafe impl<T: Driver> Sync for Registration<T> where T::Device: Send + Sync {}

impl<T: Driver> Registration<T> {
    /// Allocates the device, constructs its data with `data` and registers
    /// it as a child of `parent`, whose DMA mapping it uses.
    pub(crate) fn new(
        parent: &device::Device<Bound>,
        info: &DeviceInfo,
        data: impl PinInit<T::Device, Error>,
    ) -> Result<Self> {
        let events = Arc::pin_init(Events::new(), GFP_KERNEL)?;
        // SAFETY: `init_net` is the initial network namespace, which lives
        // for the kernel's lifetime; the size is that of `Device<T>`.
        let ib = unsafe {
            bindings::_ib_alloc_device(
                core::mem::size_of::<Device<T>>(),
                addr_of_mut!(bindings::init_net),
            )
        };
        let dev = NonNull::new(ib.cast::<Device<T>>()).ok_or(ENOMEM)?;
        let raw = dev.as_ptr();
        // SAFETY: `raw` is the zeroed allocation `_ib_alloc_device()` just
        // made for `Device<T>`, which nobody else uses before registration;
        // the core never moves it.
        let initialized = unsafe {
            addr_of_mut!((*raw).events).write(events.clone());
            data.__pinned_init(addr_of_mut!((*raw).data))
        };
        if let Err(e) = initialized {
            // SAFETY: The events were written above; the data is not
            // initialized; the device was never registered.
            unsafe {
                core::ptr::drop_in_place(addr_of_mut!((*raw).events));
                bindings::ib_dealloc_device(ib);
            }
            return Err(e);
        }
        // SAFETY: The device is ours until registered: its fields are set
        // as the core expects before `ib_register_device()`.
        unsafe {
            (*ib).node_guid = info.node_guid.to_be();
            (*ib).node_type = bindings::RDMA_NODE_IB_CA as u8;
            (*ib).phys_port_cnt = info.ports;
            (*ib).num_comp_vectors = info.comp_vectors as i32;
            if let Some(defs) = info.driver_def {
                (*ib).driver_def = defs.as_raw();
            }
            (*ib).__bindgen_anon_1.dev.parent = raw_device(parent);
            let desc = info.node_desc.to_bytes();
            let n = desc.len().min((*ib).node_desc.len() - 1);
            for (i, b) in desc[..n].iter().enumerate() {
                (*ib).node_desc[i] = *b as c_char;
            }
            bindings::ib_set_device_ops(ib, &ops::table::<T>());
        }
        // SAFETY: The device is set up; `parent` is bound and DMA-capable.
        let registered = to_result(unsafe {
            bindings::ib_register_device(ib, info.name.as_char_ptr(), raw_device(parent))
        });
        if let Err(e) = registered {
            // SAFETY: Never registered; the data is initialized.
            unsafe { Self::free(raw) };
            return Err(e);
        }
        events.attach(ib);
        // INVARIANT: Allocated with our size, events and data initialized,
        // registered.
        Ok(Registration { dev })
    }

    /// The device's event targets, for the provider's event routing.
    pub(crate) fn events(&self) -> Arc<Events> {
        // SAFETY: The device is registered (type invariant).
        unsafe { self.dev.as_ref() }.events.clone()
    }

    /// # Safety
    ///
    /// `raw` is a device of this type that is not registered (any more)
    /// and whose data is initialized; it is not used after this.
    unsafe fn free(raw: *mut Device<T>) {
        // SAFETY: By the function's contract.
        unsafe {
            core::ptr::drop_in_place(addr_of_mut!((*raw).data));
            core::ptr::drop_in_place(addr_of_mut!((*raw).events));
            bindings::ib_dealloc_device(raw.cast());
        }
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        let raw = self.dev.as_ptr();
        // SAFETY: Registered by `new()` (type invariant): the events are
        // initialized. No event reaches the device from here on.
        unsafe { (*raw).events.detach() };
        // SAFETY: Registered; `ib_unregister_device()` returns once no op
        // runs any more and every user object was destroyed.
        unsafe { bindings::ib_unregister_device(raw.cast()) };
        // SAFETY: Unregistered above; the data is initialized.
        unsafe { Self::free(raw) };
    }
}
