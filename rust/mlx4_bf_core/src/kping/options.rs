// SPDX-License-Identifier: GPL-2.0

//! The kernel ping command's option table: each option's name, what it
//! sets and what value it takes. The parser ([`super::command`]) reads
//! it, and so does an error that lists the keywords an option accepts
//! ([`super::command_error`]); neither needs the other for it.

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    Server,
    Client,
    Loop,
    Port,
    Count,
    Size,
    Validate,
    Verbose,
    MemMode,
    Path,
    Wait,
}

#[derive(Clone, Copy)]
pub(super) enum Arg {
    Flag,
    Number,
    /// One of these keywords; the value is its index.
    Keyword(&'static [&'static str]),
}

/// The option table: name, what it sets, what value it takes.
pub(super) const OPTIONS: [(&str, Key, Arg); 11] = [
    ("server", Key::Server, Arg::Flag),
    ("client", Key::Client, Arg::Flag),
    ("loop", Key::Loop, Arg::Flag),
    ("port", Key::Port, Arg::Number),
    ("count", Key::Count, Arg::Number),
    ("size", Key::Size, Arg::Number),
    ("validate", Key::Validate, Arg::Flag),
    ("verbose", Key::Verbose, Arg::Flag),
    ("mem_mode", Key::MemMode, Arg::Keyword(&["dma", "reg"])),
    ("path", Key::Path, Arg::Keyword(&["bf", "db"])),
    ("wait", Key::Wait, Arg::Keyword(&["busy", "event"])),
];

/// The keywords option `name` accepts (empty for the others).
pub(super) fn keywords(name: &str) -> &'static [&'static str] {
    for (n, _, arg) in OPTIONS {
        if let (true, Arg::Keyword(k)) = (n == name, arg) {
            return k;
        }
    }
    &[]
}
