// SPDX-License-Identifier: GPL-2.0

//! An ib_device's life, as DRM's (`rust/kernel/drm/device.rs`): allocated
//! by the core with room for the layer's part and the provider's data
//! (`_ib_alloc_device()`, what the `ib_alloc_device()` macro calls) and
//! initialized as an [`UnregisteredDevice`]; registered, a [`Registration`];
//! unregistered, which destroys what user space still has, disassociates
//! its contexts and drops the provider's data in the core's `dealloc_driver`
//! callback; then, once the provider has stopped its hardware, [`Retired`]:
//! the umems still held are released and the device is let go.
//!
//! The layer holds a reference on the device (`get_device()`) from its
//! allocation to the end of [`Retired`], so that the device's memory, and
//! with it the device the core unmaps umems through, outlives the
//! provider's teardown whatever order the core's references drop in.

use core::{
    mem::ManuallyDrop,
    ptr::{addr_of_mut, NonNull},
};
use kernel::{
    bindings,
    device::{self, Bound},
    error::to_result,
    ffi::c_char,
    prelude::*,
    sync::Arc,
    ThisModule,
};

use super::{
    event::Events,
    method::Definitions,
    object::Device,
    ops::Ops,
    sysfs::{self, Identity},
    umem::Umems,
    Driver,
};

/// The `struct device` of `dev` (`device::Device` is a transparent wrapper
/// of it).
fn raw_device(dev: &device::Device<Bound>) -> *mut bindings::device {
    core::ptr::from_ref(dev).cast_mut().cast()
}

/// `enum rdma_node_type`, the ones a provider may be.
#[derive(Clone, Copy)]
pub(crate) enum NodeType {
    /// An InfiniBand channel adapter.
    IbCa,
}

/// How the device presents itself.
pub(crate) struct DeviceInfo<T: Driver> {
    /// The name: as it is, or with one `%d` the core fills in (`"mlx4_%d"`).
    pub(crate) name: &'static CStr,
    pub(crate) node_type: NodeType,
    /// `node_guid`, as the adapter reports it.
    pub(crate) node_guid: u64,
    /// `node_desc`.
    pub(crate) node_desc: &'static CStr,
    /// Ports, numbered from 1.
    pub(crate) ports: u32,
    /// Completion vectors (EQs) user space may pick from.
    pub(crate) comp_vectors: u32,
    /// The provider's own uverbs methods, if it has any.
    pub(crate) driver_def: Option<&'static Definitions<T>>,
    /// What sysfs shows of the adapter (`hca_type`, `hw_rev`,
    /// `board_id`), if anything.
    pub(crate) identity: Option<Identity>,
}

/// A device allocated and initialized, not registered: what the provider
/// sets up before user space can reach the device (its events' routing).
/// Dropping it frees the device.
///
/// # Invariants
///
/// `dev` is a `Device<T>` allocated by `_ib_alloc_device()`, its layer's
/// part and data initialized, its ops set, never registered; the layer
/// holds a reference on it.
pub(crate) struct UnregisteredDevice<T: Driver> {
    dev: NonNull<Device<T>>,
    name: &'static CStr,
}

impl<T: Driver> UnregisteredDevice<T> {
    /// Allocates the device, checks the provider's method descriptions and
    /// constructs its data with `data`; `parent` is the device it is made
    /// for (its DMA device at registration), `module` the provider's.
    pub(crate) fn new(
        module: &'static ThisModule,
        parent: &device::Device<Bound>,
        info: &DeviceInfo<T>,
        data: impl PinInit<T::Device, Error>,
    ) -> Result<Self> {
        if let Some(defs) = info.driver_def {
            defs.check()?;
        }
        let events = Arc::pin_init(Events::new(), GFP_KERNEL)?;
        let umems = Arc::pin_init(Umems::new(), GFP_KERNEL)?;
        // SAFETY: `init_net` is the initial network namespace, which lives
        // for the kernel's lifetime; the size is that of `Device<T>`.
        let ib =
            unsafe { bindings::_ib_alloc_device(Device::<T>::SIZE, &raw mut bindings::init_net) };
        let dev = NonNull::new(ib.cast::<Device<T>>()).ok_or(ENOMEM)?;
        let raw = dev.as_ptr();
        // SAFETY: `raw` is the zeroed allocation `_ib_alloc_device()` just
        // made for `Device<T>`, which nobody else uses before registration;
        // the core never moves it. Our reference is taken first, so that
        // every way out below ends the same way.
        let initialized = unsafe {
            bindings::get_device(&raw mut (*ib).__bindgen_anon_1.dev);
            addr_of_mut!((*raw).events).write(events);
            addr_of_mut!((*raw).umems).write(umems);
            addr_of_mut!((*raw).identity).write(info.identity.unwrap_or(Identity::EMPTY));
            data.__pinned_init(addr_of_mut!((*raw).data))
        };
        if let Err(e) = initialized {
            // SAFETY: No ops set (no `dealloc_driver`), the data not
            // initialized: the core only drops its reference; then ours.
            unsafe {
                bindings::ib_dealloc_device(ib);
                Retired::<T>::release(dev);
            }
            return Err(e);
        }
        // SAFETY: The device is ours until registered: its fields are set
        // as the core expects before `ib_register_device()`. The ops are
        // copied; from here `ib_dealloc_device()` drops the data.
        unsafe {
            (*ib).node_guid = info.node_guid.to_be();
            (*ib).node_type = match info.node_type {
                NodeType::IbCa => bindings::RDMA_NODE_IB_CA as u8,
            };
            (*ib).phys_port_cnt = info.ports;
            (*ib).num_comp_vectors = i32::try_from(info.comp_vectors).unwrap_or(i32::MAX);
            if let Some(defs) = info.driver_def {
                (*ib).driver_def = defs.as_raw();
            }
            (*ib).__bindgen_anon_1.dev.parent = raw_device(parent);
            let desc = info.node_desc.to_bytes();
            let n = desc.len().min((*ib).node_desc.len() - 1);
            for (i, b) in desc[..n].iter().enumerate() {
                (*ib).node_desc[i] = *b as c_char;
            }
            bindings::ib_set_device_ops(ib, &Ops::<T>::TABLE);
            let owner = bindings::ib_device_ops {
                owner: module.as_ptr(),
                ..pin_init::zeroed()
            };
            bindings::ib_set_device_ops(ib, &owner);
            // The group's `show` reads `identity`, written above.
            if info.identity.is_some() {
                let group = bindings::ib_device_ops {
                    device_group: sysfs::GROUP.get(),
                    ..pin_init::zeroed()
                };
                bindings::ib_set_device_ops(ib, &group);
            }
        }
        // INVARIANT: Allocated, initialized, ops set, our reference taken.
        Ok(UnregisteredDevice {
            dev,
            name: info.name,
        })
    }

    /// The device's event targets, for the provider's event routing: set
    /// it up before registering, and no event is lost in between.
    pub(crate) fn events(&self) -> Arc<Events> {
        // SAFETY: Initialized (type invariant).
        unsafe { self.dev.as_ref() }.events.clone()
    }

    /// The device.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: Initialized, its data live until `self` is dropped.
        unsafe { self.dev.as_ref() }
    }

    /// Registers the device with the core under its name, `dma` its DMA
    /// device; user space reaches it from here on. On failure the device
    /// is freed.
    pub(crate) fn register(self, dma: &device::Device<Bound>) -> Result<Registration<T>> {
        let this = ManuallyDrop::new(self);
        let dev = this.dev;
        let ib = dev.as_ptr().cast::<bindings::ib_device>();
        // SAFETY: Set up and never registered (type invariant); `dma` is
        // bound and DMA-capable; the name is a C string.
        let registered = to_result(unsafe {
            bindings::ib_register_device(ib, this.name.as_char_ptr(), raw_device(dma))
        });
        if let Err(e) = registered {
            // The core leaves the device to its caller's `ib_dealloc_device()`.
            drop(ManuallyDrop::into_inner(this));
            return Err(e);
        }
        // SAFETY: Registered until `Registration` unregisters it, which
        // detaches the events first. `ib` is not null.
        unsafe { this.device().events.registered(NonNull::new_unchecked(ib)) };
        // INVARIANT: Registered.
        Ok(Registration { dev })
    }
}

impl<T: Driver> Drop for UnregisteredDevice<T> {
    fn drop(&mut self) {
        // SAFETY: Never registered (type invariant): `ib_dealloc_device()`
        // drops the data (`dealloc_driver`); then the layer's part.
        unsafe {
            bindings::ib_dealloc_device(self.dev.as_ptr().cast());
            Retired::release(self.dev);
        }
    }
}

/// A registered ib_device. Dropping it (or [`Registration::unregister`])
/// unregisters the device, which destroys every object user space still
/// has, disassociates its contexts and drops the provider's data.
///
/// # Invariants
///
/// `dev` is registered, its data initialized; the layer holds a reference.
pub(crate) struct Registration<T: Driver> {
    dev: NonNull<Device<T>>,
}

// SAFETY: The device is shared with the core, which locks what it changes;
// the provider's data is `Send + Sync`.
unsafe impl<T: Driver> Send for Registration<T> {}
// SAFETY: As above.
unsafe impl<T: Driver> Sync for Registration<T> {}

impl<T: Driver> Registration<T> {
    /// Unregisters the device; what is left of it goes when the returned
    /// [`Retired`] is dropped, which the provider does once its hardware
    /// can no longer reach user memory.
    pub(crate) fn unregister(self) -> Retired<T> {
        let this = ManuallyDrop::new(self);
        // SAFETY: Registered (type invariant), and `this` is not used again.
        unsafe { Self::unregister_raw(this.dev) }
    }

    /// # Safety
    ///
    /// `dev` is registered (the type's invariant) and not used as a
    /// registration after this.
    unsafe fn unregister_raw(dev: NonNull<Device<T>>) -> Retired<T> {
        // SAFETY: Registered (the contract). No port event reaches the
        // device from here on; `ib_unregister_device()` returns once no op
        // runs any more, every user object was destroyed and the data was
        // dropped (`dealloc_driver`). Our reference keeps the memory.
        unsafe {
            (*dev.as_ptr()).events.detach();
            bindings::ib_unregister_device(dev.as_ptr().cast());
        }
        // INVARIANT: Unregistered, data dropped, our reference held.
        Retired { dev }
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: Registered (type invariant); `self` goes.
        drop(unsafe { Self::unregister_raw(self.dev) });
    }
}

/// An unregistered device whose data is gone: dropping it releases the
/// umems user space's objects left (those whose destroy kept them) and
/// lets the device go.
///
/// # Invariants
///
/// `dev` is unregistered (or was never registered), its data dropped, its
/// layer's part initialized; the layer's reference is held.
pub(crate) struct Retired<T: Driver> {
    dev: NonNull<Device<T>>,
}

// SAFETY: Only the layer's part is used, which is `Send + Sync`.
unsafe impl<T: Driver> Send for Retired<T> {}
// SAFETY: `&self` has no method.
unsafe impl<T: Driver> Sync for Retired<T> {}

impl<T: Driver> Retired<T> {
    /// Releases the umems left, drops the layer's part and the layer's
    /// reference.
    ///
    /// # Safety
    ///
    /// As the type's invariant, and `dev` is not used after this.
    unsafe fn release(dev: NonNull<Device<T>>) {
        let raw = dev.as_ptr();
        // SAFETY: By the function's contract the layer's part is
        // initialized and used by nobody else now (no op runs); the
        // device's memory is ours until `put_device()`.
        unsafe {
            let kept = (*raw).umems.release_all();
            if kept != 0 {
                pr_info!("released {} umems kept by failed destroys\n", kept);
            }
            core::ptr::drop_in_place(addr_of_mut!((*raw).events));
            core::ptr::drop_in_place(addr_of_mut!((*raw).umems));
            bindings::put_device(
                &raw mut (*raw.cast::<bindings::ib_device>()).__bindgen_anon_1.dev,
            );
        }
    }
}

impl<T: Driver> Drop for Retired<T> {
    fn drop(&mut self) {
        // SAFETY: Type invariant; not used after this.
        unsafe { Self::release(self.dev) };
    }
}
