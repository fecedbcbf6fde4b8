// SPDX-License-Identifier: GPL-2.0

//! Why a kernel ping command was refused ([`super::command`]): each variant
//! names the option and the problem, so the one line the driver logs says
//! what to fix. The writer gets `-EINVAL` for all of them. Option names are
//! the option table's `&'static str`; what the writer typed is kept in a
//! fixed-size [`Word`], as nothing here allocates.

use core::fmt;

use super::options::keywords;

/// Bytes of the writer's text an error keeps.
pub const WORD_LEN: usize = 24;

/// A copy of (the start of) some bytes the writer typed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Word {
    bytes: [u8; WORD_LEN],
    len: u8,
    truncated: bool,
}

impl Word {
    /// The first [`WORD_LEN`] bytes of `text`.
    pub fn new(text: &[u8]) -> Word {
        let mut bytes = [0; WORD_LEN];
        let len = text.len().min(WORD_LEN);
        for (b, t) in bytes.iter_mut().zip(text) {
            *b = *t;
        }
        Word {
            bytes,
            len: len as u8,
            truncated: text.len() > WORD_LEN,
        }
    }

    /// The bytes kept.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or_default()
    }

    /// Was the text longer than [`WORD_LEN`]?
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

/// In single quotes; bytes other than printable ASCII, `'` and `\` as
/// `\xNN`; `...` after a truncated word.
impl fmt::Display for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("'")?;
        for &b in self.as_bytes() {
            match b {
                b'\'' | b'\\' => write!(f, "\\x{b:02x}")?,
                b' '..=b'~' => write!(f, "{}", b as char)?,
                _ => write!(f, "\\x{b:02x}")?,
            }
        }
        f.write_str(if self.truncated { "'..." } else { "'" })
    }
}

impl fmt::Debug for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The write is longer than `max` bytes.
    TooLong {
        len: usize,
        max: usize,
    },
    /// No option has this name.
    UnknownOption(Word),
    /// `name` needs `name=value` (a value, not empty).
    MissingOperand(&'static str),
    /// The flag `name` was given a value.
    UnexpectedOperand(&'static str),
    /// `name`'s value is not a number (decimal or `0x` hex, no leading
    /// zero, at most 64 bits).
    BadNumber {
        name: &'static str,
        value: Word,
    },
    /// `name`'s value is not one of its keywords.
    BadKeyword {
        name: &'static str,
        value: Word,
    },
    OutOfRange {
        name: &'static str,
        value: u64,
        min: u64,
        max: u64,
    },
    DuplicateOption(&'static str),
    /// None of `server`, `client`, `loop`.
    NoRole,
    /// Two of them, in the order given.
    TwoRoles(&'static str, &'static str),
    /// `server` or `client` without `port=`.
    PortRequired(&'static str),
    /// `loop` with `port=`.
    PortWithLoop,
    /// `path=bf` cannot carry `size` bytes.
    BfTooLarge {
        size: u32,
        max: u32,
    },
}

/// One line, no newline.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::TooLong { len, max } => write!(f, "command of {len} bytes, at most {max}"),
            Error::UnknownOption(word) => write!(f, "unknown option {word}"),
            Error::MissingOperand(name) => write!(f, "{name} needs a value: {name}=..."),
            Error::UnexpectedOperand(name) => write!(f, "{name} takes no value"),
            Error::BadNumber { name, value } => write!(
                f,
                "{name}={value}: not a number (decimal or 0x hex, no leading zero)"
            ),
            Error::BadKeyword { name, value } => {
                write!(f, "{name}={value}: must be one of ")?;
                for (i, k) in keywords(name).iter().enumerate() {
                    write!(f, "{}{k}", if i > 0 { ", " } else { "" })?;
                }
                Ok(())
            }
            Error::OutOfRange {
                name,
                value,
                min,
                max,
            } => write!(f, "{name}={value}: out of range {min}..={max}"),
            Error::DuplicateOption(name) => write!(f, "{name} given twice"),
            Error::NoRole => f.write_str("no role: server, client or loop"),
            Error::TwoRoles(a, b) => write!(f, "two roles: {a} and {b}"),
            Error::PortRequired(role) => write!(f, "{role} needs port=N"),
            Error::PortWithLoop => f.write_str("loop takes no port"),
            Error::BfTooLarge { size, max } => write!(
                f,
                "size={size}: BlueFlame carries at most {max} bytes (path=db for more)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::command::tests::LIMITS;
    use super::super::command::{Command, Limits, MAX_LEN};
    use super::*;
    use proptest::prelude::*;
    use std::string::{String, ToString};

    /// The error of `s` and its line.
    fn refused(s: &str) -> (Error, String) {
        let e = Command::parse(s.as_bytes(), &LIMITS).unwrap_err();
        (e, e.to_string())
    }

    #[test]
    fn too_long() {
        let s = "loop".to_string() + &",".repeat(MAX_LEN - 3);
        let (e, line) = refused(&s);
        assert_eq!(e, Error::TooLong { len: 257, max: 256 });
        assert_eq!(line, "command of 257 bytes, at most 256");
    }

    #[test]
    fn unknown_option() {
        let (e, line) = refused("server,port=1,bogus");
        assert_eq!(e, Error::UnknownOption(Word::new(b"bogus")));
        assert_eq!(line, "unknown option 'bogus'");
        // No spaces around commas, no case folding, no prefixes.
        assert_eq!(refused("server, port=1").1, "unknown option ' port'");
        assert_eq!(refused("Server").1, "unknown option 'Server'");
        assert_eq!(refused("serv").1, "unknown option 'serv'");
        // What cannot be printed is escaped; a long name is cut.
        assert_eq!(refused("loop\0").1, "unknown option 'loop\\x00'");
        assert_eq!(refused("it's").1, "unknown option 'it\\x27s'");
        let (e, line) = refused(&"a".repeat(30));
        let Error::UnknownOption(word) = e else {
            panic!("{e:?}")
        };
        assert!(word.is_truncated() && word.as_bytes() == [b'a'; WORD_LEN]);
        assert_eq!(
            line,
            std::format!("unknown option '{}'...", "a".repeat(WORD_LEN))
        );
    }

    #[test]
    fn missing_and_unexpected_operands() {
        for s in ["server,port", "server,port=", "loop,mem_mode"] {
            assert!(matches!(refused(s).0, Error::MissingOperand(_)), "{s}");
        }
        assert_eq!(refused("loop,size=").1, "size needs a value: size=...");
        for s in ["loop,validate=1", "loop,validate=", "server=1,port=2"] {
            assert!(matches!(refused(s).0, Error::UnexpectedOperand(_)), "{s}");
        }
        assert_eq!(refused("loop,verbose=yes").1, "verbose takes no value");
    }

    #[test]
    fn bad_number() {
        for s in [
            "port=abc", "port=010", "port=-1", "port=+1", "port=0x", "port=1 ",
        ] {
            let (e, _) = refused(&("server,".to_string() + s));
            assert!(
                matches!(e, Error::BadNumber { name: "port", .. }),
                "{s}: {e:?}"
            );
        }
        let (e, line) = refused("loop,count=1.5");
        assert_eq!(
            e,
            Error::BadNumber {
                name: "count",
                value: Word::new(b"1.5")
            }
        );
        assert_eq!(
            line,
            "count='1.5': not a number (decimal or 0x hex, no leading zero)"
        );
        // More than 64 bits.
        let (e, _) = refused("loop,size=18446744073709551616");
        assert!(matches!(e, Error::BadNumber { name: "size", .. }));
    }

    #[test]
    fn bad_keyword() {
        for s in [
            "mem_mode=DMA",
            "mem_mode=dmax",
            "path=BF",
            "wait=poll",
            "mem_mode=mr",
        ] {
            let (e, _) = refused(&("loop,".to_string() + s));
            assert!(matches!(e, Error::BadKeyword { .. }), "{s}: {e:?}");
        }
        assert_eq!(
            refused("loop,mem_mode=dmax").1,
            "mem_mode='dmax': must be one of dma, reg"
        );
        assert_eq!(
            refused("loop,wait=poll").1,
            "wait='poll': must be one of busy, event"
        );
    }

    #[test]
    fn out_of_range() {
        let range = |s| match refused(s).0 {
            Error::OutOfRange {
                name,
                value,
                min,
                max,
            } => (name, value, min, max),
            e => panic!("{s}: {e:?}"),
        };
        assert_eq!(range("server,port=65536"), ("port", 65536, 0, 65535));
        assert_eq!(range("loop,count=0"), ("count", 0, 1, u32::MAX.into()));
        assert_eq!(
            range("loop,count=0x100000000"),
            ("count", 1 << 32, 1, u32::MAX.into())
        );
        assert_eq!(range("loop,size=0"), ("size", 0, 1, 65536));
        assert_eq!(range("loop,size=65537,path=db"), ("size", 65537, 1, 65536));
        assert_eq!(
            refused("loop,count=0").1,
            "count=0: out of range 1..=4294967295"
        );
        // Limits that allow no size refuse even the default.
        let none = Limits {
            min_size: 10,
            max_size: 9,
            max_bf_size: 100,
        };
        let e = Command::parse(b"loop", &none).unwrap_err();
        assert!(matches!(e, Error::OutOfRange { name: "size", .. }), "{e:?}");
    }

    #[test]
    fn duplicates() {
        for (s, name) in [
            ("loop,size=8,size=8", "size"),
            ("server,server,port=1", "server"),
            ("loop,verbose,verbose", "verbose"),
            ("loop,path=db,path=bf", "path"),
        ] {
            assert_eq!(refused(s).0, Error::DuplicateOption(name), "{s}");
        }
        assert_eq!(refused("loop,loop").1, "loop given twice");
    }

    #[test]
    fn roles() {
        for s in ["", "\n", ",,,", "port=1", "validate,count=5"] {
            assert_eq!(refused(s).0, Error::NoRole, "{s:?}");
        }
        assert_eq!(refused("").1, "no role: server, client or loop");
        let (e, line) = refused("server,client,port=1");
        assert_eq!(e, Error::TwoRoles("server", "client"));
        assert_eq!(line, "two roles: server and client");
        assert_eq!(refused("loop,server").0, Error::TwoRoles("loop", "server"));
    }

    #[test]
    fn ports() {
        assert_eq!(refused("server").0, Error::PortRequired("server"));
        let (e, line) = refused("client,count=3");
        assert_eq!(e, Error::PortRequired("client"));
        assert_eq!(line, "client needs port=N");
        let (e, line) = refused("loop,port=1");
        assert_eq!(e, Error::PortWithLoop);
        assert_eq!(line, "loop takes no port");
    }

    #[test]
    fn bf_too_large() {
        for s in ["loop,size=201", "loop,path=bf,size=201", "size=201,loop"] {
            assert_eq!(
                refused(s).0,
                Error::BfTooLarge {
                    size: 201,
                    max: 200
                },
                "{s}"
            );
        }
        assert_eq!(
            refused("loop,size=201").1,
            "size=201: BlueFlame carries at most 200 bytes (path=db for more)"
        );
        assert!(Command::parse(b"loop,size=201,path=db", &LIMITS).is_ok());
        // The default size is checked too.
        let small_bf = Limits {
            max_bf_size: 32,
            ..LIMITS
        };
        let e = Command::parse(b"loop", &small_bf).unwrap_err();
        assert_eq!(e, Error::BfTooLarge { size: 64, max: 32 });
    }

    /// Any outcome is fine but a panic; an error is one printable line.
    fn check(input: &[u8], limits: &Limits) -> Result<(), TestCaseError> {
        match Command::parse(input, limits) {
            Ok(cmd) => {
                let again = Command::parse(cmd.to_string().as_bytes(), limits);
                prop_assert_eq!(again, Ok(cmd));
            }
            Err(e) => {
                let line = e.to_string();
                prop_assert!(!line.is_empty() && line.len() < 160, "{}", line);
                prop_assert!(line.bytes().all(|b| (b' '..=b'~').contains(&b)), "{}", line);
            }
        }
        Ok(())
    }

    fn limits() -> impl Strategy<Value = Limits> {
        any::<(u32, u32, u32)>().prop_map(|(min_size, max_size, max_bf_size)| Limits {
            min_size: min_size % 512,
            max_size: max_size % 100_000,
            max_bf_size: max_bf_size % 1024,
        })
    }

    proptest! {
        #[test]
        fn any_bytes_parse_or_are_refused(
            input in prop::collection::vec(any::<u8>(), 0..300),
            limits in limits(),
        ) {
            check(&input, &limits)?;
        }

        #[test]
        fn near_commands_parse_or_are_refused(
            input in "[a-z_=,0-9xX\n ]{0,80}",
            limits in limits(),
        ) {
            check(input.as_bytes(), &limits)?;
        }
    }
}
