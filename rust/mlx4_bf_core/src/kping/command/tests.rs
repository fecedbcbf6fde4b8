// SPDX-License-Identifier: GPL-2.0

//! Tests of [`super`]: each option, the defaults, and commands read back.

extern crate std;

use super::*;
use proptest::prelude::*;
use std::string::{String, ToString};
use std::vec::Vec;

/// An adapter whose BlueFlame posts carry at most 200 payload bytes.
pub(in super::super) const LIMITS: Limits = Limits {
    min_size: 1,
    max_size: 65536,
    max_bf_size: 200,
};

fn parse(s: &str) -> Result<Command, Error> {
    Command::parse(s.as_bytes(), &LIMITS)
}

const LOOP: Command = Command {
    role: Role::Loop,
    count: None,
    size: DEFAULT_SIZE,
    validate: false,
    verbose: false,
    mem_mode: MemMode::Dma,
    path: Path::Bf,
    wait: Wait::Busy,
};

#[test]
fn defaults() {
    assert_eq!(parse("loop"), Ok(LOOP));
    assert_eq!(
        LOOP.to_string(),
        "loop,size=64,mem_mode=dma,path=bf,wait=busy"
    );
    let explicit = "loop,size=64,mem_mode=dma,path=bf,wait=busy";
    assert_eq!(parse(explicit), Ok(LOOP));
}

#[test]
fn roles_and_ports() {
    let server = parse("server,port=9999").unwrap();
    assert_eq!(server.role, Role::Server { port: 9999 });
    assert_eq!((server.port(), server.role.name()), (Some(9999), "server"));
    // Any order; the whole port range.
    assert_eq!(
        parse("port=0,client").unwrap().role,
        Role::Client { port: 0 }
    );
    assert_eq!(
        parse("client,port=65535").unwrap().role,
        Role::Client { port: 65535 }
    );
    assert_eq!(parse("loop").unwrap().port(), None);
}

#[test]
fn count() {
    let count = |s| parse(s).unwrap().count.map(NonZeroU32::get);
    assert_eq!(count("loop"), None);
    assert_eq!(count("loop,count=1"), Some(1));
    assert_eq!(count("loop,count=0x10"), Some(16));
    assert_eq!(count("loop,count=4294967295"), Some(u32::MAX));
}

#[test]
fn size() {
    let size = |s, limits| Command::parse(s, &limits).map(|c| c.size);
    assert_eq!(size(b"loop,size=1", LIMITS), Ok(1));
    assert_eq!(size(b"loop,size=200", LIMITS), Ok(200));
    assert_eq!(size(b"loop,size=65536,path=db", LIMITS), Ok(65536));
    // The default, clamped into the adapter's range.
    let at_least = |min_size| Limits { min_size, ..LIMITS };
    assert_eq!(size(b"loop", at_least(128)), Ok(128));
    let at_most = |max_size| Limits { max_size, ..LIMITS };
    assert_eq!(size(b"loop", at_most(32)), Ok(32));
}

#[test]
fn flags() {
    let c = parse("loop,validate").unwrap();
    assert!(c.validate && !c.verbose);
    let c = parse("verbose,loop").unwrap();
    assert!(!c.validate && c.verbose);
    let c = parse("loop,verbose,validate").unwrap();
    assert_eq!(
        c.to_string(),
        "loop,size=64,validate,verbose,mem_mode=dma,path=bf,wait=busy"
    );
}

#[test]
fn keywords() {
    let c = parse("loop,mem_mode=reg,path=db,wait=event").unwrap();
    assert_eq!(
        (c.mem_mode, c.path, c.wait),
        (MemMode::Reg, Path::Db, Wait::Event)
    );
    assert_eq!(super::super::options::keywords("wait"), ["busy", "event"]);
    assert!(super::super::options::keywords("port").is_empty());
}

#[test]
fn numbers() {
    for (text, n) in [
        ("0", Some(0)),
        ("10", Some(10)),
        ("0x1F", Some(31)),
        ("0XfF", Some(255)),
        ("18446744073709551615", Some(u64::MAX)),
        ("0xffffffffffffffff", Some(u64::MAX)),
        ("18446744073709551616", None),
        ("0x10000000000000000", None),
        ("010", None),
        ("00", None),
        ("0x", None),
        ("", None),
        ("+1", None),
        ("-1", None),
        ("1 ", None),
        ("1e3", None),
        ("0x1g", None),
    ] {
        assert_eq!(number(text.as_bytes()), n, "{text:?}");
    }
}

#[test]
fn newline_and_empty_options() {
    let want = Ok(Command {
        role: Role::Server { port: 1 },
        ..LOOP
    });
    assert_eq!(parse("server,port=1\n"), want);
    assert_eq!(parse(",,server,,port=1,\n"), want);
    // One newline only; no carriage return.
    for s in ["server,port=1\n\n", "server,port=1\r\n"] {
        assert!(matches!(parse(s), Err(Error::BadNumber { .. })), "{s:?}");
    }
}

#[test]
fn max_len_is_the_whole_write() {
    let mut s = String::from("loop");
    s.extend(core::iter::repeat_n(',', MAX_LEN - 5));
    s.push('\n');
    assert_eq!(s.len(), MAX_LEN);
    assert_eq!(parse(&s), Ok(LOOP));
    // The longest command there is fits with room to spare.
    let longest = Command {
        role: Role::Client { port: 65535 },
        count: NonZeroU32::new(u32::MAX),
        size: u32::MAX,
        validate: true,
        verbose: true,
        wait: Wait::Event,
        ..LOOP
    };
    assert!(longest.to_string().len() < MAX_LEN / 2);
}

/// Limits, and a command they allow.
fn limits_and_command() -> impl Strategy<Value = (Limits, Command)> {
    (0u32..300, 0u32..100_000, 0u32..1000)
        .prop_map(|(min_size, span, max_bf_size)| Limits {
            min_size,
            max_size: min_size + span,
            max_bf_size,
        })
        .prop_flat_map(|l| {
            let role = prop_oneof![
                any::<u16>().prop_map(|port| Role::Server { port }),
                any::<u16>().prop_map(|port| Role::Client { port }),
                Just(Role::Loop),
            ];
            let modes = (any::<bool>(), any::<bool>(), any::<bool>());
            let size = l.min_size..=l.max_size;
            (
                Just(l),
                role,
                any::<Option<NonZeroU32>>(),
                size,
                any::<(bool, bool)>(),
                modes,
            )
        })
        .prop_map(
            |(l, role, count, size, (validate, verbose), (reg, db, event))| {
                let cmd = Command {
                    role,
                    count,
                    size,
                    validate,
                    verbose,
                    mem_mode: if reg { MemMode::Reg } else { MemMode::Dma },
                    // BlueFlame only where it fits.
                    path: if db || size > l.max_bf_size {
                        Path::Db
                    } else {
                        Path::Bf
                    },
                    wait: if event { Wait::Event } else { Wait::Busy },
                };
                (l, cmd)
            },
        )
}

/// Options and near misses, valid or not.
fn token() -> impl Strategy<Value = String> {
    let word = prop::sample::select(
        &[
            "validate",
            "verbose",
            "mem_mode=dma",
            "mem_mode=reg",
            "path=bf",
            "path=db",
            "wait=busy",
            "wait=event",
            "",
            "server",
            "port=",
            "verbose=1",
            "mem_mode=mr",
        ][..],
    );
    let name = prop::sample::select(&["count", "size"][..]);
    let value = prop_oneof![
        8 => (0u64..300).prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| std::format!("{n:#x}")),
        1 => Just(String::from("010")),
    ];
    prop_oneof![
        3 => word.prop_map(String::from),
        2 => (name, value).prop_map(|(n, v)| std::format!("{n}={v}")),
    ]
}

/// Mostly a role and its port, then some options, in any order.
fn tokens() -> impl Strategy<Value = Vec<String>> {
    let role = prop::sample::select(&["server", "client", "loop", "loop", ""][..]);
    let port = prop::option::weighted(0.7, 0u32..70_000);
    let rest = prop::collection::vec(token(), 0..6);
    (role, port, rest)
        .prop_map(|(role, port, mut v)| {
            v.push(role.into());
            v.extend(port.map(|p| std::format!("port={p}")));
            v
        })
        .prop_shuffle()
}

proptest! {
    #[test]
    fn a_command_reads_back_as_itself((limits, cmd) in limits_and_command()) {
        let text = cmd.to_string();
        prop_assert!(text.len() <= MAX_LEN);
        prop_assert_eq!(Command::parse(text.as_bytes(), &limits), Ok(cmd));
        let line = text + "\n";
        prop_assert_eq!(Command::parse(line.as_bytes(), &limits), Ok(cmd));
    }

    #[test]
    fn what_parses_keeps_the_rules(tokens in tokens()) {
        let text = tokens.join(",");
        if let Ok(cmd) = parse(&text) {
            prop_assert!(cmd.size >= LIMITS.min_size && cmd.size <= LIMITS.max_size);
            prop_assert!(cmd.path == Path::Db || cmd.size <= LIMITS.max_bf_size);
            prop_assert!(cmd.count.is_none() || text.contains("count="));
            prop_assert_eq!(parse(&cmd.to_string()), Ok(cmd));
            // Each option once: the options, in any order, are the same command.
            let mut rev: Vec<&str> = text.split(',').collect();
            rev.reverse();
            prop_assert_eq!(parse(&rev.join(",")), Ok(cmd));
        }
    }
}
