// SPDX-License-Identifier: GPL-2.0

//! The kernel ping's command line, in krping's syntax: the bytes written to
//! the adapter's debugfs command file, e.g.
//! `client,port=9999,count=1000,size=64,validate` or `loop,path=db`.
//!
//! Options are separated by commas; an option is a name, or `name=value`.
//! Where this is stricter than krping (`krping_getopt()` / `krping_doit()`),
//! so that a typo is an error and not a different test:
//!
//! - names and keywords match exactly: no spaces anywhere (`server, port=1`
//!   names the option `" port"`), and `mem_mode=dmax` is not `dma`;
//! - an option given twice, or two roles, is an error (krping: the last
//!   wins); a flag given a value (`validate=1`) and an empty value
//!   (`port=`, which krping reads as 0) are errors;
//! - numbers are decimal or `0x` hexadecimal; a leading zero (`010`, octal
//!   to krping) is an error, and so is anything beyond 64 bits;
//! - `count=0` is out of range: no `count` means until interrupted (krping's
//!   `count=0`);
//! - `server` and `client` need `port=N` (krping defaults it); `loop`, both
//!   ends on this adapter, takes none.
//!
//! As krping: empty options (`server,,port=1,`) are skipped, and one
//! trailing newline (`echo`'s) is allowed. The whole write, newline
//! included, is at most [`MAX_LEN`] bytes. Every error is `-EINVAL` to the
//! writer; its [`Display`](core::fmt::Display) is one line naming the
//! problem, for the kernel log.

use core::fmt;
use core::num::NonZeroU32;

pub use super::command_error::{Error, Word};
use super::options::{Arg, Key, OPTIONS};

/// Longest command, trailing newline included.
pub const MAX_LEN: usize = 256;
/// Payload bytes when `size` is not given (clamped into the [`Limits`]).
pub const DEFAULT_SIZE: u32 = 64;

/// Which end(s) of the ping this adapter runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Server {
        port: u16,
    },
    Client {
        port: u16,
    },
    /// Both ends, one write: no port.
    Loop,
}

/// How the payload buffers are given to the adapter (krping's `mem_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemMode {
    /// The kernel's reserved lkey: DMA addresses, no region.
    Dma,
    /// A registered memory region.
    Reg,
}

/// How a send is posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// The WQE written to the BlueFlame page.
    Bf,
    /// The WQE in the ring, then the doorbell.
    Db,
}

/// How completions are awaited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Polling the CQ.
    Busy,
    /// Sleeping until the completion event.
    Event,
}

/// What the adapter allows; the driver fills it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub min_size: u32,
    pub max_size: u32,
    /// Largest payload a BlueFlame post carries inline (`path=bf`).
    pub max_bf_size: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Command {
    pub role: Role,
    /// Round trips; `None`: until interrupted.
    pub count: Option<NonZeroU32>,
    /// Payload bytes.
    pub size: u32,
    /// Check every payload received.
    pub validate: bool,
    /// Log every round trip.
    pub verbose: bool,
    pub mem_mode: MemMode,
    pub path: Path,
    pub wait: Wait,
}

/// Decimal, or hexadecimal after `0x`/`0X`; no sign, no leading zeros,
/// at most 64 bits.
fn number(text: &[u8]) -> Option<u64> {
    let (digits, radix) = match text {
        [b'0', b'x' | b'X', rest @ ..] => (rest, 16),
        [b'0', _, ..] | [] => return None,
        _ => (text, 10),
    };
    if digits.is_empty() {
        return None;
    }
    let mut n = 0u64;
    for &b in digits {
        let d = (b as char).to_digit(radix)?;
        n = n.checked_mul(u64::from(radix))?.checked_add(u64::from(d))?;
    }
    Some(n)
}

/// `value` if it is in `min..=max`.
fn in_range(name: &'static str, value: u64, min: u64, max: u64) -> Result<u64, Error> {
    if value < min || value > max {
        return Err(Error::OutOfRange {
            name,
            value,
            min,
            max,
        });
    }
    Ok(value)
}

impl Command {
    /// Parses one write to the command file.
    pub fn parse(input: &[u8], limits: &Limits) -> Result<Command, Error> {
        if input.len() > MAX_LEN {
            return Err(Error::TooLong {
                len: input.len(),
                max: MAX_LEN,
            });
        }
        let line = input.strip_suffix(b"\n").unwrap_or(input);
        let mut role: Option<(&'static str, Key)> = None;
        let (mut port, mut count, mut size) = (None, None, None);
        let mut cmd = Command {
            role: Role::Loop,
            count: None,
            size: 0,
            validate: false,
            verbose: false,
            mem_mode: MemMode::Dma,
            path: Path::Bf,
            wait: Wait::Busy,
        };
        let mut seen = 0u16;
        for token in line.split(|&b| b == b',').filter(|t| !t.is_empty()) {
            let mut parts = token.splitn(2, |&b| b == b'=');
            let name = parts.next().unwrap_or_default();
            let value = parts.next();
            let Some(&(name, key, arg)) = OPTIONS.iter().find(|o| o.0.as_bytes() == name) else {
                return Err(Error::UnknownOption(Word::new(name)));
            };
            let bit = 1u16 << key as u16;
            if seen & bit != 0 {
                return Err(Error::DuplicateOption(name));
            }
            seen |= bit;
            let value = match (arg, value) {
                (Arg::Flag, None) => 0,
                (Arg::Flag, Some(_)) => return Err(Error::UnexpectedOperand(name)),
                (_, None | Some([])) => return Err(Error::MissingOperand(name)),
                (Arg::Number, Some(v)) => number(v).ok_or(Error::BadNumber {
                    name,
                    value: Word::new(v),
                })?,
                (Arg::Keyword(words), Some(v)) => {
                    match words.iter().position(|w| w.as_bytes() == v) {
                        Some(i) => i as u64,
                        None => {
                            return Err(Error::BadKeyword {
                                name,
                                value: Word::new(v),
                            })
                        }
                    }
                }
            };
            match key {
                Key::Server | Key::Client | Key::Loop => match role {
                    Some((first, _)) => return Err(Error::TwoRoles(first, name)),
                    None => role = Some((name, key)),
                },
                Key::Port => port = Some(in_range(name, value, 0, u16::MAX.into())? as u16),
                Key::Count => {
                    let n = in_range(name, value, 1, u32::MAX.into())? as u32;
                    count = NonZeroU32::new(n);
                }
                Key::Size => {
                    let (min, max) = (limits.min_size.into(), limits.max_size.into());
                    size = Some(in_range(name, value, min, max)? as u32);
                }
                Key::Validate => cmd.validate = true,
                Key::Verbose => cmd.verbose = true,
                // `value`: the keyword's index in the table.
                Key::MemMode if value == 0 => cmd.mem_mode = MemMode::Dma,
                Key::MemMode => cmd.mem_mode = MemMode::Reg,
                Key::Path if value == 0 => cmd.path = Path::Bf,
                Key::Path => cmd.path = Path::Db,
                Key::Wait if value == 0 => cmd.wait = Wait::Busy,
                Key::Wait => cmd.wait = Wait::Event,
            }
        }
        cmd.role = match (role, port) {
            (None, _) => return Err(Error::NoRole),
            (Some((_, Key::Loop)), None) => Role::Loop,
            (Some((_, Key::Loop)), Some(_)) => return Err(Error::PortWithLoop),
            (Some((name, _)), None) => return Err(Error::PortRequired(name)),
            (Some((_, Key::Server)), Some(port)) => Role::Server { port },
            (Some(_), Some(port)) => Role::Client { port },
        };
        cmd.count = count;
        cmd.size = match size {
            Some(size) => size,
            None => {
                // Only limits with min_size > max_size leave it out of range.
                let size = DEFAULT_SIZE.max(limits.min_size).min(limits.max_size);
                let (min, max) = (limits.min_size.into(), limits.max_size.into());
                in_range("size", size.into(), min, max)? as u32
            }
        };
        if cmd.path == Path::Bf && cmd.size > limits.max_bf_size {
            return Err(Error::BfTooLarge {
                size: cmd.size,
                max: limits.max_bf_size,
            });
        }
        Ok(cmd)
    }

    /// The port of a server or client.
    pub fn port(&self) -> Option<u16> {
        match self.role {
            Role::Server { port } | Role::Client { port } => Some(port),
            Role::Loop => None,
        }
    }
}

impl Role {
    /// Its option's name.
    pub fn name(&self) -> &'static str {
        match self {
            Role::Server { .. } => "server",
            Role::Client { .. } => "client",
            Role::Loop => "loop",
        }
    }
}

/// The command in its own syntax, every setting spelled out: parsing it
/// again (with the same [`Limits`]) gives the same command.
impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.role.name())?;
        if let Some(port) = self.port() {
            write!(f, ",port={port}")?;
        }
        if let Some(count) = self.count {
            write!(f, ",count={count}")?;
        }
        write!(f, ",size={}", self.size)?;
        if self.validate {
            f.write_str(",validate")?;
        }
        if self.verbose {
            f.write_str(",verbose")?;
        }
        let mem_mode = match self.mem_mode {
            MemMode::Dma => "dma",
            MemMode::Reg => "reg",
        };
        let path = match self.path {
            Path::Bf => "bf",
            Path::Db => "db",
        };
        let wait = match self.wait {
            Wait::Busy => "busy",
            Wait::Event => "event",
        };
        write!(f, ",mem_mode={mem_mode},path={path},wait={wait}")
    }
}

#[cfg(test)]
pub(super) mod tests;
