// SPDX-License-Identifier: GPL-2.0

//! perftest `ib_write_lat` between two contexts, one thread each: side A
//! RDMA-writes `size` bytes into B's registered region, B spins on the
//! region's last four bytes until they carry the iteration's number and
//! writes back, A spins likewise; half the round trip is the latency. Run
//! once with posts by ioctl and once posted from user space
//! (`MLX4_BF_QP_F_USER_SEND`, `userqp.rs`): `mlx4-bf userpost --pingpong`.

use std::{
    path::Path,
    sync::atomic::{fence, AtomicU32, Ordering},
    thread,
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Result};
use mlx4_bf_core::{abi, wqe};

use crate::{
    back_pressure::post_timed,
    device::{open, Device},
    errors::ioerr,
    mr::Mr,
    rdma_write::{build_rdma_write, max_wqe},
    userqp::{UserPath, UserQp},
};

/// How long a side waits for the peer's write before giving up.
const LANDING_TIMEOUT: Duration = Duration::from_secs(5);

/// How one side posts.
enum Poster {
    Ioctl(Device, abi::QpInfo),
    User(Device, Box<UserQp>),
}

impl Poster {
    fn qpn(&self) -> u32 {
        match self {
            Poster::Ioctl(_, qp) => qp.qpn,
            Poster::User(_, qp) => qp.qp.qpn,
        }
    }

    fn post(&mut self, wqe: &[u8]) -> Result<()> {
        match self {
            Poster::Ioctl(dev, qp) => {
                post_timed(dev, qp, wqe, abi::POST_F_REQUIRE_BF).map_err(ioerr("POST_SEND"))
            }
            Poster::User(_, qp) => qp.post_waiting(wqe, UserPath::BlueFlame),
        }
    }

    fn finish(&mut self) -> Result<()> {
        if let Poster::User(_, qp) = self {
            while qp.outstanding() != 0 {
                qp.reap()?;
            }
        }
        Ok(())
    }
}

/// One side: its context's poster and the region the peer writes into.
struct Side {
    poster: Poster,
    mr: Mr,
    max_wqe: usize,
}

/// The number iteration `i` of a `size`-byte round carries.
fn tag(size: usize, i: u32) -> u32 {
    ((size as u32) << 20) ^ (i + 1)
}

impl Side {
    fn new(path: &Path, info: &abi::DeviceInfo, user: bool, max_size: usize) -> Result<Self> {
        let dev = open(path)?;
        let mr = Mr::register(&dev, info, max_size, abi::ACCESS_ALL)?;
        let poster = if user {
            let qp = Box::new(UserQp::create(&dev)?);
            Poster::User(dev, qp)
        } else {
            let qp = dev.create_qp().map_err(ioerr("CREATE_QP"))?;
            Poster::Ioctl(dev, qp)
        };
        Ok(Side {
            poster,
            mr,
            max_wqe: max_wqe(info),
        })
    }

    /// The last four bytes of a `size`-byte message in this side's region.
    fn landed(&self, size: usize) -> &AtomicU32 {
        // SAFETY: `size - 4` is 4-aligned (sizes are multiples of 4) and
        // inside the region (it was registered for the largest size); the
        // adapter writes the word, so it is read atomically.
        unsafe { AtomicU32::from_ptr((self.mr.addr() as usize + size - 4) as *mut u32) }
    }

    fn wait(&self, size: usize, want: u32) -> Result<()> {
        let word = self.landed(size);
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

    /// Writes `size` bytes ending in `want` into the peer's region.
    fn send(&mut self, peer: (u64, u32), size: usize, want: u32) -> Result<()> {
        let mut payload = vec![0x5a_u8; size];
        payload[size - 4..].copy_from_slice(&want.to_ne_bytes());
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        let src = (self.mr.addr(), self.mr.lkey());
        let (len, _) = build_rdma_write(
            &mut buf,
            wqe::OPCODE_RDMA_WRITE,
            &payload,
            src,
            peer,
            false,
            self.max_wqe,
        )
        .ok_or_else(|| anyhow!("a {size}-byte write does not fit a WQE"))?;
        self.poster.post(&buf[..len])
    }
}

/// Median one-way latency in microseconds (half the round trip) of `iters`
/// rounds of `size` bytes between two new contexts posting by ioctl or from
/// user space; `warmup` rounds first.
pub fn one_way_us(
    path: &Path,
    info: &abi::DeviceInfo,
    user: bool,
    sizes: &[usize],
    iters: u32,
    warmup: u32,
) -> Result<Vec<f64>> {
    let max = sizes.iter().copied().max().unwrap_or(4);
    let mut a = Side::new(path, info, user, max)?;
    let mut b = Side::new(path, info, user, max)?;
    let connect = |s: &Side, remote: u32| -> Result<()> {
        match &s.poster {
            Poster::Ioctl(dev, qp) => dev.connect_qp(qp, remote),
            Poster::User(dev, qp) => dev.connect_qp(&qp.qp, remote),
        }
        .map_err(ioerr("CONNECT_QP"))
    };
    connect(&a, b.poster.qpn())?;
    connect(&b, a.poster.qpn())?;
    let (a_region, b_region) = ((a.mr.addr(), a.mr.rkey()), (b.mr.addr(), b.mr.rkey()));
    let mut medians = Vec::new();
    for &size in sizes {
        if size < 4 || size % 4 != 0 {
            bail!("ping-pong sizes must be multiples of 4, not {size}");
        }
        let rounds = iters + warmup;
        let mut rtt = thread::scope(|s| -> Result<Vec<f64>> {
            let responder = s.spawn(|| -> Result<()> {
                for i in 0..rounds {
                    b.wait(size, tag(size, i))?;
                    b.send(a_region, size, tag(size, i))?;
                }
                Ok(())
            });
            let mut rtt = Vec::with_capacity(iters as usize);
            let mut run = || -> Result<()> {
                for i in 0..rounds {
                    let t = Instant::now();
                    a.send(b_region, size, tag(size, i))?;
                    a.wait(size, tag(size, i))?;
                    if i >= warmup {
                        rtt.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                }
                Ok(())
            };
            let mine = run();
            let theirs = responder
                .join()
                .map_err(|_| anyhow!("the responder thread panicked"))?;
            mine.and(theirs)?;
            Ok(rtt)
        })?;
        rtt.sort_by(f64::total_cmp);
        medians.push(rtt[rtt.len() / 2] / 2.0);
    }
    a.poster.finish()?;
    b.poster.finish()?;
    Ok(medians)
}
