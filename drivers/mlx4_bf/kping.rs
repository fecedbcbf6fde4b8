// SPDX-License-Identifier: GPL-2.0

//! The kernel ping, in the manner of krping: a command written to
//! `/sys/kernel/debug/mlx4_bf<N>/device/kping` runs a ping-pong test in the
//! writing thread, which blocks until it ends; reading the file prints a
//! line of statistics per thread, running or finished. See
//! Documentation/mlx4_bf.rst ("Kernel ping").
//!
//! Each end is a context of its own with one QP (`end.rs`): the ping is a
//! user of the adapter layer beside the RDMA provider, posting through
//! `KernelContext::post_send()` and the BlueFlame writer QP_POST uses. The command's
//! grammar and the latency histogram are the pure `kping_rules`.

use kernel::{
    fmt, new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    uaccess::UserSliceReader,
};

use crate::{
    adapter::Adapter,
    geometry::KPING_BUF_BYTES,
    kping_rules::command::{Command, Limits, Role, MAX_LEN},
    wqe_build,
};

mod end;
mod registry;
mod round_trip;

use registry::{Registry, RunStats, MAX_THREADS};

/// Message tags: what a SEND between the ends says.
const TAG_SOURCE: u32 = 1;
const TAG_SINK: u32 = 2;
const TAG_GO: u32 = 3;
const TAG_DONE: u32 = 4;
/// Bytes of a message: tag, rkey, size, zero, address (krping's
/// `struct krping_rdma_info` and a tag).
const MSG_LEN: usize = 24;

/// One SEND's content: a buffer the peer may read or write, or a word.
#[derive(Clone, Copy)]
struct Msg {
    tag: u32,
    rkey: u32,
    size: u32,
    addr: u64,
}

impl Msg {
    const fn word(tag: u32) -> Msg {
        Msg {
            tag,
            rkey: 0,
            size: 0,
            addr: 0,
        }
    }

    fn encode(&self) -> [u8; MSG_LEN] {
        let mut b = [0u8; MSG_LEN];
        b[0..4].copy_from_slice(&self.tag.to_be_bytes());
        b[4..8].copy_from_slice(&self.rkey.to_be_bytes());
        b[8..12].copy_from_slice(&self.size.to_be_bytes());
        b[16..24].copy_from_slice(&self.addr.to_be_bytes());
        b
    }

    fn decode(b: &[u8]) -> Msg {
        let word = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        Msg {
            tag: word(0),
            rkey: word(4),
            size: word(8),
            addr: (u64::from(word(16)) << 32) | u64::from(word(20)),
        }
    }
}

/// An adapter's kernel pings.
#[pin_data]
pub(crate) struct Kping {
    adapter: Arc<Adapter>,
    /// `mlx4_bf<N>`, for the statistics lines and the log.
    name: &'static CStr,
    #[pin]
    registry: Mutex<Registry>,
    /// Held only to sleep on `Adapter::events` (`wait=event`) and on the
    /// rendezvous.
    #[pin]
    sleep: Mutex<()>,
}

impl Kping {
    pub(crate) fn new(adapter: Arc<Adapter>, name: &'static CStr) -> impl PinInit<Self> {
        pin_init!(Kping {
            adapter,
            name,
            registry <- new_mutex!(Registry::new()),
            sleep <- new_mutex!(()),
        })
    }

    pub(crate) fn adapter(&self) -> &Arc<Adapter> {
        &self.adapter
    }

    /// What this adapter allows a command.
    fn limits(&self) -> Limits {
        let bf = self.adapter.caps().bf_buf_size() as usize;
        // The largest RDMA WRITE whose inline WQE fits a BlueFlame buffer
        // (a SEND of as many bytes fits too: it has no address segment).
        let max_bf = (0..=bf)
            .rev()
            .find(|&n| wqe_build::inline_size16(n, true) * 16 <= bf)
            .unwrap_or(0);
        Limits {
            min_size: 1,
            max_size: KPING_BUF_BYTES as u32,
            max_bf_size: max_bf as u32,
        }
    }

    /// A write to the command file: parses the command and runs it here;
    /// returns when it ends.
    pub(crate) fn write(this: &Arc<Kping>, reader: &mut UserSliceReader) -> Result {
        let name = this.name;
        let len = reader.len();
        let mut text = [0u8; MAX_LEN];
        if len > MAX_LEN {
            pr_warn!("{name}: kping: command of {len} bytes, at most {MAX_LEN}\n");
            return Err(EINVAL);
        }
        reader.read_slice(&mut text[..len])?;
        let cmd = Command::parse(&text[..len], &this.limits()).map_err(|e| {
            pr_warn!("{name}: kping: {}\n", format_args!("{e}"));
            EINVAL
        })?;
        let Some((slot, id)) = this.registry.lock().start(cmd.role) else {
            pr_warn!("{name}: kping: {MAX_THREADS} commands run already, the most there may be\n");
            return Err(EBUSY);
        };
        if cmd.verbose {
            pr_info!("{name}: kping {id}: {}\n", format_args!("{cmd}"));
        }
        let result = round_trip::run(this, &cmd, slot, id);
        let code = match &result {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        };
        this.registry.lock().finish(slot, code);
        result
    }

    /// The file's content: one line per thread.
    pub(crate) fn show(this: &Arc<Kping>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut lines = KVec::<RunStats>::new();
        this.registry.lock().lines(|s| {
            let _ = lines.push(*s, GFP_KERNEL);
        });
        for s in &lines {
            show_line(this.name, s, f)?;
        }
        Ok(())
    }
}

/// krping's columns (number-device, then bytes and messages sent,
/// received, RDMA written and RDMA read), the round-trip latency in ns
/// (min, median, p99, max), the median in-kernel post of an RDMA WRITE in
/// ns, the role and the result (`listening` for a server without its
/// client, `running`, or the write's return: 0 or a negative errno).
fn show_line(name: &CStr, s: &RunStats, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let [min, median, p99, max] = s.latency;
    write!(
        f,
        "{}-{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} ",
        s.id,
        name.to_str().unwrap_or("?"),
        s.send_bytes,
        s.send_msgs,
        s.recv_bytes,
        s.recv_msgs,
        s.write_bytes,
        s.write_msgs,
        s.read_bytes,
        s.read_msgs,
        min,
        median,
        p99,
        max,
        s.write_post,
        s.role.map_or("?", |r: Role| r.name()),
    )?;
    match s.result {
        None if s.listening => writeln!(f, "listening"),
        None => writeln!(f, "running"),
        Some(code) => writeln!(f, "{code}"),
    }
}
