// SPDX-License-Identifier: GPL-2.0

//! Driver-specific uverbs methods (`include/rdma/uverbs_ioctl.h`): calls
//! on an object of the verbs context's command file, in the driver's name
//! space (`1 << UVERBS_ID_NS_SHIFT`), as mlx5's DEVX and EFA's MR query are.
//!
//! A method's description (its attributes, their kinds and sizes, the
//! object it acts on) is a tree of static tables that the core's macros
//! build in C: a small C file of the provider's. The provider declares the
//! same method once in Rust with [`uverbs_method!`]: its handler, and a
//! typed token for each attribute (an IDR attribute of a QP, a PTR_IN of
//! bytes, a flags attribute, a PTR_OUT of a type), through which alone the
//! handler reads the call ([`Bundle`]). Before the device is registered,
//! [`Definitions::check`] walks the C tables and refuses the device unless
//! every method whose handler is a Rust one is described exactly as
//! declared: so a token's kind is the attribute's kind in every call, and
//! asking a PTR_IN attribute for a QP does not build.
//!
//! The core has checked every attribute against the description before the
//! handler runs, found the objects named by handle in the caller's file and
//! locked them for the call.

use core::marker::PhantomData;
use kernel::{
    bindings,
    error::to_result,
    ffi::c_int,
    prelude::*,
    transmute::AsBytes,
    uaccess::{UserPtr, UserSlice},
};

use super::{
    object::{Qp, UContext},
    Driver,
};

mod check;
mod definitions;

pub(crate) use definitions::{uapi_definitions, Definitions};

/// The kind of an attribute, as the method's C description declares it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Spec {
    /// `UVERBS_ATTR_IDR()` of object type `object`.
    #[allow(
        dead_code,
        reason = "for methods on an object; the provider's one method names none"
    )]
    Idr { object: u16 },
    /// `UVERBS_ATTR_PTR_IN()` of `min` to `max` bytes
    /// (`UVERBS_ATTR_FLAGS_IN()` is one of 4 to 8).
    PtrIn { min: u16, max: u16 },
    /// `UVERBS_ATTR_PTR_OUT()` of exactly `len` bytes (`UVERBS_ATTR_TYPE()`).
    PtrOut { len: u16 },
}

/// Whether a call must give an attribute (`UA_MANDATORY`, `UA_OPTIONAL`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Presence {
    Mandatory,
    Optional,
}

/// One attribute of a method's Rust declaration.
pub(crate) struct AttrDecl {
    pub(crate) id: u16,
    pub(crate) spec: Spec,
    pub(crate) presence: Presence,
}

/// The C entry point the method's description names.
pub(crate) type Handler = unsafe extern "C" fn(*mut bindings::uverbs_attr_bundle) -> c_int;

/// A method's Rust declaration, which its C description must match.
pub(crate) struct MethodDesc {
    /// The object type the method is of (`UVERBS_OBJECT_*`).
    pub(crate) object: u16,
    pub(crate) id: u16,
    pub(crate) handler: Handler,
    pub(crate) attrs: &'static [AttrDecl],
}

/// A method of a provider `Driver`, declared with [`uverbs_method!`].
pub(crate) trait Method: Sized + 'static {
    type Driver: Driver;
    const DESC: MethodDesc;
    /// The method: its call's attributes, checked by the core.
    fn handle(call: &Bundle<'_, Self>) -> Result;
}

/// What an IDR attribute may name: an object type the layer can hand to
/// the provider.
#[allow(
    dead_code,
    reason = "for methods on an object; the provider's one method names none"
)]
pub(crate) trait IdrObject {
    /// `UVERBS_OBJECT_*`.
    const TYPE: u16;
    /// The object of a driver `T`.
    type Object<T: Driver>;

    /// The provider's object of a live uobject of this type.
    ///
    /// # Safety
    ///
    /// `obj` is the object of a live uobject of type [`Self::TYPE`] of a
    /// device of `T`, locked for `'a`.
    unsafe fn from_uobject<'a, T: Driver>(
        obj: *mut core::ffi::c_void,
    ) -> Result<&'a Self::Object<T>>;
}

/// A QP handle.
#[allow(
    dead_code,
    reason = "for methods on an object; the provider's one method names none"
)]
pub(crate) enum QpObject {}

impl IdrObject for QpObject {
    const TYPE: u16 = bindings::uverbs_default_objects_UVERBS_OBJECT_QP as u16;
    type Object<T: Driver> = Qp<T>;

    unsafe fn from_uobject<'a, T: Driver>(obj: *mut core::ffi::c_void) -> Result<&'a Qp<T>> {
        // SAFETY: A live QP uobject's object of our device (the contract).
        unsafe { Qp::from_uobject(obj.cast()) }
    }
}

/// The token of an attribute of method `M`, of kind `K`.
///
/// # Invariants
///
/// `id` is an attribute of `M` of kind `K` (`K::SPEC`), in `M::DESC`:
/// [`Definitions::check`] refused any device whose description of `M`
/// says otherwise. `bkey` is its index in a call's bundle
/// (`uapi_bkey_attr(uapi_key_attr(id))`), below `UVERBS_API_ATTR_BKEY_LEN`.
pub(crate) struct Attr<M, K> {
    id: u16,
    bkey: u16,
    _p: PhantomData<fn() -> (M, K)>,
}

impl<M, K> Clone for Attr<M, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M, K> Copy for Attr<M, K> {}

impl<M, K> Attr<M, K> {
    /// # Safety
    ///
    /// `id` is declared with kind `K` in `M::DESC` (what
    /// [`uverbs_method!`] generates from one declaration).
    #[doc(hidden)]
    pub(crate) const unsafe fn new(id: u16) -> Self {
        // INVARIANT: By the caller's guarantee; `bkey()` refuses to build
        // an index outside the bundle.
        Attr {
            id,
            bkey: bkey(id),
            _p: PhantomData,
        }
    }
}

/// The index of attribute `id` in a call's bundle, as the core computes it
/// (`uapi_bkey_attr(uapi_key_attr(id))`, `include/rdma/uverbs_ioctl.h`):
/// driver and core attributes interleave. An ID the core would refuse
/// (`UVERBS_API_KEY_ERR`) does not build.
const fn bkey(id: u16) -> u16 {
    const NS: u16 = bindings::uapi_radix_data_UVERBS_API_NS_FLAG as u16;
    const HALF: u16 = 1 << (bindings::uapi_radix_data_UVERBS_API_ATTR_KEY_BITS - 1);
    let key = if id & NS != 0 {
        let n = (id & !NS) + 1;
        assert!(n < HALF, "driver attribute ID out of the core's range");
        n << 1
    } else {
        assert!(id < HALF, "core attribute ID out of the core's range");
        (id << 1) | 1
    };
    key - 1
}

/// `UVERBS_OBJECT_DEVICE`: the object of methods that name no object (the
/// verbs context's device), as mlx5's `QUERY_PORT`.
pub(crate) const OBJECT_DEVICE: u16 = bindings::uverbs_default_objects_UVERBS_OBJECT_DEVICE as u16;

/// Kinds of attribute tokens.
pub(crate) trait Kind {
    const SPEC: Spec;
}

/// An IDR attribute of an `O`.
#[allow(
    dead_code,
    reason = "for methods on an object; the provider's one method names none"
)]
pub(crate) struct Idr<O>(PhantomData<O>);
/// A PTR_IN attribute of `MIN..=MAX` bytes.
pub(crate) struct PtrIn<const MIN: u16, const MAX: u16>;
/// A flags attribute (`UVERBS_ATTR_FLAGS_IN()`): a PTR_IN of 4 to 8 bytes.
pub(crate) struct Flags;
/// A PTR_OUT attribute of a `V`.
pub(crate) struct PtrOut<V>(PhantomData<V>);

impl<O: IdrObject> Kind for Idr<O> {
    const SPEC: Spec = Spec::Idr { object: O::TYPE };
}
impl<const MIN: u16, const MAX: u16> Kind for PtrIn<MIN, MAX> {
    const SPEC: Spec = Spec::PtrIn { min: MIN, max: MAX };
}
impl Kind for Flags {
    const SPEC: Spec = Spec::PtrIn { min: 4, max: 8 };
}
impl<V: AsBytes> Kind for PtrOut<V> {
    const SPEC: Spec = Spec::PtrOut {
        len: {
            assert!(core::mem::size_of::<V>() <= u16::MAX as usize);
            core::mem::size_of::<V>() as u16
        },
    };
}

/// Declares a uverbs method of a provider once: a type `$name` with a
/// token for each attribute, its [`Method`] implementation (its
/// [`MethodDesc`], from the same declaration) and the C entry point
/// `$c_name` its C description names (`UVERBS_HANDLER(method_id)`).
///
/// ```ignore
/// uverbs_method! {
///     pub(super) QpPost for Provider, on QpObject::TYPE, id abi::IB_METHOD_QP_POST,
///     handler mlx4_bf_ib_handler_MLX4_BF_IB_METHOD_QP_POST => qp_post {
///         HANDLE: Idr<QpObject> = abi::IB_ATTR_QP_POST_HANDLE, Mandatory;
///         WQE: PtrIn<16, 256> = abi::IB_ATTR_QP_POST_WQE, Mandatory;
///     }
/// }
/// ```
macro_rules! uverbs_method {
    (
        $vis:vis $name:ident for $driver:ty, on $object:expr, id $id:expr,
        handler $c_name:ident => $f:path {
            $($attr:ident: $kind:ty = $attr_id:expr, $presence:ident;)*
        }
    ) => {
        $vis struct $name;

        #[allow(dead_code)]
        impl $name {
            $(
                $vis const $attr: $crate::rdma::method::Attr<$name, $kind> =
                    // SAFETY: Declared with this kind in `DESC` below, from
                    // the same line.
                    unsafe { $crate::rdma::method::Attr::new($attr_id) };
            )*
        }

        impl $crate::rdma::method::Method for $name {
            type Driver = $driver;
            const DESC: $crate::rdma::method::MethodDesc = $crate::rdma::method::MethodDesc {
                object: $object,
                id: $id,
                handler: $c_name,
                attrs: &[$(
                    $crate::rdma::method::AttrDecl {
                        id: $attr_id,
                        spec: <$kind as $crate::rdma::method::Kind>::SPEC,
                        presence: $crate::rdma::method::Presence::$presence,
                    },
                )*],
            };

            // Inlined into the C entry point: one call per method call.
            #[inline(always)]
            fn handle(call: &$crate::rdma::method::Bundle<'_, Self>) -> Result {
                $f(call)
            }
        }

        /// The method's C entry point, named by its C description.
        ///
        /// # Safety
        ///
        /// Called by the uverbs core with the bundle of a call of this
        /// method, on a device whose definitions `Definitions::check`
        /// accepted.
        #[no_mangle]
        #[allow(non_snake_case)]
        unsafe extern "C" fn $c_name(
            attrs: *mut ::kernel::bindings::uverbs_attr_bundle,
        ) -> ::kernel::ffi::c_int {
            // SAFETY: By the function's contract.
            unsafe { $crate::rdma::method::call::<$name>(attrs) }
        }
    };
}
pub(crate) use uverbs_method;

/// Runs `M`'s handler on a call, its errno for the core.
///
/// # Safety
///
/// `raw` is the bundle of a call of `M`, whose description
/// [`Definitions::check`] accepted, in progress on a device of `M::Driver`.
#[doc(hidden)]
#[inline(always)]
pub(crate) unsafe fn call<M: Method>(raw: *mut bindings::uverbs_attr_bundle) -> c_int {
    // SAFETY: By the function's contract; the bundle does not outlive the call.
    let bundle = unsafe { Bundle::<M>::from_raw(raw) };
    match M::handle(&bundle) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The attributes of one call of method `M`, checked by the core against
/// the method's description.
///
/// # Invariants
///
/// `raw` is the bundle of a call in progress of `M`, whose description
/// matches `M::DESC`, on a device of `M::Driver`; the core holds the
/// device's disassociation SRCU and the objects the call names for `'a`.
pub(crate) struct Bundle<'a, M: Method> {
    raw: *mut bindings::uverbs_attr_bundle,
    _t: PhantomData<(&'a (), M)>,
}

impl<'a, M: Method> Bundle<'a, M> {
    /// # Safety
    ///
    /// As the type's invariant, for the returned value's life.
    unsafe fn from_raw(raw: *mut bindings::uverbs_attr_bundle) -> Self {
        // INVARIANT: By the caller's guarantee.
        Bundle {
            raw,
            _t: PhantomData,
        }
    }

    /// The verbs context of the file the call came on; `EIO` once the
    /// device is gone (disassociated).
    pub(crate) fn ucontext(&self) -> Result<&'a UContext<M::Driver>> {
        // SAFETY: `raw` is live and the SRCU is held (type invariant), as
        // `ib_uverbs_get_ucontext_file()` requires (what the inline
        // `ib_uverbs_get_ucontext()` calls). `hdr` is the `struct_group()`
        // of the bundle's fixed fields, which the core initialized.
        let ctx = unsafe {
            bindings::ib_uverbs_get_ucontext_file((*self.raw).__bindgen_anon_1.hdr.ufile)
        };
        // `IS_ERR()` inline, as C inlines it on every call: the last
        // `MAX_ERRNO` addresses are errors.
        if ctx as usize >= (bindings::MAX_ERRNO as usize).wrapping_neg() {
            return Err(Error::from_errno(ctx as isize as i32));
        }
        // SAFETY: A context of a device of `M::Driver`, set up by its create
        // op before the file could make calls, and not destroyed while the
        // SRCU is held.
        Ok(unsafe { UContext::from_core(ctx) })
    }

    /// The attribute at bundle index `bkey`, if the call gave it.
    #[inline(always)]
    fn attr(&self, bkey: u16) -> Option<&bindings::uverbs_attr> {
        let bit = usize::from(bkey);
        let word_bits = 8 * core::mem::size_of::<kernel::ffi::c_ulong>();
        // SAFETY: `raw` is live (type invariant); the core set the bitmap of
        // the attributes present before calling the handler; `bkey` is below
        // `UVERBS_API_ATTR_BKEY_LEN`, the bitmap's length (`Attr`'s
        // invariant).
        let present = unsafe {
            (*self.raw).__bindgen_anon_1.hdr.attr_present[bit / word_bits] >> (bit % word_bits) & 1
        };
        if present == 0 {
            return None;
        }
        // SAFETY: A present attribute's slot, which the core filled (its
        // array has a slot for each key of the method, `key_bitmap_len`).
        Some(unsafe { &*(*self.raw).attrs.as_ptr().add(bit) })
    }

    #[allow(
        dead_code,
        reason = "for methods on an object; the provider's one method names none"
    )]
    /// The object the IDR attribute `a` names: one of the file's, its handle
    /// looked up and the object locked for the call by the core; `ENOENT`
    /// if an optional one was not given.
    pub(crate) fn obj<O: IdrObject>(&self, a: Attr<M, Idr<O>>) -> Result<&'a O::Object<M::Driver>> {
        let attr = self.attr(a.bkey).ok_or(ENOENT)?;
        // SAFETY: An IDR attribute of this method (`Attr`'s invariant): the
        // object member of its union is the live one, its uobject found by
        // the core and locked for the call.
        let obj = unsafe { (*attr.__bindgen_anon_1.obj_attr.uobject).object };
        // SAFETY: An IDR attribute of object type `O::TYPE` (`Attr`'s
        // invariant: the kind's object type was checked), found in the
        // caller's file of our device and locked for the call.
        unsafe { O::from_uobject::<M::Driver>(obj) }
    }

    /// Was the attribute `a` given?
    #[inline(always)]
    pub(crate) fn has<K>(&self, a: Attr<M, K>) -> bool {
        self.attr(a.bkey).is_some()
    }

    /// The flags attribute `a`, 0 if not given; `EINVAL` if it has a bit
    /// outside `allowed` (`uverbs_get_flags32()`).
    #[inline(always)]
    pub(crate) fn flags32(&self, a: Attr<M, Flags>, allowed: u32) -> Result<u32> {
        let Some(attr) = self.attr(a.bkey) else {
            return Ok(0);
        };
        // SAFETY: A PTR_IN of 4 to 8 bytes (`Attr`'s invariant), kept inline
        // in `data` by the core.
        let (len, data) = unsafe {
            let p = attr.__bindgen_anon_1.ptr_attr;
            (p.len, p.__bindgen_anon_1.data)
        };
        let flags = match len {
            8 => u32::try_from(data).map_err(|_| EINVAL)?,
            4 => {
                let bytes = data.to_ne_bytes();
                u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
            }
            _ => return Err(EINVAL),
        };
        if flags & !allowed != 0 {
            return Err(EINVAL);
        }
        Ok(flags)
    }

    /// Copies the input attribute `a` into the start of `buf`; returns its
    /// length. `EINVAL` if it is longer than `buf`, `EFAULT` if user memory
    /// could not be read (`uverbs_copy_from()`).
    #[inline(always)]
    pub(crate) fn read_into<const MIN: u16, const MAX: u16>(
        &self,
        a: Attr<M, PtrIn<MIN, MAX>>,
        buf: &mut [u8],
    ) -> Result<usize> {
        let attr = self.attr(a.bkey).ok_or(ENOENT)?;
        // SAFETY: A PTR_IN (`Attr`'s invariant) without `alloc_and_copy`
        // (checked): `data` holds the bytes if they fit, else their user
        // address; the core checked the length against the description.
        let (len, data) = unsafe {
            let p = attr.__bindgen_anon_1.ptr_attr;
            (usize::from(p.len), p.__bindgen_anon_1.data)
        };
        let to = buf.get_mut(..len).ok_or(EINVAL)?;
        if len <= core::mem::size_of::<u64>() {
            to.copy_from_slice(&data.to_ne_bytes()[..len]);
        } else {
            let from = UserPtr::from_addr(usize::try_from(data).map_err(|_| EFAULT)?);
            UserSlice::new(from, len).reader().read_slice(to)?;
        }
        Ok(len)
    }

    /// Writes `value` to the output attribute `a` (`uverbs_copy_to()`: at
    /// most the length user space gave, which the description bounds).
    pub(crate) fn write<V: AsBytes>(&self, a: Attr<M, PtrOut<V>>, value: &V) -> Result {
        // SAFETY: `raw` is live (type invariant); `a.id` is a PTR_OUT
        // (`Attr`'s invariant); `value` is readable for its size and has no
        // padding (`AsBytes`).
        to_result(unsafe {
            bindings::uverbs_copy_to(
                self.raw,
                a.id.into(),
                core::ptr::from_ref(value).cast(),
                core::mem::size_of::<V>(),
            )
        })
    }
}
