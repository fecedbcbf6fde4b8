// SPDX-License-Identifier: GPL-2.0

//! The control channel between the endpoints, a socket pair: the QPNs, the
//! registered regions and the jobs go over it, and a closed end means the
//! peer ended (every wait watches it).

use std::{
    io::{self, Read, Write},
    os::{fd::AsRawFd, unix::net::UnixStream},
    time::Duration,
};

use anyhow::{anyhow, bail, Error, Result};

/// The peer ended (its socket closed): the other side's error is the one
/// to report.
#[derive(Debug)]
pub(super) struct PeerGone;

impl std::fmt::Display for PeerGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the peer endpoint ended")
    }
}

impl std::error::Error for PeerGone {}

/// The control channel between the endpoints.
pub(super) struct Link {
    pub(super) sock: UnixStream,
}

enum PeerState {
    Alive,
    Gone,
    /// It sent something while this side waits for a receive: a message
    /// was lost.
    Ahead,
}

impl Link {
    pub(super) fn new(sock: UnixStream, timeout: Duration) -> Result<Self> {
        sock.set_read_timeout(Some(timeout + Duration::from_secs(5)))?;
        Ok(Link { sock })
    }

    pub(super) fn send(&mut self, msg: &[u8]) -> Result<()> {
        self.sock.write_all(msg).map_err(|_| Error::new(PeerGone))
    }

    pub(super) fn recv(&mut self, buf: &mut [u8]) -> Result<()> {
        match self.sock.read_exact(buf) {
            Ok(()) => Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(anyhow!("the peer endpoint did not answer in time"))
            }
            Err(_) => Err(Error::new(PeerGone)),
        }
    }

    pub(super) fn exchange_u32(&mut self, v: u32) -> Result<u32> {
        self.send(&v.to_le_bytes())?;
        let mut b = [0u8; 4];
        self.recv(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Tells the peer where its RDMA writes go, and learns where this
    /// side's go.
    pub(super) fn exchange_remote(&mut self, mine: &Remote) -> Result<Remote> {
        self.send(&mine.encode())?;
        let mut b = [0u8; Remote::LEN];
        self.recv(&mut b)?;
        Ok(Remote::decode(&b))
    }

    /// Without blocking: has the peer closed its end, or sent something?
    fn peer(&self) -> PeerState {
        let mut b = 0u8;
        // SAFETY: a one-byte peek into a local.
        let n = unsafe {
            libc::recv(
                self.sock.as_raw_fd(),
                (&mut b as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        match n {
            0 => PeerState::Gone,
            n if n > 0 => PeerState::Ahead,
            _ if io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock => PeerState::Alive,
            _ => PeerState::Gone,
        }
    }

    pub(super) fn check_peer(&self) -> Result<()> {
        match self.peer() {
            PeerState::Alive => Ok(()),
            PeerState::Gone => Err(Error::new(PeerGone)),
            PeerState::Ahead => bail!(
                "the peer finished while this side still waits for a receive: a message was lost"
            ),
        }
    }
}

/// A registered region as the peer names it in its RDMA writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Remote {
    pub(super) addr: u64,
    pub(super) rkey: u32,
    pub(super) len: u64,
}

impl Remote {
    const LEN: usize = 20;

    fn encode(&self) -> [u8; Remote::LEN] {
        let mut b = [0u8; Remote::LEN];
        b[0..8].copy_from_slice(&self.addr.to_le_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_le_bytes());
        b[12..20].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    fn decode(b: &[u8; Remote::LEN]) -> Self {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[0..8]);
        let mut l = [0u8; 8];
        l.copy_from_slice(&b[12..20]);
        Remote {
            addr: u64::from_le_bytes(a),
            rkey: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            len: u64::from_le_bytes(l),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_region_survives_the_wire() {
        let r = Remote {
            addr: 0x7f12_3456_7000,
            rkey: 0x0000_052a,
            len: 65536,
        };
        assert_eq!(Remote::decode(&r.encode()), r);
    }
}
