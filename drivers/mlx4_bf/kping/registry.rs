// SPDX-License-Identifier: GPL-2.0

//! What an adapter's kernel pings share: the threads running (their
//! statistics), the last ones finished, the servers listening on a port,
//! and the ends' buffers in `Resources::kping_pool`. One lock, taken for short
//! updates only, never around a command or a post.

use crate::{geometry::KPING_ENDS, kping_rules::command::Role};

/// Commands that may run at once on one adapter (a loop is one).
pub(crate) const MAX_THREADS: usize = 4;
/// Finished commands whose line the file still shows.
pub(crate) const KEEP_FINISHED: usize = 8;

/// One thread's counters, krping's columns and the latency summary.
#[derive(Clone, Copy, Default)]
pub(crate) struct RunStats {
    pub(crate) id: u32,
    pub(crate) role: Option<Role>,
    pub(crate) send_bytes: u64,
    pub(crate) send_msgs: u64,
    pub(crate) recv_bytes: u64,
    pub(crate) recv_msgs: u64,
    pub(crate) write_bytes: u64,
    pub(crate) write_msgs: u64,
    pub(crate) read_bytes: u64,
    pub(crate) read_msgs: u64,
    /// Round-trip latency in ns: min, median, p99, max (0: no sample yet).
    pub(crate) latency: [u64; 4],
    /// The median time of an RDMA WRITE's in-kernel post (`post_send()`
    /// alone), in ns: a post's kernel cost without the system call.
    pub(crate) write_post: u64,
    /// A server waiting for its client.
    pub(crate) listening: bool,
    /// `None` while running; then 0 or the negative errno the write got.
    pub(crate) result: Option<i32>,
}

/// A server waiting on a port, and the client that found it.
struct Listener {
    port: u16,
    server_id: u32,
    server_qpn: u32,
    client_qpn: Option<u32>,
    /// The server's QP is connected to the client's, its receives posted.
    ready: bool,
}

pub(crate) struct Registry {
    running: [Option<RunStats>; MAX_THREADS],
    finished: [Option<RunStats>; KEEP_FINISHED],
    /// Where the next finished line goes (oldest first out).
    next_finished: usize,
    next_id: u32,
    listeners: [Option<Listener>; MAX_THREADS],
    /// Ends of `Resources::kping_pool` in use (bit = end).
    ends: u32,
}

/// What a client learns from a server's listener.
pub(crate) enum Rendezvous {
    /// No server on the port (yet).
    NoServer,
    /// The server's QPN: connect to it.
    Found(u32),
}

const _: () = assert!(KPING_ENDS <= 32 && MAX_THREADS * 2 <= KPING_ENDS);

impl Registry {
    pub(crate) const fn new() -> Self {
        Registry {
            running: [None; MAX_THREADS],
            finished: [None; KEEP_FINISHED],
            next_finished: 0,
            next_id: 0,
            listeners: [const { None }; MAX_THREADS],
            ends: 0,
        }
    }

    /// A slot for a new thread, with its number; `None` at `MAX_THREADS`.
    pub(crate) fn start(&mut self, role: Role) -> Option<(usize, u32)> {
        let slot = self.running.iter().position(Option::is_none)?;
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.running[slot] = Some(RunStats {
            id,
            role: Some(role),
            ..Default::default()
        });
        Some((slot, id))
    }

    pub(crate) fn stats_mut(&mut self, slot: usize) -> Option<&mut RunStats> {
        self.running.get_mut(slot)?.as_mut()
    }

    /// Thread `slot` ended with `result`: its line moves to the finished.
    pub(crate) fn finish(&mut self, slot: usize, result: i32) {
        if let Some(mut s) = self.running.get_mut(slot).and_then(Option::take) {
            s.result = Some(result);
            self.finished[self.next_finished] = Some(s);
            self.next_finished = (self.next_finished + 1) % KEEP_FINISHED;
        }
    }

    /// Every line: the running threads by number, then the finished, oldest first.
    pub(crate) fn lines(&self, mut f: impl FnMut(&RunStats)) {
        let mut running: [Option<&RunStats>; MAX_THREADS] = [None; MAX_THREADS];
        for (to, s) in running.iter_mut().zip(self.running.iter().flatten()) {
            *to = Some(s);
        }
        let mut shown = running;
        shown.sort_unstable_by_key(|s| s.map_or(u32::MAX, |s| s.id));
        shown.iter().flatten().for_each(|s| f(s));
        for i in 0..KEEP_FINISHED {
            if let Some(s) = &self.finished[(self.next_finished + i) % KEEP_FINISHED] {
                f(s);
            }
        }
    }

    /// A free end of the buffer pool.
    pub(crate) fn take_end(&mut self) -> Option<usize> {
        let end = (!self.ends).trailing_zeros() as usize;
        if end >= KPING_ENDS {
            return None;
        }
        self.ends |= 1 << end;
        Some(end)
    }

    pub(crate) fn put_end(&mut self, end: usize) {
        self.ends &= !(1 << end);
    }

    /// Server `server_id` (QP `server_qpn`) listens on `port`; `false` if
    /// another server does.
    pub(crate) fn listen(&mut self, port: u16, server_id: u32, server_qpn: u32) -> bool {
        if self.listeners.iter().flatten().any(|l| l.port == port) {
            return false;
        }
        if let Some(free) = self.listeners.iter_mut().find(|l| l.is_none()) {
            *free = Some(Listener {
                port,
                server_id,
                server_qpn,
                client_qpn: None,
                ready: false,
            });
            return true;
        }
        false
    }

    fn listener(&mut self, server_id: u32) -> Option<&mut Listener> {
        self.listeners
            .iter_mut()
            .flatten()
            .find(|l| l.server_id == server_id)
    }

    /// The server's view: the QPN of the client that found it, if one did.
    pub(crate) fn client_of(&mut self, server_id: u32) -> Option<u32> {
        self.listener(server_id)?.client_qpn
    }

    /// The server connected and posted its receives: the client may send.
    pub(crate) fn set_ready(&mut self, server_id: u32) {
        if let Some(l) = self.listener(server_id) {
            l.ready = true;
        }
    }

    /// The server stops listening (it ended, or a client is done with it).
    pub(crate) fn unlisten(&mut self, server_id: u32) {
        for l in self.listeners.iter_mut() {
            if l.as_ref().is_some_and(|l| l.server_id == server_id) {
                *l = None;
            }
        }
    }

    /// The client's view: claims the server on `port` that has no client
    /// yet for client QP `client_qpn`.
    pub(crate) fn connect(&mut self, port: u16, client_qpn: u32) -> (Rendezvous, u32) {
        match self
            .listeners
            .iter_mut()
            .flatten()
            .find(|l| l.port == port && l.client_qpn.is_none())
        {
            Some(l) => {
                l.client_qpn = Some(client_qpn);
                (Rendezvous::Found(l.server_qpn), l.server_id)
            }
            None => (Rendezvous::NoServer, 0),
        }
    }

    /// The client's view: `Some(true)` once server `server_id` is ready,
    /// `None` if it is gone.
    pub(crate) fn server_ready(&mut self, server_id: u32) -> Option<bool> {
        self.listener(server_id).map(|l| l.ready)
    }
}
