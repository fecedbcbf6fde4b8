// SPDX-License-Identifier: GPL-2.0

//! The C descriptions of a provider's methods against their Rust
//! declarations: every method the chain describes must be one of the
//! declarations (its handler the declaration's), of the declared object type
//! and id, and describe each declared attribute with the declared kind,
//! sizes and presence; every declaration must be described. The core parses
//! a call by the C description, a handler reads it by the declaration: where
//! they agree, a token's kind is the kind of the attribute the core parsed.
//! And a handler is reached only through the chain of the driver it was
//! declared for: another driver's chain naming it is refused, as the method
//! is not among that driver's declarations.

use kernel::{bindings, prelude::*};

use super::{AttrDecl, MethodDesc, Presence, Spec};

/// Chains nested deeper than this are refused (the core's own are two).
const MAX_DEPTH: u32 = 8;

/// Checks the chain `defs` against `methods`.
///
/// # Safety
///
/// `defs` is a static array of `struct uapi_definition` built with the
/// core's macros and ended by an empty entry.
pub(super) unsafe fn check(
    defs: *const bindings::uapi_definition,
    methods: &[&MethodDesc],
) -> Result {
    let mut described: KVec<bool> = KVec::from_elem(false, methods.len(), GFP_KERNEL)?;
    // SAFETY: By the function's contract.
    unsafe { walk_chain(defs, methods, &mut described, 0)? };
    if let Some(i) = described.iter().position(|d| !d) {
        pr_err!(
            "uverbs method {:#x}: declared, not in the C description\n",
            methods[i].id
        );
        return Err(EINVAL);
    }
    Ok(())
}

/// # Safety
///
/// As [`check`], for `defs`.
unsafe fn walk_chain(
    defs: *const bindings::uapi_definition,
    methods: &[&MethodDesc],
    described: &mut [bool],
    depth: u32,
) -> Result {
    if defs.is_null() || depth > MAX_DEPTH {
        return Err(EINVAL);
    }
    let mut at = defs;
    loop {
        // SAFETY: An entry of the array (the contract), which ends with
        // `UAPI_DEF_END` before its end.
        let def = unsafe { &*at };
        match u32::from(def.kind) {
            bindings::uapi_definition_kind_UAPI_DEF_END => return Ok(()),
            bindings::uapi_definition_kind_UAPI_DEF_CHAIN_OBJ_TREE => {
                // SAFETY: The member `UAPI_DEF_CHAIN_OBJ_TREE()` sets: a static
                // object description or null (`PTR_IF()`).
                let obj = unsafe { def.__bindgen_anon_2.chain_obj_tree };
                if !obj.is_null() {
                    // SAFETY: A static object description.
                    unsafe { walk_object(&*obj, methods, described)? };
                }
            }
            bindings::uapi_definition_kind_UAPI_DEF_CHAIN => {
                // SAFETY: The member `UAPI_DEF_CHAIN()` sets: another such
                // array.
                unsafe { walk_chain(def.__bindgen_anon_2.chain, methods, described, depth + 1)? };
            }
            // Object starts and support tests name no handler.
            bindings::uapi_definition_kind_UAPI_DEF_OBJECT_START
            | bindings::uapi_definition_kind_UAPI_DEF_IS_SUPPORTED_FUNC
            | bindings::uapi_definition_kind_UAPI_DEF_IS_SUPPORTED_DEV_FN => {}
            // A write command's handler is C's, declared nowhere here.
            bindings::uapi_definition_kind_UAPI_DEF_WRITE => {
                pr_err!("uverbs definitions: a write command, which no declaration covers\n");
                return Err(EINVAL);
            }
            kind => {
                pr_err!("uverbs definitions: unknown entry kind {}\n", kind);
                return Err(EINVAL);
            }
        }
        // SAFETY: Not the last entry (that is `UAPI_DEF_END`).
        at = unsafe { at.add(1) };
    }
}

/// # Safety
///
/// `obj` is a static object description built with the core's macros.
unsafe fn walk_object(
    obj: &bindings::uverbs_object_def,
    methods: &[&MethodDesc],
    described: &mut [bool],
) -> Result {
    if obj.num_methods != 0 && obj.methods.is_null() {
        return Err(EINVAL);
    }
    for i in 0..obj.num_methods {
        // SAFETY: `methods` points to an array of `num_methods` pointers to
        // static method descriptions (`ADD_UVERBS_METHODS()`).
        let method = unsafe {
            *obj.methods
                .cast::<*const bindings::uverbs_method_def>()
                .add(i)
        };
        if method.is_null() {
            continue;
        }
        // SAFETY: A static method description.
        let method = unsafe { &*method };
        let Some(d) = method.handler.and_then(|handler| {
            methods
                .iter()
                .position(|m| m.handler as usize == handler as usize)
        }) else {
            pr_err!(
                "uverbs method {:#x} of object {:#x}: described, not declared\n",
                method.id,
                obj.id
            );
            return Err(EINVAL);
        };
        let decl = methods[d];
        if decl.object != obj.id || decl.id != method.id {
            pr_err!(
                "uverbs method {:#x} of object {:#x}: declared as {:#x} of object {:#x}\n",
                method.id,
                obj.id,
                decl.id,
                decl.object
            );
            return Err(EINVAL);
        }
        // SAFETY: A static method description.
        unsafe { check_attrs(method, decl)? };
        described[d] = true;
    }
    Ok(())
}

/// # Safety
///
/// `method` is a static method description built with the core's macros.
unsafe fn check_attrs(method: &bindings::uverbs_method_def, decl: &MethodDesc) -> Result {
    if method.num_attrs != 0 && method.attrs.is_null() {
        return Err(EINVAL);
    }
    for a in decl.attrs {
        let found = (0..method.num_attrs)
            .map(|i| {
                // SAFETY: `attrs` points to `num_attrs` pointers to static
                // attribute descriptions (`DECLARE_UVERBS_NAMED_METHOD()`).
                unsafe {
                    *method
                        .attrs
                        .cast::<*const bindings::uverbs_attr_def>()
                        .add(i)
                }
            })
            .filter(|p| !p.is_null())
            // SAFETY: A static attribute description.
            .map(|p| unsafe { &*p })
            .find(|c| c.id == a.id);
        let Some(c) = found else {
            pr_err!(
                "uverbs method {:#x}: attribute {:#x} declared, not described\n",
                decl.id,
                a.id
            );
            return Err(EINVAL);
        };
        if !matches(&c.attr, a) {
            pr_err!(
                "uverbs method {:#x}: attribute {:#x} is declared {:?} ({:?}), described otherwise (type {})\n",
                decl.id,
                a.id,
                a.spec,
                a.presence,
                c.attr.type_
            );
            return Err(EINVAL);
        }
    }
    Ok(())
}

/// Whether the C attribute `c` is what `a` declares.
fn matches(c: &bindings::uverbs_attr_spec, a: &AttrDecl) -> bool {
    let mandatory = c.mandatory() != 0;
    if mandatory != (a.presence == Presence::Mandatory) || c.is_udata() != 0 {
        return false;
    }
    let ty = u32::from(c.type_);
    match a.spec {
        Spec::Idr { object } => {
            // SAFETY: The union member `UVERBS_ATTR_IDR()` sets for this type.
            let obj = unsafe { c.u.obj };
            ty == bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_IDR
                && obj.obj_type == object
                && (u32::from(obj.access) == bindings::uverbs_obj_access_UVERBS_ACCESS_READ
                    || u32::from(obj.access) == bindings::uverbs_obj_access_UVERBS_ACCESS_WRITE)
        }
        Spec::PtrIn { min, max } => {
            // SAFETY: The union member `UVERBS_ATTR_PTR_IN()` sets.
            let ptr = unsafe { c.u.ptr };
            ty == bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_PTR_IN
                && ptr.min_len == min
                && ptr.len == max
                && c.alloc_and_copy() == 0
        }
        Spec::PtrOut { len } => {
            // SAFETY: The union member `UVERBS_ATTR_PTR_OUT()` sets.
            let ptr = unsafe { c.u.ptr };
            ty == bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_PTR_OUT
                && ptr.min_len == len
                && ptr.len == len
        }
    }
}
