// SPDX-License-Identifier: GPL-2.0

//! krping's loop. The client SENDs where its source buffer is; the server
//! RDMA READs it and SENDs "go ahead"; the client SENDs where its sink is;
//! the server RDMA WRITEs the data there and SENDs "go ahead"; the client
//! compares source and sink (`validate`). A `loop` runs both ends in the
//! writing thread, the server's steps between the client's.
//!
//! Every wait checks for a signal (`-EINTR`) and for unbind (`-ENODEV`).
//! `wait=event` sleeps on the adapter's completion events after arming
//! the receive CQ; send completions are polled (the send CQ raises none).

use kernel::{
    prelude::*,
    sync::Arc,
    time::{msecs_to_jiffies, Instant, Monotonic},
};

use super::{
    end::{Buf, End},
    registry::{Rendezvous, RunStats},
    Kping, Msg, TAG_DONE, TAG_GO, TAG_SINK, TAG_SOURCE,
};
use crate::{
    geometry::KPING_BUF_BYTES,
    kping_rules::{
        command::{Command, Role, Wait},
        histogram::Histogram,
    },
};

/// How long a client waits for a server on its port.
const RENDEZVOUS_MS: u32 = 3000;
/// How long one sleep lasts before the conditions are looked at again.
const NAP_MS: u32 = 10;
/// Round trips between two updates of the latency columns.
const PUBLISH_EVERY: u32 = 64;
/// How long an ending client waits for the server to acknowledge.
const GOODBYE_MS: i64 = 1000;

/// One command's thread.
struct Run<'a> {
    kping: &'a Arc<Kping>,
    cmd: &'a Command,
    slot: usize,
    id: u32,
    stats: RunStats,
    latency: KBox<Histogram>,
    /// How long each RDMA WRITE's `post_send()` took (the in-kernel post).
    posts: KBox<Histogram>,
    /// The peer said it is done (`TAG_DONE`): nothing more comes from it.
    peer_done: bool,
    /// A server's QP was connected to a client's.
    connected: bool,
}

/// Runs `cmd` as thread `id` in registry slot `slot`.
pub(super) fn run(kping: &Arc<Kping>, cmd: &Command, slot: usize, id: u32) -> Result {
    let mut run = Run {
        kping,
        cmd,
        slot,
        id,
        stats: RunStats::default(),
        latency: KBox::new(Histogram::new(), GFP_KERNEL)?,
        posts: KBox::new(Histogram::new(), GFP_KERNEL)?,
        peer_done: false,
        connected: false,
    };
    let result = match cmd.role {
        Role::Loop => run.both(),
        Role::Server { port } => run.server(port),
        Role::Client { port } => run.client(port),
    };
    run.publish(true);
    result
}

impl Run<'_> {
    fn name(&self) -> &'static CStr {
        self.kping.name
    }

    /// `-EINTR` on a signal, `-ENODEV` once the adapter is unbound.
    fn check(&self) -> Result {
        if kernel::current!().signal_pending() {
            return Err(EINTR);
        }
        self.kping.adapter.posting()
    }

    /// Sleeps on the adapter's events for at most `NAP_MS`.
    fn nap(&self) -> Result {
        let mut guard = self.kping.sleep.lock();
        let _ = self
            .kping
            .adapter
            .events()
            .wait_interruptible_timeout(&mut guard, msecs_to_jiffies(NAP_MS));
        drop(guard);
        self.check()
    }

    /// The next message on `end`.
    fn recv(&mut self, end: &End) -> Result<Msg> {
        let m = loop {
            if let Some(m) = end.try_recv()? {
                break m;
            }
            self.check()?;
            match self.cmd.wait {
                Wait::Busy => core::hint::spin_loop(),
                Wait::Event => {
                    end.arm()?;
                    // A message that came before the arm raised no event.
                    if let Some(m) = end.try_recv()? {
                        break m;
                    }
                    self.nap()?;
                }
            }
        };
        self.stats.recv_msgs += 1;
        self.stats.recv_bytes += super::MSG_LEN as u64;
        Ok(m)
    }

    /// Until every WQE `end` posted completed.
    fn sends_done(&self, end: &End) -> Result {
        while !end.sends_done()? {
            self.check()?;
            core::hint::spin_loop();
        }
        Ok(())
    }

    fn send(&mut self, end: &End, msg: &Msg) -> Result {
        end.send(msg, self.cmd.path)?;
        self.stats.send_msgs += 1;
        self.stats.send_bytes += super::MSG_LEN as u64;
        Ok(())
    }

    /// The statistics into the registry; the latency columns every
    /// `PUBLISH_EVERY` round trips and at the end (`all`).
    fn publish(&mut self, all: bool) {
        let samples = self.latency.count();
        if all || samples % u64::from(PUBLISH_EVERY) == 1 {
            let q = |per_mille| self.latency.quantile(per_mille).unwrap_or(0);
            self.stats.latency = [q(0), q(500), q(990), q(1000)];
            self.stats.write_post = self.posts.quantile(500).unwrap_or(0);
        }
        if let Some(s) = self.kping.registry.lock().stats_mut(self.slot) {
            let RunStats { id, role, .. } = *s;
            *s = RunStats {
                id,
                role,
                result: None,
                ..self.stats
            };
        }
    }

    /// A server shows `listening` until its client comes.
    fn set_listening(&mut self, listening: bool) {
        self.stats.listening = listening;
        self.publish(false);
    }

    /// A `loop`: both ends here.
    fn both(&mut self) -> Result {
        let client = End::new(self.kping, self.cmd)?;
        let server = End::new(self.kping, self.cmd)?;
        client.connect(server.qpn)?;
        server.connect(client.qpn)?;
        self.rounds(&client, Some(&server))
    }

    /// A server: waits for a client on `port`, then serves it until it is
    /// done.
    fn server(&mut self, port: u16) -> Result {
        let end = End::new(self.kping, self.cmd)?;
        if !self.kping.registry.lock().listen(port, self.id, end.qpn) {
            pr_warn!("{}: kping: port {port} has a server\n", self.name());
            return Err(crate::sys::errno::eaddrinuse());
        }
        self.set_listening(true);
        let result = self.serve_client(&end);
        self.kping.registry.lock().unlisten(self.id);
        self.set_listening(false);
        // Done, or acknowledging the client's done: nothing of the client's
        // is read or written any more.
        if self.connected {
            let _ = end.send(&Msg::word(TAG_DONE), self.cmd.path);
        }
        result
    }

    fn serve_client(&mut self, end: &End) -> Result {
        let client = loop {
            if let Some(qpn) = self.kping.registry.lock().client_of(self.id) {
                break qpn;
            }
            self.nap()?;
        };
        self.set_listening(false);
        self.connected = true;
        end.connect(client)?;
        self.kping.registry.lock().set_ready(self.id);
        let mut served = 0u32;
        while self.cmd.count.is_none_or(|c| served < c.get()) {
            let start = Instant::<Monotonic>::now();
            if !self.serve(end)? {
                return Ok(());
            }
            if !self.serve(end)? {
                return Ok(());
            }
            self.sample(start, served);
            served += 1;
        }
        Ok(())
    }

    /// A client: finds the server on `port`, then runs its round trips.
    fn client(&mut self, port: u16) -> Result {
        let end = End::new(self.kping, self.cmd)?;
        let deadline = Instant::<Monotonic>::now();
        let (server_qpn, server_id) = loop {
            match self.kping.registry.lock().connect(port, end.qpn) {
                (Rendezvous::Found(qpn), id) => break (qpn, id),
                (Rendezvous::NoServer, _) => (),
            }
            if deadline.elapsed().as_millis() >= i64::from(RENDEZVOUS_MS) {
                pr_warn!(
                    "{}: kping: no server on port {port} after {RENDEZVOUS_MS} ms\n",
                    self.name()
                );
                return Err(ETIMEDOUT);
            }
            self.nap()?;
        };
        end.connect(server_qpn)?;
        loop {
            match self.kping.registry.lock().server_ready(server_id) {
                Some(true) => break,
                Some(false) => (),
                None => return Err(crate::sys::errno::econnreset()),
            }
            self.nap()?;
        }
        let result = self.rounds(&end, None);
        if !self.peer_done {
            self.goodbye(&end);
        }
        result
    }

    /// Tells the server this client is done, and waits (a while, signal
    /// or not) for its answer: it comes after the server's last RDMA
    /// operation on this client's buffers completed, so they may go.
    fn goodbye(&mut self, end: &End) {
        if end.send(&Msg::word(TAG_DONE), self.cmd.path).is_err() {
            return;
        }
        let start = Instant::<Monotonic>::now();
        while start.elapsed().as_millis() < GOODBYE_MS {
            match end.try_recv() {
                Ok(Some(m)) if m.tag == TAG_DONE => return,
                Ok(_) => kernel::time::delay::fsleep(kernel::time::Delta::from_micros(200)),
                Err(_) => return,
            }
        }
        pr_warn!(
            "{}: kping {}: the server did not answer the client's end\n",
            self.name(),
            self.id
        );
    }

    /// The client's round trips, with the server's steps if it is here.
    fn rounds(&mut self, client: &End, server: Option<&End>) -> Result {
        let size = self.cmd.size;
        let mut round = 0u32;
        while self.cmd.count.is_none_or(|c| round < c.get()) {
            let start = Instant::<Monotonic>::now();
            if self.cmd.validate {
                client.with_bufs(|source, sink| {
                    fill(&mut source[..size as usize], round);
                    sink[..size as usize].fill(0);
                })?;
            }
            self.send(client, &client.describe(TAG_SOURCE, Buf::Source, size))?;
            if let Some(s) = server {
                self.serve(s)?;
            }
            self.expect_go(client)?;
            self.send(client, &client.describe(TAG_SINK, Buf::Sink, size))?;
            if let Some(s) = server {
                self.serve(s)?;
            }
            self.expect_go(client)?;
            if self.cmd.validate {
                self.validate(client, round)?;
            }
            self.sample(start, round);
            round += 1;
        }
        Ok(())
    }

    fn expect_go(&mut self, client: &End) -> Result {
        match self.recv(client)?.tag {
            TAG_GO => Ok(()),
            TAG_DONE => {
                self.peer_done = true;
                pr_warn!("{}: kping {}: the server ended\n", self.name(), self.id);
                Err(crate::sys::errno::econnreset())
            }
            _ => Err(crate::sys::errno::eproto()),
        }
    }

    /// One of the server's steps: the next message, and what it asks for.
    /// `false` when the client is done.
    fn serve(&mut self, end: &End) -> Result<bool> {
        let m = self.recv(end)?;
        let fits = m.size != 0 && m.size as usize <= KPING_BUF_BYTES && m.size <= self.cmd.size;
        match m.tag {
            TAG_DONE => {
                self.peer_done = true;
                return Ok(false);
            }
            TAG_SOURCE | TAG_SINK if !fits => {
                pr_warn!(
                    "{}: kping {}: the client's size {} exceeds this server's {}\n",
                    self.name(),
                    self.id,
                    m.size,
                    self.cmd.size
                );
                return Err(EMSGSIZE);
            }
            TAG_SOURCE => {
                end.read(&m, Buf::Source)?;
                self.stats.read_msgs += 1;
                self.stats.read_bytes += u64::from(m.size);
            }
            TAG_SINK => {
                let ns = end.write(Buf::Source, &m, self.cmd.path)?;
                self.posts.record(ns);
                self.stats.write_msgs += 1;
                self.stats.write_bytes += u64::from(m.size);
            }
            _ => return Err(crate::sys::errno::eproto()),
        }
        // The data moved before the go-ahead: the READ landed in the
        // buffer the WRITE sends from, the WRITE is in the client's sink.
        self.sends_done(end)?;
        self.send(end, &Msg::word(TAG_GO))?;
        Ok(true)
    }

    /// Source and sink of the client agree; `-EIO` with the first
    /// difference in the log.
    fn validate(&self, client: &End, round: u32) -> Result {
        let size = self.cmd.size as usize;
        let differs = client.with_bufs(|source, sink| {
            (0..size)
                .find(|&i| source[i] != sink[i])
                .map(|i| (i, source[i], sink[i]))
        })?;
        match differs {
            None => Ok(()),
            Some((at, sent, got)) => {
                pr_err!(
                    "{}: kping {}: validate: round trip {round}, byte {at}: sent {sent:#04x}, got {got:#04x}\n",
                    self.name(),
                    self.id
                );
                Err(EIO)
            }
        }
    }

    fn sample(&mut self, start: Instant<Monotonic>, round: u32) {
        let ns = start.elapsed().as_nanos().max(0) as u64;
        self.latency.record(ns);
        if self.cmd.verbose {
            pr_info!(
                "{}: kping {}: round trip {round}: {ns} ns\n",
                self.name(),
                self.id
            );
        }
        self.publish(false);
    }
}

/// Round trip `round`'s bytes: each differs from its neighbours and from
/// the previous round's at the same offset.
fn fill(buf: &mut [u8], round: u32) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(7).wrapping_add(round) as u8 ^ 0x5a;
    }
}
