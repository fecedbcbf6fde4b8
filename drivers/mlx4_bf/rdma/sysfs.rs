// SPDX-License-Identifier: GPL-2.0

//! The device's own attributes in sysfs, beside the core's: `hca_type`,
//! `hw_rev` and `board_id`, the group mlx4_ib (as mlx5 and mthca) gives its
//! devices through `ops.device_group`. `ib_verbs.h` asks new drivers to
//! expose new parameters through netlink instead; these are not new but
//! mlx4_ib's, of the same adapter, and tools read them (`ibv_devinfo`
//! prints `board_id` from sysfs).
//!
//! The group is one set of statics for every provider: its `show`
//! functions are not generic, and find what to show in the layer's part of
//! the device ([`Identity`], at the same offset in every `Device<T>`:
//! [`Head`]). The provider gives the strings when it makes
//! the device; they never change.

use core::{fmt, mem::offset_of, ptr::null};
use kernel::{bindings, ffi::c_char, sync::Arc, types::Opaque};

use super::{event::Events, umem::Umems};

/// Bytes of an attribute's text, its newline not counted.
const TEXT_MAX: usize = 63;

/// An attribute's text: up to [`TEXT_MAX`] bytes.
#[derive(Clone, Copy)]
pub(crate) struct Text {
    len: u8,
    bytes: [u8; TEXT_MAX],
}

impl Text {
    /// No text.
    pub(crate) const EMPTY: Text = Text {
        len: 0,
        bytes: [0; TEXT_MAX],
    };

    /// `bytes`, cut at [`TEXT_MAX`].
    pub(crate) fn new(bytes: &[u8]) -> Text {
        let mut t = Text::EMPTY;
        let n = bytes.len().min(TEXT_MAX);
        t.bytes[..n].copy_from_slice(&bytes[..n]);
        t.len = n as u8;
        t
    }

    /// `args` formatted, cut at [`TEXT_MAX`] as `snprintf()` would.
    pub(crate) fn fmt(args: fmt::Arguments<'_>) -> Text {
        let mut buf = [0u8; TEXT_MAX];
        let mut w = kernel::str::Formatter::new(&mut buf);
        let _ = fmt::Write::write_fmt(&mut w, args);
        let n = w.bytes_written().min(TEXT_MAX);
        Text::new(&buf[..n])
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// What the device shows of the adapter: mlx4_ib's `hca_type` (`MT` and the
/// PCI device ID in decimal), `hw_rev` (hex) and `board_id`.
#[derive(Clone, Copy)]
pub(crate) struct Identity {
    pub(crate) hca_type: Text,
    pub(crate) hw_rev: Text,
    pub(crate) board_id: Text,
}

impl Identity {
    /// Before the provider gave one, and for a device without the group.
    pub(super) const EMPTY: Identity = Identity {
        hca_type: Text::EMPTY,
        hw_rev: Text::EMPTY,
        board_id: Text::EMPTY,
    };
}

/// The layer's part of every `Device<T>`: the same fields at the same
/// offsets (`repr(C)`, before the provider's data; `Device::SIZE` asserts
/// it), for the `show` functions, which are not generic.
#[repr(C)]
pub(super) struct Head {
    _core: Opaque<bindings::ib_device>,
    _events: Arc<Events>,
    _umems: Arc<Umems>,
    pub(super) identity: Identity,
}

/// The identity of the device `dev` is the `struct device` of.
///
/// # Safety
///
/// `dev` is the device of an `ib_core_device` whose owner is a live
/// `Device<T>` of this layer, for `'a`.
unsafe fn identity<'a>(dev: *mut bindings::device) -> &'a Identity {
    // SAFETY: `dev` is the first field of its `ib_core_device` (the
    // contract; `rdma_device_to_ibdev()`), whose `owner` is the ib_device at
    // the start of a `Device<T>`; `Head` has the layer's fields at the
    // offsets every `Device<T>` has them (asserted by `Device::SIZE`), and
    // the identity is written before registration and never changed.
    unsafe {
        let core = dev
            .byte_sub(offset_of!(bindings::ib_core_device, dev))
            .cast::<bindings::ib_core_device>();
        let ib = (*core).owner;
        &*ib.byte_add(offset_of!(Head, identity)).cast::<Identity>()
    }
}

/// `text` and a newline into sysfs' buffer; the length written.
///
/// # Safety
///
/// `buf` is a show buffer: `PAGE_SIZE` bytes, writable.
unsafe fn emit(buf: *mut c_char, text: &Text) -> isize {
    let b = text.as_bytes();
    // SAFETY: At most TEXT_MAX + 1 bytes, far below a page (the contract).
    unsafe {
        core::ptr::copy_nonoverlapping(b.as_ptr(), buf.cast::<u8>(), b.len());
        *buf.add(b.len()) = b'\n' as c_char;
    }
    b.len() as isize + 1
}

macro_rules! show {
    ($name:ident, $field:ident) => {
        /// # Safety
        ///
        /// sysfs calls it for this group's attribute of a registered
        /// device of this layer (`ops.device_group` is set only on ours),
        /// with its `PAGE_SIZE` buffer; removal waits for it to return.
        unsafe extern "C" fn $name(
            dev: *mut bindings::device,
            _attr: *mut bindings::device_attribute,
            buf: *mut c_char,
        ) -> isize {
            // SAFETY: As the function's contract: the device is ours and
            // registered for the call, `buf` sysfs' page.
            unsafe { emit(buf, &identity(dev).$field) }
        }
    };
}

show!(show_hca_type, hca_type);
show!(show_hw_rev, hw_rev);
show!(show_board_id, board_id);

/// A C struct of pointers shared read-only with sysfs.
#[repr(transparent)]
pub(super) struct Shared<T>(T);

// SAFETY: Never written after its static initialization; its pointers are
// to other statics and functions, valid from any thread.
unsafe impl<T> Sync for Shared<T> {}

impl<T> Shared<T> {
    pub(super) const fn get(&self) -> *const T {
        &raw const self.0
    }
}

/// A read-only device attribute `name` (NUL-terminated) shown by `show`.
const fn attr(
    name: &'static [u8],
    show: unsafe extern "C" fn(
        *mut bindings::device,
        *mut bindings::device_attribute,
        *mut c_char,
    ) -> isize,
) -> bindings::device_attribute {
    assert!(!name.is_empty() && name[name.len() - 1] == 0);
    bindings::device_attribute {
        #[allow(
            clippy::needless_update,
            reason = "lockdep's fields under CONFIG_DEBUG_LOCK_ALLOC"
        )]
        attr: bindings::attribute {
            name: name.as_ptr(),
            mode: 0o444,
            ..pin_init::zeroed()
        },
        __bindgen_anon_1: bindings::device_attribute__bindgen_ty_1 { show: Some(show) },
        ..pin_init::zeroed()
    }
}

static HCA_TYPE: Shared<bindings::device_attribute> = Shared(attr(b"hca_type\0", show_hca_type));
static HW_REV: Shared<bindings::device_attribute> = Shared(attr(b"hw_rev\0", show_hw_rev));
static BOARD_ID: Shared<bindings::device_attribute> = Shared(attr(b"board_id\0", show_board_id));

static ATTRS: Shared<[*const bindings::attribute; 4]> = Shared([
    &raw const HCA_TYPE.0.attr,
    &raw const HW_REV.0.attr,
    &raw const BOARD_ID.0.attr,
    null(),
]);

/// The group, for `ops.device_group`.
pub(super) static GROUP: Shared<bindings::attribute_group> = Shared(bindings::attribute_group {
    __bindgen_anon_2: bindings::attribute_group__bindgen_ty_2 {
        attrs_const: ATTRS.get().cast(),
    },
    ..pin_init::zeroed()
});
