// SPDX-License-Identifier: GPL-2.0

//! The RDMA provider's events: the EQ's interrupt handler records them,
//! a work item hands them to the provider's dispatcher in process context.
//!
//! mlx4_core calls a CQ's completion handler from a tasklet and defers QP
//! events to a workqueue (`mlx4_cq_completion()`, `mlx4_ib_qp_event()`);
//! here both go one way. In hard interrupt context, without a lock: a
//! completion sets its CQ slot's bit (several completions of one CQ before
//! the work runs are one call, as an armed CQ raises one event per arming);
//! an asynchronous event goes into a ring written only by the handler and
//! read only by the work (full: counted, logged). Then the work is queued
//! on the system workqueue; it runs with the dispatcher's lock held, so
//! that clearing the dispatcher, or destroying a CQ, waits for a dispatch
//! under way. At unbind, once the interrupt is quiet, [`EventRouter::stop`]
//! makes later runs dispatch nothing, waits for a running one and drops
//! the dispatcher.

use kernel::{
    bitmap::BitmapVec,
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        Arc, Mutex,
    },
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
};

use crate::eqe::{AsyncEvent, Eqe};

/// What the RDMA provider does with its events, in process context.
pub(crate) trait EventDispatch: Send + Sync {
    /// CQ `cqn`, one of the provider's, had a completion event since the
    /// last call for it (`ib_cq.comp_handler`).
    fn completion(&self, cqn: u32);
    /// An asynchronous event (`ib_dispatch_event()`, or the QP's or CQ's
    /// event handler): a QP event may name a kernel context's QP, and its QP or
    /// CQ may be gone by now; look it up and ignore what is not there.
    fn event(&self, e: AsyncEvent);
}

/// Asynchronous events the handler can hold before the work runs.
const RING: u32 = 64;

/// Where an EQE goes (`EventRouter::record`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Routed {
    /// A completion of a kernel context's CQ: the kernel ping's waiters.
    KernelContexts,
    /// Recorded for the provider: queue the work.
    Provider,
    /// Nothing to do.
    Nothing,
}

/// The events on their way from the handler to the provider.
#[pin_data]
pub(crate) struct EventRouter {
    /// The CQN of provider CQ slot 0.
    first_cqn: u32,
    /// Provider CQ slots with a completion to hand on: set by the handler,
    /// taken by the work, with atomic bit operations.
    pending: BitmapVec,
    ring: [Atomic<u64>; RING as usize],
    /// Written by the handler only, read by the work only.
    head: Atomic<u32>,
    tail: Atomic<u32>,
    /// Events the full ring had no room for.
    lost: Atomic<u32>,
    /// Cleared at unbind: runs after it dispatch nothing.
    live: Atomic<bool>,
    #[pin]
    dispatch: Mutex<Option<Arc<dyn EventDispatch>>>,
    #[pin]
    work: Work<EventRouter>,
}

impl_has_work! {
    impl HasWork<Self> for EventRouter { self.work }
}

impl WorkItem for EventRouter {
    type Pointer = Arc<EventRouter>;

    fn run(this: Arc<EventRouter>) {
        this.dispatch_pending();
    }
}

impl EventRouter {
    /// Provider CQ slot `i` (of `cqs`) is CQ number `first_cqn + i`.
    pub(crate) fn new(first_cqn: u32, cqs: usize) -> Result<Arc<Self>> {
        let pending = BitmapVec::new(cqs, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(EventRouter {
                first_cqn,
                pending,
                ring: [const { Atomic::new(0) }; RING as usize],
                head: Atomic::new(0),
                tail: Atomic::new(0),
                lost: Atomic::new(0),
                live: Atomic::new(true),
                dispatch <- new_mutex!(None),
                work <- new_work!("mlx4_bf events"),
            }),
            GFP_KERNEL,
        )
    }

    /// The provider CQ slot of CQ `cqn`, if it is one of the provider's.
    fn slot(&self, cqn: u32) -> Option<usize> {
        let slot = cqn.checked_sub(self.first_cqn)? as usize;
        (slot < self.pending.len()).then_some(slot)
    }

    /// In the interrupt handler: where `e` goes, recorded if the provider's.
    pub(crate) fn record(&self, e: Eqe) -> Routed {
        match e {
            Eqe::Completion { cqn } => match self.slot(cqn) {
                Some(slot) => {
                    // The work it queues runs after this (`kick`).
                    self.pending.set_bit_atomic(slot);
                    Routed::Provider
                }
                None => Routed::KernelContexts,
            },
            // A kernel context's CQ has no handler for its errors (counted only).
            Eqe::Async(AsyncEvent::CqError { cqn, .. }) if self.slot(cqn).is_none() => {
                Routed::Nothing
            }
            // QP and port events: the provider looks the QPN up and ignores
            // one it does not know (a kernel context's QP, or one destroyed).
            Eqe::Async(a) => {
                self.push(a);
                Routed::Provider
            }
            Eqe::Command | Eqe::Other { .. } => Routed::Nothing,
        }
    }

    /// In the interrupt handler (the ring's one writer).
    fn push(&self, a: AsyncEvent) {
        let head = self.head.load(Relaxed);
        let tail = self.tail.load(Acquire);
        if head.wrapping_sub(tail) >= RING {
            self.lost.add(1, Relaxed);
            return;
        }
        self.ring[(head % RING) as usize].store(a.pack(), Relaxed);
        self.head.store(head.wrapping_add(1), Release);
    }

    /// With the dispatcher's lock held (the ring's one reader).
    fn pop(&self) -> Option<AsyncEvent> {
        let tail = self.tail.load(Relaxed);
        if tail == self.head.load(Acquire) {
            return None;
        }
        let w = self.ring[(tail % RING) as usize].load(Relaxed);
        self.tail.store(tail.wrapping_add(1), Release);
        AsyncEvent::unpack(w)
    }

    /// In the interrupt handler, after `record` said `Provider`: queues the
    /// work (again, if it is running; once, if it is queued).
    pub(crate) fn kick(this: &Arc<Self>) {
        // An Arc that is not the last (the adapter holds one): dropping it
        // when the work is already queued frees nothing here. The
        // high-priority queue: completion events are latency (mlx4 runs
        // them in a tasklet), and `system_wq` is deprecated in 7.2.
        let _ = workqueue::system_highpri().enqueue(this.clone());
    }

    /// The work: every recorded event to the dispatcher, if there is one
    /// and the adapter is still bound; else they are dropped.
    fn dispatch_pending(&self) {
        let guard = self.dispatch.lock();
        let target = guard.as_ref().filter(|_| self.live.load(Acquire));
        let len = self.pending.len();
        let mut next = 0;
        while let Some(slot) = (next < len).then(|| self.pending.next_bit(next)).flatten() {
            // Taken before it is handed on: one the handler sets again
            // meanwhile is this run's or the next one's.
            self.pending.clear_bit_atomic(slot);
            if let Some(d) = target {
                d.completion(self.first_cqn + slot as u32);
            }
            next = slot + 1;
        }
        while let Some(a) = self.pop() {
            if let Some(d) = target {
                d.event(a);
            }
        }
        let lost = self.lost.xchg(0, Relaxed);
        if lost != 0 {
            pr_warn!("{} asynchronous events lost (ring full)\n", lost);
        }
    }

    /// Sets (or, with `None`, clears) the dispatcher; waits for a dispatch
    /// under way. The old one is dropped after the lock.
    pub(crate) fn set_dispatch(&self, d: Option<Arc<dyn EventDispatch>>) {
        let old = core::mem::replace(&mut *self.dispatch.lock(), d);
        drop(old);
    }

    /// Forgets a completion recorded for provider CQ `cqn` (destroyed) and
    /// waits for a dispatch under way, which may be handing it on.
    pub(crate) fn forget_cq(&self, cqn: u32) {
        if let Some(slot) = self.slot(cqn) {
            self.pending.clear_bit_atomic(slot);
        }
        drop(self.dispatch.lock());
    }

    /// At unbind or a failed probe, once the interrupt handler can no
    /// longer run: no dispatch any more, none running on return, and the
    /// dispatcher dropped (it may hold the adapter).
    pub(crate) fn stop(&self) {
        self.live.store(false, Release);
        crate::sys::work::flush(&self.work);
        self.set_dispatch(None);
    }
}
