// SPDX-License-Identifier: GPL-2.0

//! `/dev/mlx4_bf<N>`: the misc device of a bound adapter. Each open is a
//! [`Context`]; its `ioctl()` goes to `uverbs`, its `mmap()` and `poll()`
//! to the context (`poll()` through our own file operations, `fops.rs`).

mod fops;

use kernel::{
    fs::File,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    mm::virt::VmaNew,
    prelude::*,
    sync::Arc,
};

use crate::{adapter::Adapter, context::Context};

/// The device node of a bound adapter: its registration and the adapter its
/// opens get, found from the registration.
///
/// Fields drop in declaration order: the misc device first, so no `open()`
/// can still be looking at `adapter` when it goes. They are initialized the
/// other way round, so `open()` never sees an `adapter` not yet written.
#[pin_data]
pub(crate) struct DeviceNode {
    #[pin]
    misc: MiscDeviceRegistration<Context>,
    adapter: Arc<Adapter>,
}

impl DeviceNode {
    pub(crate) fn new(adapter: Arc<Adapter>, name: &'static CStr) -> impl PinInit<Self, Error> {
        try_pin_init!(DeviceNode {
            adapter,
            misc <- MiscDeviceRegistration::register(MiscDeviceOptions { name }),
        })
    }
}

#[vtable]
impl MiscDevice for Context {
    type Ptr = Pin<KBox<Self>>;

    fn open(file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        // SAFETY: Every registration of `Context` is the `misc` field of a
        // `DeviceNode`, which outlives this call (misc_deregister() waits
        // for open() under misc_mtx).
        let node = unsafe { &*kernel::container_of!(core::ptr::from_ref(misc), DeviceNode, misc) };
        let ctx = Context::open(&node.adapter)?;
        // The file holds a reference on this module from here on. Dropping
        // `ctx` on failure gives everything back.
        fops::install_fops(file)?;
        Ok(ctx)
    }

    fn mmap(me: Pin<&Context>, file: &File, vma: &VmaNew) -> Result {
        me.mmap(file, vma)
    }

    fn ioctl(me: Pin<&Context>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        crate::uverbs::dispatch(&me, cmd, arg)
    }
}
