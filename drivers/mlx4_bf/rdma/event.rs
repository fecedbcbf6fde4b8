// SPDX-License-Identifier: GPL-2.0

//! Events from the adapter to the core: a CQ's completion event to its
//! `comp_handler`, a CQ's or QP's asynchronous event to its
//! `event_handler`, a port's to `ib_dispatch_event()`. (The core itself
//! tells every verbs context `IB_EVENT_DEVICE_FATAL` when unregistration
//! disassociates it.)
//!
//! The provider learns of them by number (a CQN, a QPN, a port), from its
//! event queue; [`Events`] finds the object. CQs and QPs are entered when
//! the core's create op made them and taken out by the destroy op before
//! they are freed, under the same lock the delivery holds: an event never
//! reaches an object that is gone. Delivery runs in process context (the
//! provider's work item, not its interrupt handler): `ib_dispatch_event()`
//! may sleep.

use core::ptr::NonNull;
use kernel::{bindings, new_mutex, prelude::*, sync::Mutex};

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

/// What events can reach: the device while registered, and its live CQs
/// and QPs by number.
///
/// # Invariants
///
/// `device` is a registered ib_device while it is `Some`; each entry of
/// `cqs` and `qps` is a live object of it (entered by its create op once it
/// is made, removed by its destroy op before it is freed).
struct Targets {
    device: Option<NonNull<bindings::ib_device>>,
    cqs: KVec<(u32, NonNull<bindings::ib_cq>)>,
    qps: KVec<(u32, NonNull<bindings::ib_qp>)>,
}

/// The event targets of one ib_device ([`super::Registration::events`]).
#[pin_data]
pub(crate) struct Events {
    #[pin]
    targets: Mutex<Targets>,
}

// SAFETY: The pointers are only followed under the mutex, while the objects
// are live (`Targets`' invariant).
unsafe impl Send for Events {}
// SAFETY: As above.
unsafe impl Sync for Events {}

impl Events {
    pub(super) fn new() -> impl PinInit<Self> {
        pin_init!(Events {
            targets <- new_mutex!(Targets {
                device: None,
                cqs: KVec::new(),
                qps: KVec::new(),
            }),
        })
    }

    /// The device is registered: port events reach it.
    pub(super) fn attach(&self, ib: *mut bindings::ib_device) {
        self.targets.lock().device = NonNull::new(ib);
    }

    /// The device is being unregistered: no event reaches it any more.
    pub(super) fn detach(&self) {
        self.targets.lock().device = None;
    }

    /// Enters CQ `cqn`, which its create op has made.
    ///
    /// # Safety
    ///
    /// `cq` is a live CQ of the device, removed with [`Events::remove_cq`]
    /// before it is freed.
    pub(super) unsafe fn add_cq(&self, cqn: u32, cq: *mut bindings::ib_cq) -> Result {
        let cq = NonNull::new(cq).ok_or(EINVAL)?;
        // INVARIANT: By the function's contract.
        Ok(self.targets.lock().cqs.push((cqn, cq), GFP_KERNEL)?)
    }

    /// Takes a CQ out before its destroy op frees it.
    pub(super) fn remove_cq(&self, cq: *mut bindings::ib_cq) {
        let mut t = self.targets.lock();
        if let Some(i) = t.cqs.iter().position(|(_, c)| c.as_ptr() == cq) {
            // Order does not matter; the entry is gone either way.
            let _ = t.cqs.remove(i);
        }
    }

    /// Enters QP `qpn`, which its create op has made.
    ///
    /// # Safety
    ///
    /// As [`Events::add_cq`], for a QP.
    pub(super) unsafe fn add_qp(&self, qpn: u32, qp: *mut bindings::ib_qp) -> Result {
        let qp = NonNull::new(qp).ok_or(EINVAL)?;
        // INVARIANT: By the function's contract.
        Ok(self.targets.lock().qps.push((qpn, qp), GFP_KERNEL)?)
    }

    pub(super) fn remove_qp(&self, qp: *mut bindings::ib_qp) {
        let mut t = self.targets.lock();
        if let Some(i) = t.qps.iter().position(|(_, q)| q.as_ptr() == qp) {
            let _ = t.qps.remove(i);
        }
    }

    /// A completion event of CQ `cqn`: its completion handler runs (for a
    /// user CQ `ib_uverbs_comp_handler()`, which queues the event to the
    /// channel user space waits on). Returns whether the CQ exists.
    pub(crate) fn completion(&self, cqn: u32) -> bool {
        let t = self.targets.lock();
        let Some(&(_, cq)) = t.cqs.iter().find(|(n, _)| *n == cqn) else {
            return false;
        };
        let cq = cq.as_ptr();
        // SAFETY: Live while entered, and the lock is held (invariant); the
        // core sets the handler and its context when it creates the CQ and
        // never changes them; the handler may run in process context.
        unsafe {
            if let Some(handler) = (*cq).comp_handler {
                handler(cq, (*cq).cq_context);
            }
        }
        true
    }

    /// A CQ error (overrun, access error) of CQ `cqn`.
    pub(crate) fn cq_error(&self, cqn: u32) -> bool {
        let t = self.targets.lock();
        let Some(&(_, cq)) = t.cqs.iter().find(|(n, _)| *n == cqn) else {
            return false;
        };
        let core = cq.as_ptr();
        let mut event = bindings::ib_event {
            device: t.device.map_or(core::ptr::null_mut(), NonNull::as_ptr),
            element: bindings::ib_event__bindgen_ty_1 { cq: core },
            event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
        };
        // SAFETY: As for the completion handler.
        unsafe {
            if let Some(handler) = (*core).event_handler {
                handler(&mut event, (*core).cq_context);
            }
        }
        true
    }

    /// An asynchronous event of QP `qpn`.
    pub(crate) fn qp_event(&self, qpn: u32, kind: QpEvent) -> bool {
        let t = self.targets.lock();
        let Some(&(_, qp)) = t.qps.iter().find(|(n, _)| *n == qpn) else {
            return false;
        };
        let core = qp.as_ptr();
        let mut event = bindings::ib_event {
            device: t.device.map_or(core::ptr::null_mut(), NonNull::as_ptr),
            element: bindings::ib_event__bindgen_ty_1 { qp: core },
            event: kind.raw(),
        };
        // SAFETY: As for a CQ's event handler.
        unsafe {
            if let Some(handler) = (*core).event_handler {
                handler(&mut event, (*core).qp_context);
            }
        }
        true
    }

    /// An event of port `port` (from 1), to every registered handler.
    pub(crate) fn port_event(&self, port: u32, kind: PortEvent) {
        let t = self.targets.lock();
        let Some(device) = t.device else {
            return;
        };
        let event = bindings::ib_event {
            device: device.as_ptr(),
            element: bindings::ib_event__bindgen_ty_1 { port_num: port },
            event: kind.raw(),
        };
        // SAFETY: The device is registered while attached (invariant), and
        // this runs in process context, where `ib_dispatch_event()` may
        // sleep.
        unsafe { bindings::ib_dispatch_event(&event) };
    }
}
