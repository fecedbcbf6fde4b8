// SPDX-License-Identifier: GPL-2.0

//! perftest `ib_write_lat` between two contexts, one thread each: side A
//! RDMA-writes `size` bytes into B's registered region, B spins on the
//! region's last four bytes until they carry the iteration's number and
//! writes back, A spins likewise; half the round trip is the latency.
//! `mlx4-bf userpost --pingpong` runs it once with posts through the kernel
//! (QP_POST) and once posted from user space (libmlx4's own BlueFlame
//! stores), each side a verbs context ([`verbs`]). This is the loop.

use std::{
    sync::atomic::{fence, AtomicU32, Ordering},
    thread,
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Result};

mod verbs;

pub use verbs::one_way_us;

/// How long a side waits for the peer's write before giving up.
const LANDING_TIMEOUT: Duration = Duration::from_secs(5);

/// One side of the ping-pong, connected to its peer.
pub(super) trait Side {
    /// Writes `size` bytes ending in `tag` into the peer's region.
    fn send(&mut self, size: usize, tag: u32) -> Result<()>;

    /// The last four bytes of a `size`-byte message in this side's region,
    /// where the peer's write lands.
    fn landed(&self, size: usize) -> &AtomicU32;

    /// After a round, off the clock: what the post left to collect.
    fn settle(&mut self) -> Result<()>;
}

/// The number iteration `i` of a `size`-byte round carries.
fn tag(size: usize, i: u32) -> u32 {
    ((size as u32) << 20) ^ (i + 1)
}

fn wait(side: &impl Side, size: usize, want: u32) -> Result<()> {
    let word = side.landed(size);
    let end = Instant::now() + LANDING_TIMEOUT;
    while word.load(Ordering::Relaxed) != want {
        if Instant::now() > end {
            bail!("a {size}-byte write never landed (waited {LANDING_TIMEOUT:?})");
        }
        std::hint::spin_loop();
    }
    fence(Ordering::Acquire);
    Ok(())
}

/// Sizes a ping-pong carries: its tag ends the message, 4-aligned.
fn check_size(size: usize) -> Result<()> {
    if size < 4 || !size.is_multiple_of(4) {
        bail!("ping-pong sizes must be multiples of 4, not {size}");
    }
    Ok(())
}

/// Side A: `warmup + iters` rounds per size, timed; the median one-way
/// latency per size in microseconds (half the round trip).
fn initiate(a: &mut impl Side, sizes: &[usize], iters: u32, warmup: u32) -> Result<Vec<f64>> {
    let mut medians = Vec::with_capacity(sizes.len());
    for &size in sizes {
        check_size(size)?;
        let mut rtt = Vec::with_capacity(iters as usize);
        for i in 0..iters + warmup {
            let t = Instant::now();
            a.send(size, tag(size, i))?;
            wait(a, size, tag(size, i))?;
            if i >= warmup {
                rtt.push(t.elapsed().as_secs_f64() * 1e6);
            }
            a.settle()?;
        }
        rtt.sort_by(f64::total_cmp);
        medians.push(rtt[rtt.len() / 2] / 2.0);
    }
    Ok(medians)
}

/// Side B: answers each of A's rounds.
fn respond(b: &mut impl Side, sizes: &[usize], rounds: u32) -> Result<()> {
    for &size in sizes {
        check_size(size)?;
        for i in 0..rounds {
            wait(b, size, tag(size, i))?;
            b.send(size, tag(size, i))?;
            b.settle()?;
        }
    }
    Ok(())
}

/// Side A's run here (`initiator`, timed) and side B's (`responder`) in a
/// thread of its own: A's medians, or A's error before B's (B failing
/// after A is mostly A's doing: a write that never came).
fn run_pair(
    initiator: impl FnOnce() -> Result<Vec<f64>>,
    responder: impl FnOnce() -> Result<()> + Send,
) -> Result<Vec<f64>> {
    thread::scope(|s| {
        let b = s.spawn(responder);
        let mine = initiator();
        let theirs = b
            .join()
            .map_err(|_| anyhow!("the responder thread panicked"))?;
        let medians = mine?;
        theirs?;
        Ok(medians)
    })
}
