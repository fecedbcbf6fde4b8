// SPDX-License-Identifier: GPL-2.0

//! `pingpong`: perftest `ib_send_lat` between two endpoints, each its own
//! context (the device opened twice) with one QP, connected to each other.
//!
//! The client posts a SEND with the payload inline and waits for the
//! server's answer of the same size; the server waits for the SEND, then
//! answers. Receives are polled in the mapped receive CQ, by spinning on
//! the owner byte (`--wait busy`) or by arming the CQ and sleeping in
//! poll(2) (`--wait event`). Timing is perftest's: the client stamps before
//! each post, and the `iters - 1` deltas are round trips (see
//! [`crate::stats::perftest_lat`]).
//!
//! With `--op rdma-write-imm` each message is an RDMA_WRITE_IMM instead:
//! each endpoint registers a receive region with REMOTE_WRITE, and the
//! peer writes its payload there (inline when the WQE allows, else
//! gathered from its own registered send region); the immediate (the
//! message's sequence number) comes back in a receive CQE, which consumes
//! one posted receive WQE but writes nothing into the receive buffer. The
//! receiver checks the immediate and the bytes that landed in its region.
//!
//! The two endpoints talk over a socket pair for everything but the
//! measurement: the QPNs, the registered regions' addresses and rkeys, and
//! before each size a job message the server acknowledges (the barrier).
//! A closed socket means the peer ended: every wait watches it, so one
//! side's error never leaves the other spinning.

use std::{
    fmt::Write as _,
    fs,
    io::{self, Read, Write},
    os::{fd::AsRawFd, unix::net::UnixStream},
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context, Error, Result};
use clap::ValueEnum;
use mlx4_bf_core::{abi, wqe};

use crate::{
    analyzer::{self, Analyzer, PerPost},
    back_pressure::is_back_pressure,
    cq::RecvQueue,
    device::{open, Device},
    errors::ioerr,
    mr::{self, Mr},
    progress::{Printer, Progress},
    rdma_write::{
        bf_cutoff_for, build_rdma_write, carry, gathered_sizes, inline_max, max_wqe, set_imm, Carry,
    },
    report::{self, writer_name},
    stats::{perftest_lat, Summary},
    sweep::Sweep,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Op {
    /// SEND into the peer's receive buffer, payload inline (ib_send_lat)
    Send,
    /// RDMA_WRITE_IMM into the peer's registered region (inline, or gathered
    /// from a registered send region), completed by a receive CQE
    RdmaWriteImm,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Send => "send",
            Op::RdmaWriteImm => "rdma-write-imm",
        }
    }

    /// The start of the output files' names.
    fn file_prefix(self) -> &'static str {
        match self {
            Op::Send => "pingpong",
            Op::RdmaWriteImm => "pingpong-rdma-write-imm",
        }
    }

    /// The message, as the plots' titles name it.
    fn title(self) -> &'static str {
        match self {
            Op::Send => "SEND",
            Op::RdmaWriteImm => "RDMA_WRITE_IMM",
        }
    }

    fn code(self) -> u32 {
        match self {
            Op::Send => 0,
            Op::RdmaWriteImm => 1,
        }
    }

    fn from_code(code: u32) -> Self {
        if code == 1 {
            Op::RdmaWriteImm
        } else {
            Op::Send
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PathMode {
    /// BlueFlame only (MLX4_BF_POST_F_REQUIRE_BF; sizes that do not fit are skipped)
    Bf,
    /// Doorbell only (MLX4_BF_POST_F_FORCE_DOORBELL)
    Db,
    /// Whatever the driver picks (no flag)
    Auto,
}

impl PathMode {
    fn flags(self) -> u32 {
        match self {
            PathMode::Bf => abi::POST_F_REQUIRE_BF,
            PathMode::Db => abi::POST_F_FORCE_DOORBELL,
            PathMode::Auto => 0,
        }
    }

    fn name(self) -> &'static str {
        match self {
            PathMode::Bf => "bf",
            PathMode::Db => "db",
            PathMode::Auto => "auto",
        }
    }

    fn from_flags(flags: u32) -> Self {
        match flags {
            abi::POST_F_REQUIRE_BF => PathMode::Bf,
            abi::POST_F_FORCE_DOORBELL => PathMode::Db,
            _ => PathMode::Auto,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WaitMode {
    /// Spin on the CQE's owner byte
    Busy,
    /// Arm the CQ (ARM_CQ), check once more, sleep in poll(2)
    Event,
}

impl WaitMode {
    fn name(self) -> &'static str {
        match self {
            WaitMode::Busy => "busy",
            WaitMode::Event => "event",
        }
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// Smallest payload in bytes.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=65536))]
    min: u32,
    /// Largest payload in bytes.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=65536))]
    max: u32,
    /// Step between payload sizes.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=65536))]
    step: u32,
    /// One payload size instead of the sweep.
    #[arg(long, conflicts_with_all = ["min", "max", "step"],
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    size: Option<u32>,
    /// Round trips per size (perftest's -n; no warm-up: the two largest are dropped).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(4..=10_000_000))]
    iters: u32,
    /// The path of every post (SEND or RDMA write).
    #[arg(long, value_enum, default_value_t = PathMode::Auto)]
    path: PathMode,
    /// How an endpoint waits for its receive.
    #[arg(long, value_enum, default_value_t = WaitMode::Busy)]
    wait: WaitMode,
    /// What each message is: a SEND (the default), or an RDMA write with
    /// immediate into the peer's registered region (its tables headed and
    /// files named with the op).
    #[arg(long, value_enum, default_value_t = Op::Send)]
    op: Op,
    /// The 2x2 matrix: BlueFlame and doorbell, each with busy and event waits.
    #[arg(long, conflicts_with_all = ["path", "wait"])]
    all: bool,
    /// Two processes (fork) instead of two threads.
    #[arg(long)]
    procs: bool,
    /// Write the tables (pingpong.txt), one data file per path and wait mode
    /// (pingpong-<path>-<wait>.dat: `# PacketSize, LatTypical, LatBest,
    /// LatWorst`) and the plots (pingpong.svg; pingpong-modelled.svg when
    /// the device model reports modelled latencies); with `--op
    /// rdma-write-imm` every name starts pingpong-rdma-write-imm instead.
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Separator of the data file columns.
    #[arg(long, default_value = ", ")]
    sep: String,
    /// Seconds an endpoint waits for one receive before it gives up.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
}

/// One size of one configuration: what both endpoints run between two
/// barriers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Job {
    size: u32,
    path: PathMode,
    wait: WaitMode,
    iters: u32,
    op: Op,
}

impl Job {
    const LEN: usize = 20;
    /// Tells the server the run is over.
    const DONE: [u8; Job::LEN] = [0; Job::LEN];

    fn encode(&self) -> [u8; Job::LEN] {
        let mut b = [0u8; Job::LEN];
        b[0..4].copy_from_slice(&self.size.to_le_bytes());
        b[4..8].copy_from_slice(&self.path.flags().to_le_bytes());
        b[8..12].copy_from_slice(&u32::from(self.wait == WaitMode::Event).to_le_bytes());
        b[12..16].copy_from_slice(&self.iters.to_le_bytes());
        b[16..20].copy_from_slice(&self.op.code().to_le_bytes());
        b
    }

    fn decode(b: &[u8; Job::LEN]) -> Option<Self> {
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        (u(0) != 0).then(|| Job {
            size: u(0),
            path: PathMode::from_flags(u(4)),
            wait: if u(8) != 0 {
                WaitMode::Event
            } else {
                WaitMode::Busy
            },
            iters: u(12),
            op: Op::from_code(u(16)),
        })
    }
}

/// The side that sends a payload; part of its pattern.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Client = 0x00,
    Server = 0xa5,
}

/// The payload of message `seq` from `side`: different for every message
/// that reuses a receive buffer (or, RDMA-written, the same place of the
/// peer's region), so a buffer the adapter did not write never passes the
/// check.
fn fill(buf: &mut [u8], side: Side, seq: u32) {
    let s = (seq as u8).wrapping_mul(31) ^ (seq >> 8) as u8 ^ (seq >> 16) as u8 ^ side as u8;
    for (j, b) in buf.iter_mut().enumerate() {
        *b = s ^ (j as u8).wrapping_mul(7) ^ (j >> 8) as u8;
    }
}

/// The immediate of RDMA_WRITE_IMM message `seq` from `side`: its
/// sequence number, with the side in the top byte.
fn imm_of(side: Side, seq: u32) -> u32 {
    seq ^ ((side as u32) << 24)
}

/// The peer ended (its socket closed): the other side's error is the one
/// to report.
#[derive(Debug)]
struct PeerGone;

impl std::fmt::Display for PeerGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the peer endpoint ended")
    }
}

impl std::error::Error for PeerGone {}

/// The control channel between the endpoints.
struct Link {
    sock: UnixStream,
}

enum PeerState {
    Alive,
    Gone,
    /// It sent something while this side waits for a receive: a message
    /// was lost.
    Ahead,
}

impl Link {
    fn new(sock: UnixStream, timeout: Duration) -> Result<Self> {
        sock.set_read_timeout(Some(timeout + Duration::from_secs(5)))?;
        Ok(Link { sock })
    }

    fn send(&mut self, msg: &[u8]) -> Result<()> {
        self.sock.write_all(msg).map_err(|_| Error::new(PeerGone))
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<()> {
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

    fn exchange_u32(&mut self, v: u32) -> Result<u32> {
        self.send(&v.to_le_bytes())?;
        let mut b = [0u8; 4];
        self.recv(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Tells the peer where its RDMA writes go, and learns where this
    /// side's go.
    fn exchange_remote(&mut self, mine: &Remote) -> Result<Remote> {
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

    fn check_peer(&self) -> Result<()> {
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
struct Remote {
    addr: u64,
    rkey: u32,
    len: u64,
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

/// What an endpoint needs for `--op rdma-write-imm`: its two registered
/// regions and the peer's receive region.
struct Rdma {
    /// Where the peer's writes land (LOCAL_WRITE|REMOTE_WRITE); every
    /// message at offset 0 (one message is in flight at a time).
    recv: Mr,
    /// Where a payload too large for an inline WQE is gathered from (local
    /// reads only).
    send: Mr,
    peer: Remote,
    max_wqe: usize,
}

/// The bytes of the registered regions for payloads of up to `max_size`
/// bytes: whole pages, at most what the driver allows one region.
fn region_len(max_size: usize, info: &abi::DeviceInfo) -> usize {
    let want = max_size.max(1).next_multiple_of(mr::PAGE);
    match info.max_mr_size {
        0 => want,
        cap => want.min((cap as usize / mr::PAGE * mr::PAGE).max(mr::PAGE)),
    }
}

impl Rdma {
    /// Registers both regions and exchanges the receive regions with the
    /// peer (which does the same, in the same order).
    fn setup(
        dev: &Device,
        info: &abi::DeviceInfo,
        link: &mut Link,
        max_size: usize,
    ) -> Result<Self> {
        let len = region_len(max_size, info);
        let recv = Mr::register(dev, info, len, abi::ACCESS_ALL)?;
        let send = Mr::register(dev, info, len, 0)?;
        let mine = Remote {
            addr: recv.addr(),
            rkey: recv.rkey(),
            len: recv.len() as u64,
        };
        let peer = link.exchange_remote(&mine)?;
        Ok(Rdma {
            recv,
            send,
            peer,
            max_wqe: max_wqe(info),
        })
    }

    fn close(self) -> Result<()> {
        let send = self.send.close();
        self.recv.close()?;
        send
    }
}

/// What both endpoints set up before the first job.
#[derive(Clone, Copy, Debug)]
struct Setup {
    op: Op,
    /// The largest payload of the run: the registered regions' size.
    max_size: usize,
}

/// One endpoint: its context, its QP's receive side, the peer's QPN.
struct Endpoint {
    dev: Device,
    rq: RecvQueue,
    peer_qpn: u32,
    /// `--op rdma-write-imm` only.
    rdma: Option<Rdma>,
    link: Link,
    timeout: Duration,
    info: abi::DeviceInfo,
    /// Spinning alone on one CPU would starve the peer: yield now and then.
    single_cpu: bool,
}

/// How often a busy wait looks at the clock, the peer and (on one CPU)
/// yields.
const SPINS_PER_CHECK: u32 = 1024;
/// How long one poll(2) sleeps before the peer and the deadline are looked at.
const POLL_SLICE_MS: i32 = 100;

impl Endpoint {
    /// Opens a context, creates and connects its QP to the peer's, maps
    /// the receive side and fills the receive queue, registers the regions
    /// of an RDMA-write run and learns the peer's; then waits for the peer
    /// to have done the same.
    fn setup(path: &Path, sock: UnixStream, timeout: Duration, setup: Setup) -> Result<Self> {
        let mut link = Link::new(sock, timeout)?;
        let dev = open(path)?;
        let info = dev.query_device().map_err(ioerr("QUERY_DEVICE"))?;
        if info.abi_version < 2 {
            bail!(
                "the driver speaks ABI version {}: pingpong needs version 2 \
                 (POST_RECV, CONNECT_QP, ARM_CQ)",
                info.abi_version
            );
        }
        let qp = dev.create_qp().map_err(ioerr("CREATE_QP"))?;
        let peer_qpn = link.exchange_u32(qp.qpn)?;
        dev.connect_qp(&qp, peer_qpn).map_err(ioerr("CONNECT_QP"))?;
        let rq = RecvQueue::map(&dev, qp)?;
        dev.post_recv(&qp, qp.rq_entries)
            .map_err(ioerr("POST_RECV"))?;
        let rdma = match setup.op {
            Op::Send => None,
            Op::RdmaWriteImm => Some(Rdma::setup(&dev, &info, &mut link, setup.max_size)?),
        };
        // The barrier: both connected, with receives posted (and regions
        // registered).
        link.exchange_u32(0)?;
        Ok(Endpoint {
            dev,
            rq,
            peer_qpn,
            rdma,
            link,
            timeout,
            info,
            single_cpu: thread::available_parallelism().map_or(true, |n| n.get() == 1),
        })
    }

    fn qp(&self) -> &abi::QpInfo {
        &self.rq.qp
    }

    fn op(&self) -> Op {
        if self.rdma.is_some() {
            Op::RdmaWriteImm
        } else {
            Op::Send
        }
    }

    /// The size of the peer's receive region, the largest RDMA write.
    fn peer_len(&self) -> Option<u64> {
        self.rdma.as_ref().map(|r| r.peer.len)
    }

    /// Builds message `seq` of `size` bytes from `side` into `bufs.wqe`:
    /// the inline SEND, or the RDMA_WRITE_IMM into the peer's region
    /// (inline if it fits, else gathered from the send region, which gets
    /// the payload). Returns the WQE's length.
    fn message(&self, bufs: &mut Buffers, size: usize, side: Side, seq: u32) -> Result<usize> {
        let Some(r) = &self.rdma else {
            return bufs.build(size, side, seq);
        };
        let payload = &mut bufs.payload[..size];
        fill(payload, side, seq);
        let (len, how) = build_rdma_write(
            &mut bufs.wqe,
            wqe::OPCODE_RDMA_WRITE_IMM,
            payload,
            (r.send.addr(), r.send.lkey()),
            (r.peer.addr, r.peer.rkey),
            false,
            r.max_wqe,
        )
        .ok_or_else(|| anyhow!("a {size}-byte RDMA write does not fit a WQE"))?;
        if how == Carry::Gather {
            // The peer has answered the previous message: the adapter is
            // done reading the region.
            r.send.write(0, payload);
        }
        set_imm(&mut bufs.wqe[..len], imm_of(side, seq));
        Ok(len)
    }

    /// Deregisters the regions of an RDMA-write run.
    fn close(self) -> Result<()> {
        match self.rdma {
            Some(r) => r.close(),
            None => Ok(()),
        }
    }

    /// Posts a SEND, retrying while the adapter pushes back (-EAGAIN).
    fn send(&self, wqe: &[u8], flags: u32) -> Result<()> {
        let deadline = Instant::now() + self.timeout;
        loop {
            match self.dev.post_send(self.qp(), wqe, flags) {
                Ok(_) => return Ok(()),
                Err(e) if is_back_pressure(&e) => {
                    if Instant::now() > deadline {
                        bail!(
                            "POST_SEND: the send queue stayed full for {:?}",
                            self.timeout
                        );
                    }
                    thread::yield_now();
                }
                Err(e) => return Err(ioerr("POST_SEND")(e)),
            }
        }
    }

    fn timed_out(&self, seq: u32) -> Error {
        anyhow!(
            "no receive completion within {:?} (message {seq}): the peer's {} never arrived",
            self.timeout,
            self.op().title()
        )
    }

    /// Spins on the owner byte of the next CQE.
    fn wait_busy(&self, seq: u32) -> Result<()> {
        let start = Instant::now();
        let mut spins = 0u32;
        while !self.rq.ready() {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(SPINS_PER_CHECK) {
                if start.elapsed() > self.timeout {
                    return Err(self.timed_out(seq));
                }
                self.link.check_peer()?;
                if self.single_cpu {
                    thread::yield_now();
                }
            }
            std::hint::spin_loop();
        }
        Ok(())
    }

    /// ARM_CQ, check once more (a CQE written before the arm raises no
    /// event), then sleep in poll(2) until the device says the CQ has a
    /// CQE at the consumer index.
    fn wait_event(&self, seq: u32) -> Result<()> {
        let start = Instant::now();
        loop {
            if self.rq.ready() {
                return Ok(());
            }
            self.dev.arm_cq(self.qp(), 0).map_err(ioerr("ARM_CQ"))?;
            if self.rq.ready() {
                return Ok(());
            }
            loop {
                if start.elapsed() > self.timeout {
                    return Err(self.timed_out(seq));
                }
                let mut fds = [
                    libc::pollfd {
                        fd: self.dev.fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: self.link.sock.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                // SAFETY: two valid pollfds.
                let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, POLL_SLICE_MS) };
                if n < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(e).context("poll() on the device");
                }
                let dev = fds[0].revents;
                if dev & libc::POLLNVAL != 0 {
                    bail!("poll() on the device: POLLNVAL");
                }
                if dev & (libc::POLLERR | libc::POLLHUP) != 0 {
                    bail!(
                        "poll() on the device: {} (the adapter is gone or the QP is in error)",
                        if dev & libc::POLLHUP != 0 {
                            "POLLHUP"
                        } else {
                            "POLLERR"
                        }
                    );
                }
                if fds[1].revents != 0 {
                    self.link.check_peer()?;
                }
                if dev & libc::POLLIN != 0 {
                    break;
                }
            }
            // POLLIN: the next CQE should be there; if not, arm again.
        }
    }

    /// Waits for the next receive, checks it is the SEND of `expect` from
    /// the peer (`from`), byte for byte, or its RDMA_WRITE_IMM (the
    /// immediate, and the bytes in this side's receive region), consumes
    /// the CQE and reposts its receive WQE.
    fn receive(&mut self, expect: &[u8], wait: WaitMode, seq: u32, from: Side) -> Result<()> {
        match wait {
            WaitMode::Busy => self.wait_busy(seq)?,
            WaitMode::Event => self.wait_event(seq)?,
        }
        let cqe = self.rq.read();
        let (qpn, peer) = (self.qp().qpn, self.peer_qpn);
        let wrong = match &self.rdma {
            None => cqe.check_send(qpn, peer, expect.len()),
            Some(_) => cqe.check_write_imm(qpn, peer, expect.len(), imm_of(from, seq)),
        };
        if let Some(why) = wrong {
            bail!(
                "receive of message {seq} ({} bytes) on QP {qpn:#x}: {why}",
                expect.len()
            );
        }
        let (got, place) = match &self.rdma {
            None => (
                self.rq
                    .buffer(cqe.wqe_index, expect.len())
                    .context("receive buffer")?,
                format!(
                    "receive buffer {}",
                    usize::from(cqe.wqe_index) % self.qp().rq_entries as usize
                ),
            ),
            Some(r) => (
                r.recv.bytes(0, expect.len()),
                format!(
                    "RDMA-written into the registered region at {:#x}, rkey {:#x}",
                    r.recv.addr(),
                    r.recv.rkey()
                ),
            ),
        };
        if let Some(i) = got.iter().zip(expect).position(|(g, e)| g != e) {
            bail!(
                "message {seq} ({} bytes, {place}): byte {i} is {:#04x}, {:#04x} was sent",
                expect.len(),
                got[i],
                expect[i]
            );
        }
        self.rq.consume();
        self.dev.post_recv(self.qp(), 1).map_err(ioerr("POST_RECV"))
    }
}

/// Payload and WQE buffers of one endpoint.
struct Buffers {
    payload: Vec<u8>,
    expect: Vec<u8>,
    wqe: [u8; wqe::MAX_WQE_LEN],
}

impl Buffers {
    fn new() -> Self {
        Buffers {
            payload: vec![0; 65536],
            expect: vec![0; 65536],
            wqe: [0; wqe::MAX_WQE_LEN],
        }
    }

    /// The inline SEND of message `seq` from `side`; its length.
    fn build(&mut self, size: usize, side: Side, seq: u32) -> Result<usize> {
        fill(&mut self.payload[..size], side, seq);
        wqe::build_inline(&mut self.wqe, wqe::OPCODE_SEND, None, &self.payload[..size])
            .ok_or_else(|| anyhow!("a {size}-byte payload does not fit a WQE inline"))
    }
}

/// The server: answers each job's messages until the client says done.
fn server(path: &Path, sock: UnixStream, timeout: Duration, setup: Setup) -> Result<()> {
    let mut ep = Endpoint::setup(path, sock, timeout, setup)?;
    let mut bufs = Buffers::new();
    // Messages so far, over all jobs: each has its own payload.
    let mut seq = 0u32;
    loop {
        let mut msg = [0u8; Job::LEN];
        ep.link.recv(&mut msg)?;
        let Some(job) = Job::decode(&msg) else {
            return ep.close();
        };
        if job.op != ep.op() {
            bail!(
                "the client asked for op {}, this endpoint was set up for {}",
                job.op.name(),
                ep.op().name()
            );
        }
        let size = job.size as usize;
        ep.link.send(&[1])?;
        for _ in 0..job.iters {
            fill(&mut bufs.expect[..size], Side::Client, seq);
            ep.receive(&bufs.expect[..size], job.wait, seq, Side::Client)?;
            let len = ep.message(&mut bufs, size, Side::Server, seq)?;
            ep.send(&bufs.wqe[..len], job.path.flags())?;
            seq = seq.wrapping_add(1);
        }
    }
}

/// One job's results, as the client saw them.
struct Measured {
    job: Job,
    summary: Summary,
    seen: PerPost,
}

/// The client: runs the jobs, times them, reads the analyzer around each.
fn client(
    path: &Path,
    sock: UnixStream,
    timeout: Duration,
    plan: &Plan,
    out: &mut Output,
) -> Result<Vec<Measured>> {
    let mut ep = Endpoint::setup(path, sock, timeout, plan.setup())?;
    let jobs = plan.jobs(&ep.info, ep.qp(), ep.peer_len())?;
    out.start(&ep, plan);
    let analyzer = Analyzer::open();
    out.line(&Analyzer::describe(analyzer.as_ref()));
    let mut bufs = Buffers::new();
    let mut results: Vec<Measured> = Vec::with_capacity(jobs.len());
    let mut progress = Progress::new(jobs.len(), "pingpong");
    out.printer = progress.printer();
    // Messages so far, over all jobs, as the server counts them.
    let mut seq = 0u32;
    for (i, job) in jobs.iter().enumerate() {
        if i == 0 || jobs[i - 1].path != job.path || jobs[i - 1].wait != job.wait {
            out.config_header(job, plan, &ep);
        }
        let size = job.size as usize;
        let before = analyzer.as_ref().map(Analyzer::snapshot);
        ep.link.send(&job.encode())?;
        ep.link.recv(&mut [0u8])?;
        let mut stamps = Vec::with_capacity(job.iters as usize);
        for _ in 0..job.iters {
            let len = ep.message(&mut bufs, size, Side::Client, seq)?;
            stamps.push(Instant::now());
            ep.send(&bufs.wqe[..len], job.path.flags())?;
            fill(&mut bufs.expect[..size], Side::Server, seq);
            ep.receive(&bufs.expect[..size], job.wait, seq, Side::Server)?;
            seq = seq.wrapping_add(1);
        }
        let seen = match (&analyzer, before) {
            (Some(a), Some(b)) => PerPost::between(&b, &a.snapshot(), 2 * u64::from(job.iters)),
            _ => PerPost::default(),
        };
        let t0 = stamps[0];
        let us: Vec<f64> = stamps
            .iter()
            .map(|t| t.duration_since(t0).as_secs_f64() * 1e6)
            .collect();
        let summary = perftest_lat(&us, 2.0).ok_or_else(|| anyhow!("too few iterations"))?;
        out.line(&report::perftest_row(size, &summary));
        results.push(Measured {
            job: *job,
            summary,
            seen,
        });
        progress.step(
            i + 1,
            &format!("{} {} {size} B", job.path.name(), job.wait.name()),
        );
    }
    drop(progress);
    out.printer = Printer::default();
    ep.link.send(&Job::DONE)?;
    out.analyzer_tables(&results, plan.op);
    ep.close()?;
    Ok(results)
}

/// What to run: sizes and configurations.
struct Plan {
    sizes: Vec<usize>,
    configs: Vec<(PathMode, WaitMode)>,
    iters: u32,
    procs: bool,
    op: Op,
}

impl Plan {
    fn setup(&self) -> Setup {
        Setup {
            op: self.op,
            max_size: self.sizes.iter().copied().max().unwrap_or(1),
        }
    }

    /// The jobs, configuration by configuration; sizes that cannot run on
    /// a path are left out (and said so). `peer_len`: the peer's receive
    /// region (RDMA writes).
    fn jobs(
        &self,
        info: &abi::DeviceInfo,
        qp: &abi::QpInfo,
        peer_len: Option<u64>,
    ) -> Result<Vec<Job>> {
        let why = |size, path| skip_reason(size, self.op, path, info, qp, peer_len);
        let mut jobs = Vec::new();
        for &(path, wait) in &self.configs {
            for &size in &self.sizes {
                if why(size, path).is_none() {
                    jobs.push(Job {
                        size: size as u32,
                        path,
                        wait,
                        iters: self.iters,
                        op: self.op,
                    });
                }
            }
        }
        if jobs.is_empty() {
            let why = self
                .sizes
                .first()
                .and_then(|&s| why(s, self.configs[0].0))
                .unwrap_or_default();
            bail!("no payload size of the sweep can run: {why}");
        }
        Ok(jobs)
    }
}

/// Why `size` cannot run as `op` on `path`, if it cannot. `peer_len`: the
/// peer's receive region, where an RDMA write goes.
fn skip_reason(
    size: usize,
    op: Op,
    path: PathMode,
    info: &abi::DeviceInfo,
    qp: &abi::QpInfo,
    peer_len: Option<u64>,
) -> Option<String> {
    if op == Op::RdmaWriteImm {
        return skip_reason_rdma(size, path, info, peer_len);
    }
    let len = wqe::inline_size16(size, false) * 16;
    let max_wqe = (info.max_db_wqe_size as usize).min(wqe::MAX_WQE_LEN);
    if len > max_wqe {
        return Some(format!(
            "{size} bytes: its inline SEND would be {len} bytes, above the largest WQE ({max_wqe})"
        ));
    }
    if size > qp.recv_buf_size as usize {
        return Some(format!(
            "{size} bytes: above the receive buffers ({} bytes)",
            qp.recv_buf_size
        ));
    }
    let bf_max = (info.bf_buf_size as usize).min(info.max_bf_wqe_size as usize);
    if path == PathMode::Bf && len > bf_max {
        return Some(format!(
            "{size} bytes: its {len}-byte WQE does not fit a BlueFlame buffer ({bf_max})"
        ));
    }
    None
}

/// [`skip_reason`] of an RDMA_WRITE_IMM: it must fit the peer's region;
/// on BlueFlame its WQE must carry the payload inline and fit a buffer.
fn skip_reason_rdma(
    size: usize,
    path: PathMode,
    info: &abi::DeviceInfo,
    peer_len: Option<u64>,
) -> Option<String> {
    if let Some(l) = peer_len.filter(|&l| size as u64 > l) {
        return Some(format!(
            "{size} bytes: above the peer's registered region ({l} bytes)"
        ));
    }
    if path != PathMode::Bf {
        return None;
    }
    if carry(size, true, max_wqe(info)) == Carry::Gather {
        return Some(format!(
            "{size} bytes: too large for an inline WQE, so gathered: doorbell path only"
        ));
    }
    let len = wqe::inline_size16(size, true) * 16;
    let bf_max = (info.bf_buf_size as usize).min(info.max_bf_wqe_size as usize);
    (len > bf_max).then(|| {
        format!("{size} bytes: its {len}-byte WQE does not fit a BlueFlame buffer ({bf_max})")
    })
}

/// What the client prints, kept for pingpong.txt.
#[derive(Default)]
struct Output {
    text: String,
    printer: Printer,
    /// The largest SEND payload that fits BlueFlame, for the plots.
    cutoff: usize,
}

impl Output {
    fn line(&mut self, s: &str) {
        self.printer.line(s);
        let _ = writeln!(self.text, "{s}");
    }

    fn start(&mut self, ep: &Endpoint, plan: &Plan) {
        let qp = ep.qp();
        let procs = if plan.procs {
            "two processes"
        } else {
            "two threads"
        };
        match &ep.rdma {
            None => self.line(&format!(
                "# mlx4-bf pingpong: ib_send_lat-style SEND ping-pong, inline payloads, {procs} ({} writer); \
                 QPs {:#x} <-> {:#x}, {} receive buffers of {} bytes, {} CQEs",
                writer_name(ep.info.writer),
                qp.qpn,
                ep.peer_qpn,
                qp.rq_entries,
                qp.recv_buf_size,
                qp.cq_entries
            )),
            Some(r) => self.line(&format!(
                "# mlx4-bf pingpong: op rdma-write-imm: RDMA_WRITE_IMM ping-pong into the peer's \
                 registered region (inline payloads up to {} bytes, gathered above from a registered \
                 send region), the immediate in a receive CQE, {procs} ({} writer); QPs {:#x} <-> \
                 {:#x}, regions of {} bytes at rkeys {:#x} <-> {:#x}, {} receive WQEs, {} CQEs",
                inline_max(true, r.max_wqe),
                writer_name(ep.info.writer),
                qp.qpn,
                ep.peer_qpn,
                r.recv.len(),
                r.recv.rkey(),
                r.peer.rkey,
                qp.rq_entries,
                qp.cq_entries
            )),
        }
        self.cutoff = bf_cutoff_for(&ep.info, ep.rdma.is_some());
        let skip = |s: usize, path| skip_reason(s, plan.op, path, &ep.info, qp, ep.peer_len());
        let mut paths: Vec<PathMode> = Vec::new();
        for &(path, _) in &plan.configs {
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
        for path in paths {
            let skipped: Vec<String> = plan
                .sizes
                .iter()
                .filter(|&&s| skip(s, path).is_some())
                .map(|s| s.to_string())
                .collect();
            if let Some(why) = plan.sizes.iter().find_map(|&s| skip(s, path)) {
                self.line(&format!(
                    "# path {}: sizes skipped: {} ({why}, ...)",
                    path.name(),
                    skipped.join(" ")
                ));
            }
            let Some(r) = &ep.rdma else {
                continue;
            };
            let run: Vec<usize> = plan
                .sizes
                .iter()
                .copied()
                .filter(|&s| skip(s, path).is_none())
                .collect();
            if let Some(list) = gathered_sizes(&run, |s| carry(s, true, r.max_wqe)) {
                self.line(&format!(
                    "# path {}: sizes gathered from the registered send region (lkey {:#x}): {list}",
                    path.name(),
                    r.send.lkey()
                ));
            }
        }
    }

    fn config_header(&mut self, job: &Job, plan: &Plan, ep: &Endpoint) {
        let op = match job.op {
            Op::Send => String::new(),
            op => format!("op {}, ", op.name()),
        };
        self.line(&format!(
            "---- pingpong: {op}path {}, wait {} ({} iterations per size, {}, {} writer)",
            job.path.name(),
            job.wait.name(),
            plan.iters,
            if plan.procs {
                "two processes"
            } else {
                "two threads"
            },
            writer_name(ep.info.writer)
        ));
        self.line(report::PERFTEST_HEADER);
    }

    /// Per configuration: what the analyzer saw per post (both
    /// directions), beside the guest's t_typical.
    fn analyzer_tables(&mut self, results: &[Measured], op: Op) {
        let op = match op {
            Op::Send => String::new(),
            op => format!("op {}, ", op.name()),
        };
        let mut last: Option<(PathMode, WaitMode)> = None;
        for m in results {
            let key = (m.job.path, m.job.wait);
            if last != Some(key) {
                self.line(&format!(
                    "---- analyzer: {op}path {}, wait {}: per post (both directions), beside the guest's \
                     t_typical (wall clock under emulation); modelled_* are the device model's PCIe \
                     clock, not measured",
                    m.job.path.name(),
                    m.job.wait.name()
                ));
                self.line(&analyzer::header("t_typical[usec]"));
                last = Some(key);
            }
            self.line(&analyzer::row(
                m.job.size as usize,
                m.job.path.name(),
                m.summary.typical,
                2,
                &m.seen,
            ));
        }
    }
}

/// Writes pingpong.txt, the data files and the plots (their names start
/// with the op's prefix).
fn write_files(
    dir: &Path,
    text: &str,
    results: &[Measured],
    sep: &str,
    cutoff: usize,
    op: Op,
) -> Result<Vec<String>> {
    let prefix = op.file_prefix();
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let put = |name: &str, text: &str| -> Result<String> {
        let p = dir.join(name);
        fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
        Ok(name.to_owned())
    };
    let mut written = vec![put(&format!("{prefix}.txt"), text)?];
    let mut configs: Vec<(PathMode, WaitMode)> = Vec::new();
    for m in results {
        if !configs.contains(&(m.job.path, m.job.wait)) {
            configs.push((m.job.path, m.job.wait));
        }
    }
    let of = |c: (PathMode, WaitMode)| {
        results
            .iter()
            .filter(move |m| (m.job.path, m.job.wait) == c)
    };
    let labels: Vec<String> = configs
        .iter()
        .map(|(p, w)| format!("{}, {} wait", p.name(), w.name()))
        .collect();
    for &c in &configs {
        let rows: Vec<(usize, Summary)> = of(c).map(|m| (m.job.size as usize, m.summary)).collect();
        written.push(put(
            &format!("{prefix}-{}-{}.dat", c.0.name(), c.1.name()),
            &report::data_file(&rows, sep),
        )?);
    }
    let series: Vec<report::Series<'_>> = configs
        .iter()
        .zip(&labels)
        .map(|(&c, label)| report::Series {
            label,
            points: of(c)
                .map(|m| (f64::from(m.job.size), m.summary.typical))
                .collect(),
        })
        .collect();
    let svg = format!("{prefix}.svg");
    report::plot_svg(
        &dir.join(&svg),
        &format!(
            "{} ping-pong, one way (perftest t_typical = median round trip / 2), guest wall clock",
            op.title()
        ),
        "latency [us]",
        &series,
        Some(cutoff as f64),
    )?;
    written.push(svg);
    let modelled: Vec<report::Series<'_>> = configs
        .iter()
        .zip(&labels)
        .map(|(&c, label)| report::Series {
            label,
            points: of(c)
                .filter_map(|m| Some((f64::from(m.job.size), m.seen.one_way_ns? / 1000.0)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    if !modelled.is_empty() {
        let svg = format!("{prefix}-modelled.svg");
        report::plot_svg(
            &dir.join(&svg),
            &format!(
                "{} one way as the device model's PCIe clock models it (not measured)",
                op.title()
            ),
            "modelled latency [us]",
            &modelled,
            Some(cutoff as f64),
        )?;
        written.push(svg);
    }
    Ok(written)
}

/// The client's error, unless it only saw the server go: then the
/// server's.
fn combine<T>(client: Result<T>, server: Result<()>) -> Result<T> {
    match (client, server) {
        (Err(c), Err(s)) if c.downcast_ref::<PeerGone>().is_some() => Err(s.context("server")),
        (Err(c), _) => Err(c),
        (Ok(_), Err(s)) => Err(s.context("server")),
        (Ok(v), Ok(())) => Ok(v),
    }
}

/// The server in a child process; it hands its error, if any, back over a
/// second socket, and its exit status says how it ended.
fn run_forked(
    path: &Path,
    timeout: Duration,
    plan: &Plan,
    out: &mut Output,
) -> Result<Vec<Measured>> {
    let (a, b) = UnixStream::pair().context("socketpair")?;
    let (mut err_rx, mut err_tx) = UnixStream::pair().context("socketpair")?;
    io::stdout().flush()?;
    io::stderr().flush()?;
    // SAFETY: the helper is single-threaded here; the child runs the
    // server and leaves with _exit().
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()).context("fork"),
        0 => {
            drop((a, err_rx));
            let rc = match server(path, b, timeout, plan.setup()) {
                Ok(()) => 0,
                Err(e) => {
                    let _ = err_tx.write_all(format!("{e:#}").as_bytes());
                    1
                }
            };
            drop(err_tx);
            // SAFETY: ends the child without running the parent's exit
            // handlers (or flushing its buffers) a second time.
            unsafe { libc::_exit(rc) }
        }
        pid => {
            drop((b, err_tx));
            let r = client(path, a, timeout, plan, out);
            let mut why = String::new();
            let _ = err_rx.read_to_string(&mut why);
            let mut status = 0;
            // SAFETY: waits for the child this call forked.
            let w = unsafe { libc::waitpid(pid, &mut status, 0) };
            let server = if w != pid {
                Err(io::Error::last_os_error()).context("waitpid")
            } else if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                Ok(())
            } else if !why.is_empty() {
                Err(anyhow!(why))
            } else {
                Err(anyhow!("the server process ended with status {status:#x}"))
            };
            combine(r, server)
        }
    }
}

pub fn run(dev_path: &Path, args: &Args) -> Result<()> {
    if !(args.timeout > 0.0 && args.timeout <= 3600.0) {
        bail!("--timeout {} is outside 0..3600", args.timeout);
    }
    let timeout = Duration::from_secs_f64(args.timeout);
    let sizes = match args.size {
        Some(s) => vec![s as usize],
        None => Sweep {
            min: args.min,
            max: args.max,
            step: args.step,
            iters: args.iters,
        }
        .sizes()?,
    };
    let configs = if args.all {
        vec![
            (PathMode::Bf, WaitMode::Busy),
            (PathMode::Db, WaitMode::Busy),
            (PathMode::Bf, WaitMode::Event),
            (PathMode::Db, WaitMode::Event),
        ]
    } else {
        vec![(args.path, args.wait)]
    };
    let plan = Plan {
        sizes,
        configs,
        iters: args.iters,
        procs: args.procs,
        op: args.op,
    };
    let mut out = Output::default();
    let results = if args.procs {
        run_forked(dev_path, timeout, &plan, &mut out)?
    } else {
        let (a, b) = UnixStream::pair().context("socketpair")?;
        thread::scope(|s| {
            let setup = plan.setup();
            let h = s.spawn(move || server(dev_path, b, timeout, setup));
            let r = client(dev_path, a, timeout, &plan, &mut out);
            let server = h
                .join()
                .unwrap_or_else(|_| Err(anyhow!("the server thread panicked")));
            combine(r, server)
        })?
    };
    if let Some(dir) = &args.out_dir {
        let written = write_files(dir, &out.text, &results, &args.sep, out.cutoff, args.op)?;
        println!("wrote {} to {}", written.join(", "), dir.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_survives_the_wire_and_done_ends_the_server() {
        for path in [PathMode::Bf, PathMode::Db, PathMode::Auto] {
            for wait in [WaitMode::Busy, WaitMode::Event] {
                for op in [Op::Send, Op::RdmaWriteImm] {
                    let j = Job {
                        size: 208,
                        path,
                        wait,
                        iters: 300,
                        op,
                    };
                    assert_eq!(Job::decode(&j.encode()), Some(j));
                }
            }
        }
        assert_eq!(Job::decode(&Job::DONE), None);
    }

    #[test]
    fn a_registered_region_survives_the_wire() {
        let r = Remote {
            addr: 0x7f12_3456_7000,
            rkey: 0x0000_052a,
            len: 65536,
        };
        assert_eq!(Remote::decode(&r.encode()), r);
    }

    #[test]
    fn immediates_differ_between_sides_and_messages() {
        assert_eq!(imm_of(Side::Client, 7), 7);
        assert_eq!(imm_of(Side::Server, 7), 0xa500_0007);
        for seq in [0u32, 1, 0xff_ffff, 0x100_0000, u32::MAX] {
            assert_ne!(imm_of(Side::Client, seq), imm_of(Side::Server, seq));
            assert_ne!(
                imm_of(Side::Client, seq),
                imm_of(Side::Client, seq.wrapping_add(1))
            );
        }
    }

    #[test]
    fn regions_are_whole_pages_up_to_the_driver_s_largest() {
        let mut info = abi::DeviceInfo {
            max_mr_size: 1 << 20,
            ..Default::default()
        };
        assert_eq!(region_len(4, &info), 4096);
        assert_eq!(region_len(4097, &info), 8192);
        assert_eq!(region_len(65536, &info), 65536);
        info.max_mr_size = 40_000;
        assert_eq!(region_len(65536, &info), 36_864);
        info.max_mr_size = 0;
        assert_eq!(region_len(65536, &info), 65536);
    }

    #[test]
    fn payloads_differ_between_messages_sharing_a_buffer_and_between_sides() {
        let (mut a, mut b) = ([0u8; 300], [0u8; 300]);
        for rq_entries in [1u32, 16, 256, 512] {
            for seq in [0u32, 1, 255, 1000] {
                fill(&mut a, Side::Client, seq);
                fill(&mut b, Side::Client, seq + rq_entries);
                assert!(
                    a.iter().zip(&b).all(|(x, y)| x != y),
                    "seq {seq} + {rq_entries}"
                );
            }
        }
        fill(&mut a, Side::Client, 7);
        fill(&mut b, Side::Server, 7);
        assert!(a.iter().zip(&b).all(|(x, y)| x != y));
    }

    fn device() -> (abi::DeviceInfo, abi::QpInfo) {
        let info = abi::DeviceInfo {
            abi_version: 2,
            bf_buf_size: 256,
            max_bf_wqe_size: 256,
            max_db_wqe_size: 1008,
            ..Default::default()
        };
        let qp = abi::QpInfo {
            recv_buf_size: 512,
            ..Default::default()
        };
        (info, qp)
    }

    #[test]
    fn sizes_that_cannot_run_on_a_path_are_skipped() {
        let (info, qp) = device();
        let skip =
            |size, path, qp: &abi::QpInfo| skip_reason(size, Op::Send, path, &info, qp, None);
        // A SEND with 224 inline bytes is 256 bytes: BlueFlame's last.
        assert_eq!(skip(224, PathMode::Bf, &qp), None);
        assert!(skip(225, PathMode::Bf, &qp)
            .unwrap()
            .contains("does not fit a BlueFlame buffer"));
        assert_eq!(skip(225, PathMode::Db, &qp), None);
        assert!(skip(513, PathMode::Db, &qp)
            .unwrap()
            .contains("above the receive buffers"));
        let big = abi::QpInfo {
            recv_buf_size: 4096,
            ..qp
        };
        assert!(skip(1000, PathMode::Auto, &big)
            .unwrap()
            .contains("above the largest WQE"));
        let plan = Plan {
            sizes: vec![4, 224, 300],
            configs: vec![
                (PathMode::Bf, WaitMode::Busy),
                (PathMode::Db, WaitMode::Event),
            ],
            iters: 10,
            procs: false,
            op: Op::Send,
        };
        let jobs = plan.jobs(&info, &qp, None).unwrap();
        let got: Vec<(u32, PathMode)> = jobs.iter().map(|j| (j.size, j.path)).collect();
        assert_eq!(
            got,
            [
                (4, PathMode::Bf),
                (224, PathMode::Bf),
                (4, PathMode::Db),
                (224, PathMode::Db),
                (300, PathMode::Db)
            ]
        );
    }

    #[test]
    fn rdma_writes_fit_the_peer_s_region_and_go_gathered_on_the_doorbell_only() {
        let (info, qp) = device();
        let peer = Some(4096);
        let skip = |size, path| skip_reason(size, Op::RdmaWriteImm, path, &info, &qp, peer);
        // 208 inline bytes after the remote address segment: 256 bytes.
        assert_eq!(skip(208, PathMode::Bf), None);
        assert!(skip(209, PathMode::Bf)
            .unwrap()
            .contains("does not fit a BlueFlame buffer (256)"));
        // The receive buffers do not limit a write, its WQE does not either.
        assert_eq!(skip(1000, PathMode::Db), None);
        assert_eq!(skip(4096, PathMode::Auto), None);
        assert!(skip(913, PathMode::Bf)
            .unwrap()
            .contains("gathered: doorbell path only"));
        assert!(skip(4097, PathMode::Db)
            .unwrap()
            .contains("above the peer's registered region (4096 bytes)"));
        let plan = Plan {
            sizes: vec![4, 208, 2000],
            configs: vec![
                (PathMode::Bf, WaitMode::Busy),
                (PathMode::Auto, WaitMode::Busy),
            ],
            iters: 10,
            procs: true,
            op: Op::RdmaWriteImm,
        };
        assert_eq!(plan.setup().max_size, 2000);
        let jobs = plan.jobs(&info, &qp, peer).unwrap();
        let got: Vec<(u32, PathMode, Op)> = jobs.iter().map(|j| (j.size, j.path, j.op)).collect();
        assert_eq!(
            got,
            [
                (4, PathMode::Bf, Op::RdmaWriteImm),
                (208, PathMode::Bf, Op::RdmaWriteImm),
                (4, PathMode::Auto, Op::RdmaWriteImm),
                (208, PathMode::Auto, Op::RdmaWriteImm),
                (2000, PathMode::Auto, Op::RdmaWriteImm)
            ]
        );
        let tiny = plan.jobs(&info, &qp, Some(1)).unwrap_err().to_string();
        assert!(
            tiny.contains("no payload size of the sweep can run: 4 bytes: above"),
            "{tiny}"
        );
    }

    #[test]
    fn files_are_one_data_file_per_path_and_wait_mode_and_the_plots() {
        let m = |size, path, wait, typical, one_way| Measured {
            job: Job {
                size,
                path,
                wait,
                iters: 4,
                op: Op::Send,
            },
            summary: Summary {
                iters: 4,
                min: 1.0,
                max: 3.0,
                typical,
                ..Default::default()
            },
            seen: PerPost {
                one_way_ns: one_way,
                ..Default::default()
            },
        };
        let results = [
            m(4, PathMode::Bf, WaitMode::Busy, 2.0, Some(2600.0)),
            m(72, PathMode::Bf, WaitMode::Busy, 2.5, Some(2900.0)),
            m(4, PathMode::Db, WaitMode::Event, 9.0, None),
        ];
        let dir =
            std::env::temp_dir().join(format!("mlx4-bf-pingpong-test-{}", std::process::id()));
        let written = write_files(&dir, "tables\n", &results, ", ", 224, Op::Send).unwrap();
        assert_eq!(
            written,
            [
                "pingpong.txt",
                "pingpong-bf-busy.dat",
                "pingpong-db-event.dat",
                "pingpong.svg",
                "pingpong-modelled.svg"
            ]
        );
        let dat = fs::read_to_string(dir.join("pingpong-bf-busy.dat")).unwrap();
        assert_eq!(
            dat,
            "# PacketSize, LatTypical, LatBest, LatWorst\n4, 2.000, 1.000, 3.000\n72, 2.500, 1.000, 3.000\n"
        );
        let svg = fs::read_to_string(dir.join("pingpong.svg")).unwrap();
        assert!(svg.contains("bf, busy wait") && svg.contains("db, event wait"));
        assert!(svg.contains("SEND ping-pong"));
        // The op names the files of an RDMA-write run, beside the SEND's.
        let written =
            write_files(&dir, "tables\n", &results[..2], ", ", 208, Op::RdmaWriteImm).unwrap();
        assert_eq!(
            written,
            [
                "pingpong-rdma-write-imm.txt",
                "pingpong-rdma-write-imm-bf-busy.dat",
                "pingpong-rdma-write-imm.svg",
                "pingpong-rdma-write-imm-modelled.svg"
            ]
        );
        let svg = fs::read_to_string(dir.join("pingpong-rdma-write-imm.svg")).unwrap();
        assert!(svg.contains("RDMA_WRITE_IMM ping-pong"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_server_s_error_wins_over_the_client_seeing_it_go() {
        let r: Result<()> = combine(Err(Error::new(PeerGone)), Err(anyhow!("CONNECT_QP: boom")));
        assert_eq!(format!("{:#}", r.unwrap_err()), "server: CONNECT_QP: boom");
        let r: Result<()> = combine(Err(anyhow!("payload mismatch")), Err(Error::new(PeerGone)));
        assert_eq!(r.unwrap_err().to_string(), "payload mismatch");
    }
}
