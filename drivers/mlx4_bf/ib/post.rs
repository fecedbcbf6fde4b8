// SPDX-License-Identifier: GPL-2.0

//! The provider's uverbs method MLX4_BF_IB_METHOD_QP_POST: the BlueFlame
//! post of a WQE that libmlx4 built in its own send queue, for a process
//! that cannot store to its BlueFlame page (s390 without MIO) or chooses
//! not to. Its description is C (`ib/methods.c`); this is its handler.
//!
//! The method is on the device object: it names no object the core would
//! look up, lock and put on every call. The QP is the one whose number the
//! WQE's control segment carries (libmlx4 stamps it for BlueFlame), found
//! in the context's own table of its QPs ([`PostQps`]), which create,
//! modify and destroy keep under the lock every post holds from lookup to
//! write: a process reaches only its own context's QPs (another number is
//! `-ENOENT`), a destroy waits for a post under way, and the state rule
//! (RTS, SQD, SQE or ERR) is the table's.
//!
//! The phases are the kernel ping's sends': copy in, look up, check
//! (the queue's rules, [`wqe::validate_queued`]: the owner bit and WQE
//! counter are user space's; a UD QP's address vector names its PD), check
//! regions (a data segment's lkey names a region of the QP's PD), place and
//! write (the adapter's, shared with
//! the kernel ping). The kernel does not write the send queue: libmlx4 did, and
//! a WQE that does not fit the BlueFlame buffer, or a QP whose number
//! cannot be stamped, gets the send doorbell, after which the adapter reads
//! the queue. What an RDMA names remotely is the responder's to check, as
//! for every RC QP of this provider; a post goes through the context's own
//! UAR.

use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNode},
    sync::{Arc, Mutex},
};

use super::Provider;
use crate::{
    abi,
    adapter::{Adapter, Posted},
    geometry::SQ_STRIDE,
    layout,
    rdma::method::{uapi_definitions, uverbs_method, Bundle, Flags, PtrIn, PtrOut, OBJECT_DEVICE},
    region,
    reject::{self, Reject},
    stats::{Counted, Counts},
    verbs::QpState,
    wqe::{self, Path, Transport},
};

// SAFETY: `repr(C)` integers without padding.
unsafe impl kernel::transmute::AsBytes for abi::PostResult {}

/// The largest WQE the method takes, as its description's `u16`. Built with
/// `--cfg mlx4_bf_method_mismatch` (the provider suite's second module),
/// the declaration says less than `ib/methods.c` does, and the device must
/// be refused at registration.
const MAX_WQE: u16 = if cfg!(mlx4_bf_method_mismatch) {
    abi::QP_POST_MAX_WQE as u16 - 16
} else {
    abi::QP_POST_MAX_WQE as u16
};

uverbs_method! {
    pub(super) QpPost for Provider, on OBJECT_DEVICE, id abi::IB_METHOD_QP_POST,
    handler mlx4_bf_ib_handler_MLX4_BF_IB_METHOD_QP_POST => qp_post {
        WQE: PtrIn<16, MAX_WQE> = abi::IB_ATTR_QP_POST_WQE, Mandatory;
        FLAGS: Flags = abi::IB_ATTR_QP_POST_FLAGS, Optional;
        RESULT: PtrOut<abi::PostResult> = abi::IB_ATTR_QP_POST_RESULT, Optional;
    }
}

uapi_definitions!(pub(super) METHODS: Provider = mlx4_bf_uapi_defs [QpPost]);

/// `MLX4_BF_IB_METHOD_QP_POST`: its attributes, checked by the core
/// against `ib/methods.c`, which `QpPost` declares.
fn qp_post(call: &Bundle<'_, QpPost>) -> Result {
    let ctx = call.ucontext()?.data();
    let flags = call.flags32(QpPost::FLAGS, abi::POST_F_ALL)?;
    let report = call
        .has(QpPost::RESULT)
        .then_some(|r: &abi::PostResult| call.write(QpPost::RESULT, r));
    ctx.poster()
        .post(flags, |buf| call.read_into(QpPost::WQE, buf), report)
}

/// What `scripts/compile-fail.sh` builds to show that the tokens refuse a
/// handler that reads an attribute as what it is not: a PTR_IN asked for a
/// QP, the flags read as bytes. Neither compiles (E0308).
#[cfg(mlx4_bf_compile_fail_ptr_in_as_qp)]
#[allow(dead_code)]
fn ptr_in_as_qp(call: &Bundle<'_, QpPost>) -> Result {
    call.obj::<crate::rdma::method::QpObject>(QpPost::WQE)
        .map(drop)
}
#[cfg(mlx4_bf_compile_fail_flags_as_bytes)]
#[allow(dead_code)]
fn flags_as_bytes(call: &Bundle<'_, QpPost>) -> Result {
    call.read_into(QpPost::FLAGS, &mut [0; 8]).map(drop)
}

/// A WQE's copy, 8-byte aligned for the BlueFlame writer, with room for
/// the padding of the longest burst.
#[repr(C, align(8))]
struct WqeBuf([u8; SQ_STRIDE]);

/// What a post needs of one of the context's QPs.
#[derive(Clone, Copy)]
struct PostQp {
    pdn: u32,
    /// What its WQEs are laid out for (a UD QP's carry a datagram
    /// segment naming its PD).
    transport: Transport,
    /// The state its last transition left it in.
    state: QpState,
}

struct PostState {
    /// The BlueFlame buffer the context's next burst takes.
    bf_half: u32,
    /// The context's QPs by number.
    qps: RBTree<u32, PostQp>,
    wqe: WqeBuf,
    /// The context's post counters, which the device's include.
    counts: Counts,
}

impl Counted for Mutex<PostState> {
    fn counts(&self) -> reject::PostCounts {
        self.lock().counts.snapshot()
    }
}

/// The context's QPs as its posts see them, shared by the context and its
/// QPs: a QP enters at create, its state follows each transition, it
/// leaves at destroy, all under the lock a post holds from lookup to
/// write.
#[derive(Clone)]
pub(crate) struct PostQps(Arc<Mutex<PostState>>);

impl PostQps {
    /// Enters QP `qpn` of PD `pdn`, in RESET; a UD QP if `datagram`.
    pub(super) fn add(&self, qpn: u32, pdn: u32, datagram: bool) -> Result {
        let transport = if datagram {
            Transport::Datagram { pd: pdn }
        } else {
            Transport::Connected
        };
        let node = RBTreeNode::new(
            qpn,
            PostQp {
                pdn,
                transport,
                state: QpState::Reset,
            },
            GFP_KERNEL,
        )?;
        let mut st = self.0.lock();
        if st.qps.get(&qpn).is_some() {
            return Err(EBUSY);
        }
        st.qps.insert(node);
        Ok(())
    }

    /// QP `qpn`'s transition to `state` is done.
    pub(super) fn set_state(&self, qpn: u32, state: QpState) {
        if let Some(qp) = self.0.lock().qps.get_mut(&qpn) {
            qp.state = state;
        }
    }

    /// QP `qpn` goes: no post finds it from here on, and one under way has
    /// finished.
    pub(super) fn remove(&self, qpn: u32) {
        let node = self.0.lock().qps.remove_node(&qpn);
        drop(node);
    }
}

/// A rule's verdict, or the post's error with its reject counted in
/// `$counts`; inline at each rule (no closure call per check).
macro_rules! check {
    ($counts:expr, $verdict:expr, $errno:expr) => {
        match $verdict {
            Ok(v) => v,
            Err(why) => {
                $counts.reject(why);
                return Err($errno);
            }
        }
    };
}

/// What the method's posts on one verbs context share: its UAR, its QPs,
/// the alternation between the two buffers of its BlueFlame register, and
/// its counters, which the device's include.
pub(crate) struct Poster {
    adapter: Arc<Adapter>,
    uar_index: u32,
    /// Whether the context offers BlueFlame at all (`ib_blueflame`).
    blueflame: bool,
    state: PostQps,
}

impl Poster {
    pub(super) fn new(adapter: &Arc<Adapter>, uar_index: u32, blueflame: bool) -> Result<Self> {
        let state = PostQps(Arc::pin_init(
            new_mutex!(PostState {
                bf_half: 0,
                qps: RBTree::new(),
                wqe: WqeBuf([0; SQ_STRIDE]),
                counts: Counts::default(),
            }),
            GFP_KERNEL,
        )?);
        adapter.stats().attach(state.0.clone())?;
        Ok(Poster {
            adapter: adapter.clone(),
            uar_index,
            blueflame,
            state,
        })
    }

    /// The context's QPs, for its QPs to enter and leave.
    pub(super) fn qps(&self) -> &PostQps {
        &self.state
    }

    /// Posts the WQE `read` copies in to the context's QP it names.
    /// `report`, if given, tells the process what was done; it runs before
    /// the device sees the WQE, so a failed report posted nothing.
    fn post(
        &self,
        flags: u32,
        read: impl FnOnce(&mut [u8]) -> Result<usize>,
        report: Option<impl FnOnce(&abi::PostResult) -> Result>,
    ) -> Result {
        if flags == abi::POST_F_ALL {
            return Err(EINVAL);
        }
        let mut guard = self.state.0.lock();
        let PostState {
            bf_half,
            qps,
            wqe: WqeBuf(copy),
            counts,
        } = &mut *guard;
        // Copy in.
        let len = match read(&mut copy[..abi::QP_POST_MAX_WQE]) {
            Ok(len) => len,
            Err(e) => {
                counts.reject(if e == EFAULT {
                    Reject::Fault
                } else {
                    Reject::Length
                });
                return Err(e);
            }
        };
        let (qpn, path) = self.check(qps, counts, &mut copy[..len], flags)?;
        // Place.
        let (place, mut result) =
            self.adapter
                .place((self.uar_index, *bf_half), path, copy, len)?;
        result.wqe_index = wqe::counter(copy);
        if let Some(report) = report {
            result.store_blocks = self.adapter.store_blocks(copy, &place);
            report(&result)?;
        }
        // Write: the queue is user space's, already written.
        if place.blueflame().is_some() {
            *bf_half = layout::next_bf_half(*bf_half, self.adapter.caps().bf_buf_size());
        }
        match self.adapter.write_wqe(&place, qpn, copy, |_| {})? {
            Posted::BlueFlame { bytes, blocks } => counts.blueflame(bytes, blocks),
            Posted::Doorbell => counts.doorbell(len),
        }
        Ok(())
    }

    /// Look up and check: the QP the WQE in `buf` names, one of the
    /// context's, in a state that sends; the WQE by the queue's rules; the
    /// regions it gathers from; the path it takes. Each refusal counted.
    #[inline(always)]
    fn check(
        &self,
        qps: &RBTree<u32, PostQp>,
        counts: &mut Counts,
        buf: &mut [u8],
        flags: u32,
    ) -> Result<(u32, Path)> {
        // Look up: the QP the WQE names, one of the context's, in a state
        // that sends.
        let qpn = check!(counts, wqe::named_qpn(buf), EINVAL);
        let qp = *check!(counts, qps.get(&qpn).ok_or(Reject::Qp), ENOENT);
        if !matches!(
            qp.state,
            QpState::Rts | QpState::Sqd | QpState::Sqe | QpState::Err
        ) {
            counts.reject(Reject::Qp);
            return Err(EINVAL);
        }
        // Check.
        let max_len = usize::from(self.adapter.firmware().dev_cap.max_desc_sz_sq);
        // An address vector of another PD is a protection matter, as an
        // lkey of another PD's region.
        let info = match wqe::validate_queued(buf, qpn, max_len, qp.transport) {
            Err(Reject::Address) => {
                counts.reject(Reject::Address);
                return Err(EACCES);
            }
            verdict => check!(counts, verdict, EINVAL),
        };
        // Check regions.
        if info.gather_segs != 0 {
            check!(
                counts,
                region::check_gathers(buf, &info, |key| self.adapter.region(key, qp.pdn)),
                EACCES
            );
        }
        let bf_buf_size = self.adapter.caps().bf_buf_size();
        let path = if self.blueflame && wqe::qpn_is_bf_safe(qpn) {
            check!(counts, wqe::choose_path(&info, flags, bf_buf_size), EINVAL)
        } else if flags & abi::POST_F_REQUIRE_BF != 0 {
            counts.reject(Reject::Length);
            return Err(EINVAL);
        } else {
            Path::Doorbell
        };
        Ok((qpn, path))
    }
}

impl Drop for Poster {
    fn drop(&mut self) {
        self.adapter.stats().detach(&*self.state.0);
    }
}
