// SPDX-License-Identifier: GPL-2.0

//! The pure parts of the kernel ping, a ping-pong test in the manner of
//! krping (the OFED `rdma-krping` module): a command written to a debugfs
//! file starts it, and each thread keeps latency statistics. The command's
//! grammar ([`command`], its option table in `options`, its refusals in
//! [`command_error`]) and the statistics ([`histogram`]) are here so that
//! every input and every sample can be tested on the host; the driver shell
//! owns the queues, the threads and the file.

pub mod command;
pub mod command_error;
pub mod histogram;
mod options;
