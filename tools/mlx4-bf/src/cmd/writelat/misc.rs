// SPDX-License-Identifier: GPL-2.0

//! The ping-pong on the misc device: posts by ioctl (POST_SEND, BlueFlame
//! required) or from user space (`MLX4_BF_QP_F_USER_SEND`, `userqp.rs`).

use std::{path::Path, sync::atomic::AtomicU32};

use anyhow::{anyhow, Result};
use mlx4_bf_core::{abi, wqe};

use crate::{
    back_pressure::post_timed,
    device::{open, Device},
    errors::ioerr,
    mr::Mr,
    rdma_write::{build_rdma_write, max_wqe},
    userqp::{UserPath, UserQp},
};

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

/// One side: its context's poster, the region the peer writes into, and
/// the peer's (address, rkey) once connected.
struct Side {
    poster: Poster,
    mr: Mr,
    max_wqe: usize,
    peer: (u64, u32),
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
            peer: (0, 0),
        })
    }
}

impl super::Side for Side {
    fn landed(&self, size: usize) -> &AtomicU32 {
        // SAFETY: `size - 4` is 4-aligned (sizes are multiples of 4) and
        // inside the region (it was registered for the largest size); the
        // adapter writes the word, so it is read atomically.
        unsafe { AtomicU32::from_ptr((self.mr.addr() as usize + size - 4) as *mut u32) }
    }

    fn send(&mut self, size: usize, want: u32) -> Result<()> {
        let mut payload = vec![0x5a_u8; size];
        payload[size - 4..].copy_from_slice(&want.to_ne_bytes());
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        let src = (self.mr.addr(), self.mr.lkey());
        let (len, _) = build_rdma_write(
            &mut buf,
            wqe::OPCODE_RDMA_WRITE,
            &payload,
            src,
            self.peer,
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
    a.peer = (b.mr.addr(), b.mr.rkey());
    b.peer = (a.mr.addr(), a.mr.rkey());
    let medians = super::run_pair(
        || super::initiate(&mut a, sizes, iters, warmup),
        || super::respond(&mut b, sizes, iters + warmup),
    )?;
    a.poster.finish()?;
    b.poster.finish()?;
    Ok(medians)
}
