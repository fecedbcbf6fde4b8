// SPDX-License-Identifier: GPL-2.0

//! Events from the adapter to the core: a CQ's completion event to its
//! `comp_handler`, a CQ's, QP's or SRQ's asynchronous event to its
//! `event_handler`, a port's to `ib_dispatch_event()`. (The core itself
//! tells every verbs context `IB_EVENT_DEVICE_FATAL` when unregistration
//! disassociates it.)
//!
//! The provider learns of them by number (a CQN, a QPN, a port) and hands
//! them to [`Events`], which finds the object as mlx4's `cq.c` and `qp.c`
//! do: in an xarray, taking a reference on the object for the delivery and
//! dropping it after. A CQ, QP or SRQ is entered by its create op once it is
//! made and taken out by its destroy op, which then waits until no
//! delivery holds a reference: an event never reaches an object that is
//! gone, and deliveries of different objects never wait for each other.
//! Port events before the device is registered are held and delivered
//! once it is (the core's caches are set up only by `ib_register_device()`);
//! after unregistration began they are dropped. Every delivery may run in
//! atomic context: the handlers of user CQs and QPs take spinlocks and
//! allocate with `GFP_ATOMIC`, and `ib_dispatch_event()` allocates with
//! `GFP_ATOMIC` and queues work (7.2, `core/cache.c`).

use core::ptr::NonNull;
use kernel::{
    bindings,
    ffi::c_void,
    new_spinlock,
    prelude::*,
    sync::{Arc, Completion, Refcount, SpinLock},
    xarray::{AllocKind, XArray},
};

/// An asynchronous event of a QP (`enum ib_event_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpEvent {
    CommEstablished,
    LastWqeReached,
    SqDrained,
    PathMigrated,
    PathMigrationError,
    /// Catastrophic error: the QP is in the error state.
    Fatal,
    /// An invalid request from the peer.
    RequestError,
    /// A remote access error.
    AccessError,
}

/// An asynchronous event of an SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SrqEvent {
    /// Fewer WQEs than its armed limit are posted.
    LimitReached,
    /// Catastrophic error.
    Error,
}

impl SrqEvent {
    fn raw(self) -> bindings::ib_event_type {
        match self {
            SrqEvent::LimitReached => bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
            SrqEvent::Error => bindings::ib_event_type_IB_EVENT_SRQ_ERR,
        }
    }
}

/// An asynchronous event of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortEvent {
    Active,
    Error,
}

impl QpEvent {
    fn raw(self) -> bindings::ib_event_type {
        match self {
            QpEvent::CommEstablished => bindings::ib_event_type_IB_EVENT_COMM_EST,
            QpEvent::LastWqeReached => bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
            QpEvent::SqDrained => bindings::ib_event_type_IB_EVENT_SQ_DRAINED,
            QpEvent::PathMigrated => bindings::ib_event_type_IB_EVENT_PATH_MIG,
            QpEvent::PathMigrationError => bindings::ib_event_type_IB_EVENT_PATH_MIG_ERR,
            QpEvent::Fatal => bindings::ib_event_type_IB_EVENT_QP_FATAL,
            QpEvent::RequestError => bindings::ib_event_type_IB_EVENT_QP_REQ_ERR,
            QpEvent::AccessError => bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
        }
    }
}

impl PortEvent {
    fn raw(self) -> bindings::ib_event_type {
        match self {
            PortEvent::Active => bindings::ib_event_type_IB_EVENT_PORT_ACTIVE,
            PortEvent::Error => bindings::ib_event_type_IB_EVENT_PORT_ERR,
        }
    }
}

/// A CQ, QP or SRQ as events reach it.
///
/// # Invariants
///
/// `raw` is the core's `ib_cq`, `ib_qp` or `ib_srq` (as its table says), live while
/// `users` is above zero: its destroy op takes it out of the table, drops
/// the table's reference and waits for `idle` before the core frees it.
#[pin_data]
struct Hook {
    raw: NonNull<c_void>,
    /// 1 while in its table, and 1 for each delivery under way.
    users: Refcount,
    #[pin]
    idle: Completion,
}

// SAFETY: `raw` is followed only while a reference is held (invariant),
// from any thread: the core's objects are shared with the core's locking.
unsafe impl Send for Hook {}
// SAFETY: As above.
unsafe impl Sync for Hook {}

impl Hook {
    /// Drops a reference; the last one wakes the destroy op.
    fn put(&self) {
        if self.users.dec_and_test() {
            self.idle.complete_all();
        }
    }
}

/// A table of CQs, QPs or SRQs by number.
type Table = XArray<Arc<Hook>>;

/// Where port events go.
#[derive(Clone, Copy)]
enum Ports {
    /// Not registered yet: the last event of each port (bit `port - 1`),
    /// delivered at registration.
    Held {
        active: u64,
        error: u64,
    },
    Registered(NonNull<bindings::ib_device>),
    /// Unregistration began.
    Gone,
}

/// The event targets of one ib_device ([`super::device::UnregisteredDevice::events`]).
#[pin_data]
pub(crate) struct Events {
    #[pin]
    cqs: Table,
    #[pin]
    qps: Table,
    #[pin]
    srqs: Table,
    #[pin]
    ports: SpinLock<Ports>,
}

// SAFETY: The device pointer is followed only while registered, under the
// lock; the tables hold `Send + Sync` hooks.
unsafe impl Send for Events {}
// SAFETY: As above.
unsafe impl Sync for Events {}

impl Events {
    pub(super) fn new() -> impl PinInit<Self> {
        pin_init!(Events {
            cqs <- XArray::new(AllocKind::Alloc),
            qps <- XArray::new(AllocKind::Alloc),
            srqs <- XArray::new(AllocKind::Alloc),
            ports <- new_spinlock!(Ports::Held { active: 0, error: 0 }),
        })
    }

    /// The device is registered: port events reach it, the held ones first.
    ///
    /// # Safety
    ///
    /// `ib` is registered until [`Events::detach`] is called.
    pub(super) unsafe fn registered(&self, ib: NonNull<bindings::ib_device>) {
        let mut ports = self.ports.lock();
        if let Ports::Held { active, error } = *ports {
            for (bits, kind) in [(active, PortEvent::Active), (error, PortEvent::Error)] {
                for port in (0..64).filter(|p| bits & (1u64 << p) != 0) {
                    // SAFETY: Registered (the function's contract).
                    unsafe { dispatch(ib, port + 1, kind) };
                }
            }
            *ports = Ports::Registered(ib);
        }
    }

    /// Unregistration begins: no port event reaches the device any more.
    pub(super) fn detach(&self) {
        *self.ports.lock() = Ports::Gone;
    }

    /// Enters `raw` as `n` of `table`.
    fn add(table: &Table, n: u32, raw: NonNull<c_void>) -> Result {
        let hook = Arc::pin_init(
            pin_init!(Hook {
                raw,
                users: Refcount::new(1),
                idle <- Completion::new(),
            }),
            GFP_KERNEL,
        )?;
        let mut t = table.lock();
        if t.get(n as usize).is_some() {
            return Err(EBUSY);
        }
        t.store(n as usize, hook, GFP_KERNEL)?;
        Ok(())
    }

    /// Takes `n` out of `table` and waits until no delivery uses it.
    fn remove(table: &Table, n: u32, raw: NonNull<c_void>) {
        let hook = {
            let mut t = table.lock();
            match t.get(n as usize) {
                Some(h) if h.raw == raw => t.remove(n as usize),
                _ => None,
            }
        };
        if let Some(hook) = hook {
            if !hook.users.dec_and_test() {
                hook.idle.wait_for_completion();
            }
        }
    }

    /// `n` of `table` with a reference for one delivery, if there.
    fn get(table: &Table, n: u32) -> Option<Arc<Hook>> {
        let t = table.lock();
        let hook = t.get(n as usize)?;
        // In the table: at least the table's reference is held.
        hook.users.inc();
        Some(hook.into())
    }

    /// Enters CQ `cqn`, which its create op has made.
    ///
    /// # Safety
    ///
    /// `cq` is a live CQ of the device, taken out with
    /// [`Events::remove_cq`] before it is freed.
    pub(super) unsafe fn add_cq(&self, cqn: u32, cq: NonNull<bindings::ib_cq>) -> Result {
        // INVARIANT: By the function's contract.
        Self::add(&self.cqs, cqn, cq.cast())
    }

    /// Takes CQ `cqn` out; no event reaches it once this returns.
    pub(super) fn remove_cq(&self, cqn: u32, cq: NonNull<bindings::ib_cq>) {
        Self::remove(&self.cqs, cqn, cq.cast());
    }

    /// Enters QP `qpn`, which its create op has made.
    ///
    /// # Safety
    ///
    /// As [`Events::add_cq`], for a QP.
    pub(super) unsafe fn add_qp(&self, qpn: u32, qp: NonNull<bindings::ib_qp>) -> Result {
        // INVARIANT: By the function's contract.
        Self::add(&self.qps, qpn, qp.cast())
    }

    /// Takes QP `qpn` out; no event reaches it once this returns.
    pub(super) fn remove_qp(&self, qpn: u32, qp: NonNull<bindings::ib_qp>) {
        Self::remove(&self.qps, qpn, qp.cast());
    }

    /// Enters SRQ `srqn`, which its create op has made.
    ///
    /// # Safety
    ///
    /// As [`Events::add_cq`], for an SRQ.
    pub(super) unsafe fn add_srq(&self, srqn: u32, srq: NonNull<bindings::ib_srq>) -> Result {
        // INVARIANT: By the function's contract.
        Self::add(&self.srqs, srqn, srq.cast())
    }

    /// Takes SRQ `srqn` out; no event reaches it once this returns.
    pub(super) fn remove_srq(&self, srqn: u32, srq: NonNull<bindings::ib_srq>) {
        Self::remove(&self.srqs, srqn, srq.cast());
    }

    /// A completion event of CQ `cqn`: its completion handler runs (for a
    /// user CQ `ib_uverbs_comp_handler()`, which queues the event to the
    /// channel user space waits on). Returns whether the CQ exists.
    pub(crate) fn completion(&self, cqn: u32) -> bool {
        let Some(hook) = Self::get(&self.cqs, cqn) else {
            return false;
        };
        let cq = hook.raw.as_ptr().cast::<bindings::ib_cq>();
        // SAFETY: Live while the reference is held (`Hook`'s invariant); the
        // core sets the handler and its context before the create op and
        // never changes them.
        unsafe {
            if let Some(handler) = (*cq).comp_handler {
                handler(cq, (*cq).cq_context);
            }
        }
        hook.put();
        true
    }

    /// A CQ error (overrun, access error) of CQ `cqn`.
    pub(crate) fn cq_error(&self, cqn: u32) -> bool {
        let Some(hook) = Self::get(&self.cqs, cqn) else {
            return false;
        };
        let cq = hook.raw.as_ptr().cast::<bindings::ib_cq>();
        // SAFETY: As for the completion handler.
        unsafe {
            let mut event = bindings::ib_event {
                device: (*cq).device,
                element: bindings::ib_event__bindgen_ty_1 { cq },
                event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
            };
            if let Some(handler) = (*cq).event_handler {
                handler(&mut event, (*cq).cq_context);
            }
        }
        hook.put();
        true
    }

    /// An asynchronous event of QP `qpn`.
    pub(crate) fn qp_event(&self, qpn: u32, kind: QpEvent) -> bool {
        let Some(hook) = Self::get(&self.qps, qpn) else {
            return false;
        };
        let qp = hook.raw.as_ptr().cast::<bindings::ib_qp>();
        // SAFETY: As for a CQ's event handler; the core sets the QP's handler
        // (`__ib_qp_event_handler`) and context before the create op.
        unsafe {
            let mut event = bindings::ib_event {
                device: (*qp).device,
                element: bindings::ib_event__bindgen_ty_1 { qp },
                event: kind.raw(),
            };
            if let Some(handler) = (*qp).event_handler {
                handler(&mut event, (*qp).qp_context);
            }
        }
        hook.put();
        true
    }

    /// An asynchronous event of SRQ `srqn` (for a user SRQ the core queues
    /// it to its context's async file).
    pub(crate) fn srq_event(&self, srqn: u32, kind: SrqEvent) -> bool {
        let Some(hook) = Self::get(&self.srqs, srqn) else {
            return false;
        };
        let srq = hook.raw.as_ptr().cast::<bindings::ib_srq>();
        // SAFETY: As for a CQ's event handler; the core sets the SRQ's
        // handler and context before the create op (`ib_create_srq_user()`).
        unsafe {
            let mut event = bindings::ib_event {
                device: (*srq).device,
                element: bindings::ib_event__bindgen_ty_1 { srq },
                event: kind.raw(),
            };
            if let Some(handler) = (*srq).event_handler {
                handler(&mut event, (*srq).srq_context);
            }
        }
        hook.put();
        true
    }

    /// An event of port `port` (from 1), to every registered handler; held
    /// until registration, dropped after unregistration began.
    pub(crate) fn port_event(&self, port: u32, kind: PortEvent) {
        let mut ports = self.ports.lock();
        match &mut *ports {
            Ports::Held { active, error } => {
                let Some(bit) = port.checked_sub(1).filter(|&b| b < 64) else {
                    return;
                };
                let (set, clear) = match kind {
                    PortEvent::Active => (active, error),
                    PortEvent::Error => (error, active),
                };
                *set |= 1 << bit;
                *clear &= !(1 << bit);
            }
            // SAFETY: Registered until `detach()`, which takes the lock.
            Ports::Registered(ib) => unsafe { dispatch(*ib, port, kind) },
            Ports::Gone => {}
        }
    }
}

/// `ib_dispatch_event()` of `kind` on `port`.
///
/// # Safety
///
/// `ib` is registered.
unsafe fn dispatch(ib: NonNull<bindings::ib_device>, port: u32, kind: PortEvent) {
    let event = bindings::ib_event {
        device: ib.as_ptr(),
        element: bindings::ib_event__bindgen_ty_1 { port_num: port },
        event: kind.raw(),
    };
    // SAFETY: `ib` is registered (the function's contract); the event is
    // copied. The call may run in atomic context (7.2: it allocates with
    // `GFP_ATOMIC` and queues the work).
    unsafe { bindings::ib_dispatch_event(&event) };
}
