// SPDX-License-Identifier: GPL-2.0

//! The card's dedicated uverbs ioctl: `MLX4_BF_IB_METHOD_QP_POST` on the
//! device object, called on a verbs context's command file with
//! `RDMA_VERBS_IOCTL`, as libmlx4's patch calls it (tools/rdma-core/0001):
//! the WQE (already in the QP's send queue, which it names by its QPN),
//! optional flags, an optional result. The method's IDs, flags and result
//! are `uapi/mlx4_bf.h`'s (`mlx4_bf_core::abi`); the call's header and
//! attributes the RDMA core's, mirrored here.

use std::{io, os::fd::RawFd};

use mlx4_bf_core::abi::{self, PostResult};

/// `include/uapi/rdma/rdma_user_ioctl_cmds.h`.
const RDMA_IOCTL_MAGIC: u32 = 0x1b;
/// `_IOWR(RDMA_IOCTL_MAGIC, 1, struct ib_uverbs_ioctl_hdr)`.
const RDMA_VERBS_IOCTL: u32 =
    (3 << 30) | ((size_of::<Hdr>() as u32) << 16) | (RDMA_IOCTL_MAGIC << 8) | 1;
/// `UVERBS_OBJECT_DEVICE`, its `UVERBS_METHOD_QUERY_CONTEXT`
/// (include/uapi/rdma/ib_user_ioctl_cmds.h) and `RDMA_DRIVER_MLX4`.
const UVERBS_OBJECT_DEVICE: u16 = 0;
const UVERBS_METHOD_QUERY_CONTEXT: u16 = 4;
const RDMA_DRIVER_MLX4: u32 = 2;

/// `struct ib_uverbs_ioctl_hdr` without its flexible `attrs` array
/// (`include/uapi/rdma/rdma_user_ioctl_cmds.h`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Hdr {
    length: u16,
    object_id: u16,
    method_id: u16,
    num_attrs: u16,
    reserved1: u64,
    driver_id: u32,
    reserved2: u32,
}

/// `struct ib_uverbs_attr`: its `attr_data` union (an enum attribute's
/// element) unused here, so zero; `data` the value, or a pointer to it.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Attr {
    attr_id: u16,
    len: u16,
    flags: u16,
    attr_data: u16,
    data: u64,
}

const _: () = assert!(size_of::<Hdr>() == 24 && size_of::<Attr>() == 16);

/// A call: the header and room for the method's three attributes.
#[repr(C)]
struct Call {
    hdr: Hdr,
    attrs: [Attr; 3],
}

/// Posts `wqe` through the method on `cmd_fd`; `flags`
/// (`abi::POST_F_*`) if given; what was done into `result` if asked.
pub fn qp_post(
    cmd_fd: RawFd,
    wqe: &[u8],
    flags: Option<u32>,
    result: Option<&mut PostResult>,
) -> io::Result<()> {
    let mut call = Call {
        hdr: Hdr {
            object_id: UVERBS_OBJECT_DEVICE,
            method_id: abi::IB_METHOD_QP_POST,
            driver_id: RDMA_DRIVER_MLX4,
            ..Default::default()
        },
        attrs: [Attr::default(); 3],
    };
    let mut n = 0;
    let mut add = |attr_id, len: usize, data| {
        call.attrs[n] = Attr {
            attr_id,
            len: len as u16,
            data,
            ..Default::default()
        };
        n += 1;
    };
    add(abi::IB_ATTR_QP_POST_WQE, wqe.len(), wqe.as_ptr() as u64);
    if let Some(flags) = flags {
        // 8 bytes: uverbs_get_flags32() reads a 4-byte value from the
        // first 4 bytes of data, not where `data = flags` puts it on a
        // big-endian host.
        add(abi::IB_ATTR_QP_POST_FLAGS, 8, u64::from(flags));
    }
    if let Some(r) = result {
        add(
            abi::IB_ATTR_QP_POST_RESULT,
            size_of::<PostResult>(),
            r as *mut PostResult as u64,
        );
    }
    call.hdr.num_attrs = n as u16;
    verbs_ioctl(cmd_fd, &mut call)
}

/// A uverbs method's round trip and nothing else, what a post is compared
/// with: `UVERBS_METHOD_QUERY_CONTEXT` without attributes, which the core
/// dispatches to its handler, and which answers EOPNOTSUPP at once when
/// the provider has no `query_ucontext` (ours has none).
pub fn uverbs_floor(cmd_fd: RawFd) -> io::Result<()> {
    let mut call = Call {
        hdr: Hdr {
            object_id: UVERBS_OBJECT_DEVICE,
            method_id: UVERBS_METHOD_QUERY_CONTEXT,
            driver_id: RDMA_DRIVER_MLX4,
            ..Default::default()
        },
        attrs: [Attr::default(); 3],
    };
    match verbs_ioctl(cmd_fd, &mut call) {
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(()),
        r => r,
    }
}

/// `RDMA_VERBS_IOCTL` of `call`'s header and its first `num_attrs`
/// attributes.
fn verbs_ioctl(cmd_fd: RawFd, call: &mut Call) -> io::Result<()> {
    let n = usize::from(call.hdr.num_attrs).min(call.attrs.len());
    call.hdr.length = (size_of::<Hdr>() + n * size_of::<Attr>()) as u16;
    // SAFETY: `call` is a complete header with `n` attributes; what they
    // point to is the caller's and lives across the call.
    let rc = unsafe { libc::ioctl(cmd_fd, RDMA_VERBS_IOCTL as _, call as *mut Call) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
