// SPDX-License-Identifier: GPL-2.0

//! The two endpoints' parts: the server answers, the client measures; and
//! the server in a forked process with `--procs`.

use std::{
    io::{self, Read, Write},
    os::unix::net::UnixStream,
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context, Result};

use crate::{
    analyzer::{Analyzer, PerPost},
    progress::{Printer, Progress},
    report,
    stats::perftest_lat,
};

use super::{
    link::PeerGone,
    message::{fill, Buffers, Side},
    output::{Measured, Output},
    peer::{Endpoints, Peer},
    plan::{Job, Plan, Setup},
};

/// The server: answers each job's messages until the client says done.
pub(super) fn server<D: Endpoints + ?Sized>(
    dev: &D,
    sock: UnixStream,
    timeout: Duration,
    setup: Setup,
) -> Result<()> {
    dev.with_endpoint(sock, timeout, setup, serve)
}

fn serve(ep: &mut dyn Peer) -> Result<()> {
    let mut bufs = Buffers::new();
    // Messages so far, over all jobs: each has its own payload.
    let mut seq = 0u32;
    loop {
        let mut msg = [0u8; Job::LEN];
        ep.link().recv(&mut msg)?;
        let Some(job) = Job::decode(&msg) else {
            return Ok(());
        };
        let op = ep.facts().op();
        if job.op != op {
            bail!(
                "the client asked for op {}, this endpoint was set up for {}",
                job.op.name(),
                op.name()
            );
        }
        let size = job.size as usize;
        ep.link().send(&[1])?;
        for _ in 0..job.iters {
            fill(&mut bufs.expect[..size], Side::Client, seq);
            ep.receive(&bufs.expect[..size], job.wait, seq, Side::Client)?;
            let len = ep.message(&mut bufs, size, Side::Server, seq)?;
            ep.send(&bufs.wqe[..len], job.path.flags())?;
            seq = seq.wrapping_add(1);
        }
    }
}

/// The client: runs the jobs, times them, reads the analyzer around each.
pub(super) fn client<D: Endpoints + ?Sized>(
    dev: &D,
    sock: UnixStream,
    timeout: Duration,
    plan: &Plan,
    out: &mut Output,
) -> Result<Vec<Measured>> {
    dev.with_endpoint(sock, timeout, plan.setup(), |ep| measure(ep, plan, out))
}

fn measure(ep: &mut dyn Peer, plan: &Plan, out: &mut Output) -> Result<Vec<Measured>> {
    let jobs = plan.jobs(ep.facts())?;
    out.start(ep.facts(), plan);
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
            out.config_header(job, plan, ep.facts());
        }
        let size = job.size as usize;
        let before = analyzer.as_ref().map(Analyzer::snapshot);
        ep.link().send(&job.encode())?;
        ep.link().recv(&mut [0u8])?;
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
    ep.link().send(&Job::DONE)?;
    out.analyzer_tables(&results, plan.op);
    Ok(results)
}

/// The client's error, unless it only saw the server go: then the
/// server's.
pub(super) fn combine<T>(client: Result<T>, server: Result<()>) -> Result<T> {
    match (client, server) {
        (Err(c), Err(s)) if c.downcast_ref::<PeerGone>().is_some() => Err(s.context("server")),
        (Err(c), _) => Err(c),
        (Ok(_), Err(s)) => Err(s.context("server")),
        (Ok(v), Ok(())) => Ok(v),
    }
}

/// The server in a child process; it hands its error, if any, back over a
/// second socket, and its exit status says how it ended.
pub(super) fn run_forked<D: Endpoints + ?Sized>(
    dev: &D,
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
            let rc = match server(dev, b, timeout, plan.setup()) {
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
            let r = client(dev, a, timeout, plan, out);
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

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Error;

    #[test]
    fn the_server_s_error_wins_over_the_client_seeing_it_go() {
        let r: Result<()> = combine(Err(Error::new(PeerGone)), Err(anyhow!("CONNECT_QP: boom")));
        assert_eq!(format!("{:#}", r.unwrap_err()), "server: CONNECT_QP: boom");
        let r: Result<()> = combine(Err(anyhow!("payload mismatch")), Err(Error::new(PeerGone)));
        assert_eq!(r.unwrap_err().to_string(), "payload mismatch");
    }
}
