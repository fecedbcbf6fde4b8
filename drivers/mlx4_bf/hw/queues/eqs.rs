// SPDX-License-Identifier: GPL-2.0

//! The driver's EQs together, as mlx4_core lays them out: the async EQ
//! (index 0, MSI-X vector 0) and a completion EQ per further vector, their
//! numbers from the first the firmware does not reserve. [`Eqs::start`]
//! makes as many as the device got vectors; a CQ names its completion
//! vector's EQ ([`Eqs::comp_eqn`], the rule in `comp_vector.rs`).

use kernel::{
    io::Mmio,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

use crate::{
    comp_vector,
    geometry::EQ_RING_BYTES,
    hw::cmd::{CmdIf, CmdState},
    hw::memory::mtt::{Pool, QueueMtt},
    hw::queues::eq::{self, Eq},
};

pub(crate) struct Eqs {
    /// By `Eq::index`: as many as the profile and the CPUs allow.
    all: KVec<Eq>,
    /// How many of them `start` created, the first ones.
    up: Atomic<u32>,
}

impl Eqs {
    /// `count` EQs (at least one), numbered from `first_eqn`; none in the
    /// device yet.
    pub(crate) fn new(first_eqn: u32, count: usize) -> Result<Self> {
        let mut all = KVec::with_capacity(count.max(1), GFP_KERNEL)?;
        for index in 0..count.max(1) {
            all.push(Eq::new(first_eqn + index as u32, index), GFP_KERNEL)?;
        }
        Ok(Eqs {
            all,
            up: Atomic::new(0),
        })
    }

    /// The EQs the driver may make: the MSI-X vectors it asks for.
    pub(crate) fn wanted(&self) -> usize {
        self.all.len()
    }

    /// EQ `index`, in the device or not.
    pub(crate) fn get(&self, index: usize) -> Option<&Eq> {
        self.all.get(index)
    }

    /// SW2HW_EQ of an EQ per vector of the first `vectors` (at least the
    /// async EQ, at most [`Eqs::wanted`]), its ring at its slice of
    /// `Pool::Eq`, MAP_EQ of the async one, each armed through `uar`.
    pub(crate) fn start(&self, cmd: &CmdIf, mtt: &QueueMtt, uar: &Mmio, vectors: usize) -> Result {
        for eq in &self.all[..vectors.clamp(1, self.all.len())] {
            let ring = mtt.addr(Pool::Eq, eq.index * EQ_RING_BYTES)?;
            eq.create(cmd, &mut cmd.lock(), ring)?;
            // Counted once in the device: CQs may name it from now on.
            self.up.store(eq.index as u32 + 1, Relaxed);
            eq.arm(uar)?;
        }
        Ok(())
    }

    /// The EQs `start` created.
    pub(crate) fn up(&self) -> &[Eq] {
        let up = self.up.load(Relaxed) as usize;
        &self.all[..up.min(self.all.len())]
    }

    /// Completion vectors: the completion EQs, or the async EQ alone when
    /// the device got one MSI-X vector (mlx4_core's `num_comp_vectors`).
    pub(crate) fn comp_vectors(&self) -> u32 {
        comp_vector::vectors(self.up().len())
    }

    /// The EQ number of completion vector `vector` (`comp_vector::eq_of`).
    pub(crate) fn comp_eqn(&self, vector: u32) -> u32 {
        let up = self.up();
        let index = comp_vector::eq_of(up.len(), vector);
        up.get(index).or(self.all.first()).map_or(0, |eq| eq.eqn)
    }

    /// UAR pages below this are the kernel's: an EQ's doorbell is in page
    /// `eqn / 4` (`mlx4_get_eq_uar()`), and the pages below the first hold
    /// the firmware's reserved EQs.
    pub(crate) fn kernel_uars(&self) -> u32 {
        self.all.last().map_or(0, |eq| eq::doorbell_page(eq.eqn)) + 1
    }

    /// Stops every handler from ringing a doorbell; call, then wait for the
    /// interrupt handlers, then [`Eqs::destroy`].
    pub(crate) fn quiesce(&self) {
        for eq in &self.all {
            eq.quiesce();
        }
    }

    /// Every EQ out of the device (`Eq::destroy`).
    pub(crate) fn destroy(&self, cmd: &CmdIf, st: &mut CmdState) {
        for eq in &self.all {
            eq.destroy(cmd, st);
        }
    }
}
