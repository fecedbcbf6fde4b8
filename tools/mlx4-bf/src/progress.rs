// SPDX-License-Identifier: GPL-2.0

//! Progress on stderr, and the lines on stdout printed around it.

use std::io::{self, IsTerminal};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Is stderr an interactive terminal, one that knows its width? A serial
/// console (the test bed's guest) is a terminal of no size: there a bar's
/// redraws would only fill the log.
fn interactive_stderr() -> bool {
    if !io::stderr().is_terminal() {
        return false;
    }
    // SAFETY: TIOCGWINSZ fills a winsize.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) };
    rc == 0 && ws.ws_col > 0
}

/// Progress on stderr: an indicatif bar on an interactive terminal; in a
/// log (or on a serial console) one line per quarter, or nothing.
pub struct Progress {
    bar: ProgressBar,
    tty: bool,
    /// Without the bar: the last quarter a line was printed for.
    shown: u64,
    what: &'static str,
}

impl Progress {
    pub fn new(total: usize, what: &'static str) -> Self {
        let tty = interactive_stderr();
        let bar = if tty {
            let style = ProgressStyle::with_template(
                "{prefix}: {percent:>3}% [{bar:30}] {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr())
                .with_style(style)
                .with_prefix(what)
        } else {
            ProgressBar::hidden()
        };
        bar.set_length(total as u64);
        Progress {
            bar,
            tty,
            shown: 0,
            what,
        }
    }

    /// `done` of the total are done; `msg` says what runs now.
    pub fn step(&mut self, done: usize, msg: &str) {
        self.bar.set_position(done as u64);
        if self.tty {
            self.bar.set_message(msg.to_owned());
            return;
        }
        let total = self.bar.length().unwrap_or(0).max(1);
        let pct = done as u64 * 100 / total;
        if pct >= self.shown + 25 || done as u64 == total {
            eprintln!("{}: {pct}% ({done}/{total})", self.what);
            self.shown = pct;
        }
    }

    /// A handle that prints a line on stdout without tearing the bar.
    pub fn printer(&self) -> Printer {
        Printer(self.tty.then(|| self.bar.clone()))
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// Prints lines on stdout, hiding the progress bar meanwhile.
#[derive(Clone, Default)]
pub struct Printer(Option<ProgressBar>);

impl Printer {
    pub fn line(&self, s: &str) {
        match &self.0 {
            Some(bar) => bar.suspend(|| println!("{s}")),
            None => println!("{s}"),
        }
    }
}
