// SPDX-License-Identifier: GPL-2.0

//! The counters: posts, kept per poster (a verbs context, a kernel
//! context) so no post writes a line that other CPUs' posts write too, the
//! device's being their sum ([`DeviceStats`]); and the queues' events and
//! completions ([`QueueStats`]). A poster whose posts are serialized by a
//! lock of its own counts under it ([`Counts`]); others count without one
//! ([`AtomicCounts`]).

use kernel::{
    fmt, new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
};

use crate::reject::{self, Reject, REJECT_MAX};

pub(crate) struct AtomicCounts {
    bf_posts: Atomic<u64>,
    db_posts: Atomic<u64>,
    bytes: Atomic<u64>,
    store_blocks: Atomic<u64>,
    rejects: [Atomic<u64>; REJECT_MAX],
}

impl AtomicCounts {
    pub(crate) fn new() -> Self {
        AtomicCounts {
            bf_posts: Atomic::new(0),
            db_posts: Atomic::new(0),
            bytes: Atomic::new(0),
            store_blocks: Atomic::new(0),
            rejects: [const { Atomic::new(0) }; REJECT_MAX],
        }
    }

    pub(crate) fn blueflame(&self, bytes: usize, store_blocks: u32) {
        self.bf_posts.add(1u64, Relaxed);
        self.bytes.add(bytes as u64, Relaxed);
        self.store_blocks.add(u64::from(store_blocks), Relaxed);
    }

    pub(crate) fn doorbell(&self, bytes: usize) {
        self.db_posts.add(1u64, Relaxed);
        self.bytes.add(bytes as u64, Relaxed);
    }

    pub(crate) fn reject(&self, why: Reject) {
        self.rejects[why as usize].add(1u64, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> reject::PostCounts {
        reject::PostCounts {
            bf_posts: self.bf_posts.load(Relaxed),
            db_posts: self.db_posts.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            store_blocks: self.store_blocks.load(Relaxed),
            rejects: core::array::from_fn(|i| self.rejects[i].load(Relaxed)),
        }
    }

    /// Adds the counts of `s` to these.
    fn absorb(&self, s: &reject::PostCounts) {
        self.bf_posts.add(s.bf_posts, Relaxed);
        self.db_posts.add(s.db_posts, Relaxed);
        self.bytes.add(s.bytes, Relaxed);
        self.store_blocks.add(s.store_blocks, Relaxed);
        for (r, n) in self.rejects.iter().zip(s.rejects) {
            r.add(n, Relaxed);
        }
    }
}

impl Counted for AtomicCounts {
    fn counts(&self) -> reject::PostCounts {
        self.snapshot()
    }
}

/// Post counters of a poster whose posts hold one lock from start to end:
/// plain integers, written under that lock (no atomic read-modify-write on
/// the post's path).
#[derive(Default)]
pub(crate) struct Counts(reject::PostCounts);

impl Counts {
    #[inline(always)]
    pub(crate) fn blueflame(&mut self, bytes: usize, store_blocks: u32) {
        self.0.bf_posts += 1;
        self.0.bytes += bytes as u64;
        self.0.store_blocks += u64::from(store_blocks);
    }

    #[inline(always)]
    pub(crate) fn doorbell(&mut self, bytes: usize) {
        self.0.db_posts += 1;
        self.0.bytes += bytes as u64;
    }

    #[inline]
    pub(crate) fn reject(&mut self, why: Reject) {
        self.0.rejects[why as usize] += 1;
    }

    pub(crate) fn snapshot(&self) -> reject::PostCounts {
        self.0
    }
}

/// A poster's post counters as the device's sum reads them.
pub(crate) trait Counted: Send + Sync {
    fn counts(&self) -> reject::PostCounts;
}

fn add(total: &mut reject::PostCounts, s: &reject::PostCounts) {
    total.bf_posts += s.bf_posts;
    total.db_posts += s.db_posts;
    total.bytes += s.bytes;
    total.store_blocks += s.store_blocks;
    for (t, n) in total.rejects.iter_mut().zip(s.rejects) {
        *t += n;
    }
}

/// What an EQE reported, as the counters tell them apart.
pub(crate) enum EqeKind {
    Command,
    Completion,
    Async,
}

/// The device's post counters: those of its closed posters plus the
/// open ones'.
#[pin_data]
pub(crate) struct DeviceStats {
    closed: AtomicCounts,
    #[pin]
    open: Mutex<KVec<Arc<dyn Counted>>>,
}

impl DeviceStats {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(DeviceStats {
            closed: AtomicCounts::new(),
            open <- new_mutex!(KVec::new()),
        })
    }

    /// Counts a new poster's counters in.
    pub(crate) fn attach(&self, s: Arc<dyn Counted>) -> Result {
        self.open.lock().push(s, GFP_KERNEL)?;
        Ok(())
    }

    /// A poster closes: its counts stay in the device's. `s` is the one
    /// attached, found by its address.
    pub(crate) fn detach(&self, s: &dyn Counted) {
        let mut open = self.open.lock();
        if let Some(i) = open
            .iter()
            .position(|o| core::ptr::addr_eq(Arc::as_ptr(o), s))
        {
            let gone = open.remove(i);
            if let Ok(gone) = gone {
                self.closed.absorb(&gone.counts());
            }
        }
    }

    pub(crate) fn snapshot(&self) -> reject::PostCounts {
        let mut total = self.closed.snapshot();
        for s in self.open.lock().iter() {
            add(&mut total, &s.counts());
        }
        total
    }
}

/// The post counters' names, in the order of [`values`]: debugfs's lines
/// and the RDMA device's `hw_counters/` files.
pub(crate) const NAMES: [&CStr; 4 + REJECT_MAX] = [
    c"bf_posts",
    c"db_posts",
    c"bytes",
    c"store_blocks",
    c"rejects_length",
    c"rejects_size_field",
    c"rejects_opcode",
    c"rejects_ctrl",
    c"rejects_inline",
    c"rejects_gather",
    c"rejects_fault",
    c"rejects_qp",
    c"rejects_lkey",
    c"rejects_range",
    c"rejects_rkey",
    c"rejects_address",
];

/// The counts of `s` in the order of [`NAMES`].
pub(crate) fn values(s: &reject::PostCounts) -> [u64; NAMES.len()] {
    let [length, size_field, opcode, ctrl, inline, gather, fault, qp, lkey, range, rkey, address] =
        s.rejects;
    [
        s.bf_posts,
        s.db_posts,
        s.bytes,
        s.store_blocks,
        length,
        size_field,
        opcode,
        ctrl,
        inline,
        gather,
        fault,
        qp,
        lkey,
        range,
        rkey,
        address,
    ]
}

/// The counters as debugfs shows them, one `name value` per line.
pub(crate) fn show(s: &reject::PostCounts, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for (name, count) in NAMES.iter().zip(values(s)) {
        // ASCII, as written above.
        writeln!(f, "{} {count}", name.to_str().unwrap_or("?"))?;
    }
    Ok(())
}

/// Counters of the adapter's queues: events, interrupts, completions and the
/// send-queue flow control. Shown in the device's debugfs file.
pub(crate) struct QueueStats {
    interrupts: Atomic<u64>,
    eqes: Atomic<u64>,
    eqes_cmd: Atomic<u64>,
    eqes_comp: Atomic<u64>,
    eqes_async: Atomic<u64>,
    cqes: Atomic<u64>,
    cqe_errors: Atomic<u64>,
    sq_full_waits: Atomic<u64>,
    sq_full_fails: Atomic<u64>,
    receives_posted: Atomic<u64>,
}

impl QueueStats {
    pub(crate) fn new() -> Self {
        QueueStats {
            interrupts: Atomic::new(0),
            eqes: Atomic::new(0),
            eqes_cmd: Atomic::new(0),
            eqes_comp: Atomic::new(0),
            eqes_async: Atomic::new(0),
            cqes: Atomic::new(0),
            cqe_errors: Atomic::new(0),
            sq_full_waits: Atomic::new(0),
            sq_full_fails: Atomic::new(0),
            receives_posted: Atomic::new(0),
        }
    }

    pub(crate) fn interrupt(&self) {
        self.interrupts.add(1u64, Relaxed);
    }

    /// One EQE consumed, of the kind `eq.rs` decoded.
    pub(crate) fn eqe(&self, kind: EqeKind) {
        self.eqes.add(1u64, Relaxed);
        match kind {
            EqeKind::Command => self.eqes_cmd.add(1u64, Relaxed),
            EqeKind::Completion => self.eqes_comp.add(1u64, Relaxed),
            EqeKind::Async => self.eqes_async.add(1u64, Relaxed),
        }
    }

    pub(crate) fn cmd_events(&self) -> u64 {
        self.eqes_cmd.load(Relaxed)
    }

    /// `n` CQEs reaped, `errors` of them error CQEs: one atomic per reap,
    /// not per CQE, on these device-wide counters.
    pub(crate) fn cqes(&self, n: u32, errors: u32) {
        self.cqes.add(u64::from(n), Relaxed);
        if errors != 0 {
            self.cqe_errors.add(u64::from(errors), Relaxed);
        }
    }

    /// A post found its send queue full and waited; `failed` if in vain.
    pub(crate) fn sq_full(&self, failed: bool) {
        self.sq_full_waits.add(1u64, Relaxed);
        if failed {
            self.sq_full_fails.add(1u64, Relaxed);
        }
    }

    /// `n` receive WQEs handed to the device.
    pub(crate) fn receives(&self, n: u32) {
        self.receives_posted.add(u64::from(n), Relaxed);
    }

    pub(crate) fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "interrupts {}", self.interrupts.load(Relaxed))?;
        writeln!(f, "eqes {}", self.eqes.load(Relaxed))?;
        writeln!(f, "eqes_cmd {}", self.eqes_cmd.load(Relaxed))?;
        writeln!(f, "eqes_comp {}", self.eqes_comp.load(Relaxed))?;
        writeln!(f, "eqes_async {}", self.eqes_async.load(Relaxed))?;
        writeln!(f, "cqes {}", self.cqes.load(Relaxed))?;
        writeln!(f, "cqe_errors {}", self.cqe_errors.load(Relaxed))?;
        writeln!(f, "sq_full_waits {}", self.sq_full_waits.load(Relaxed))?;
        writeln!(f, "sq_full_fails {}", self.sq_full_fails.load(Relaxed))?;
        writeln!(f, "receives_posted {}", self.receives_posted.load(Relaxed))
    }
}
