//! The analyzer trace: one JSON object per line, `seq` from 1, `kind` and
//! `t_ns` (the modelled PCIe clock when the transaction started) first,
//! then the record's fields.
//!
//! The trace level says which kinds are written. `seq` counts every
//! record, written or not, so a record's `seq` is the same at every level;
//! the fields of a record that is not written are never built (they come
//! as a closure).

use serde_json::{Map, Value};
use std::io::{BufWriter, Write};
use std::str::FromStr;

/// Which records the trace keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TraceLevel {
    /// Every transaction (the analyzer; the default).
    #[default]
    All,
    /// What went wrong and the bookends: protocol errors, the error records
    /// of the data path ([`ERROR_KINDS`]), injected command and data
    /// faults, DMA refused without bus mastering, marks and the exit
    /// record. What the runner needs to fail a run and name the first
    /// unexpected protocol error, without a record per MMIO write.
    Errors,
}

/// The kinds written at [`TraceLevel::Errors`].
pub const ERROR_KINDS: &[&str] = &[
    "protocol_error",
    "deliver_error",
    "ud_drop",
    "ud_recv_error",
    "prot_fault",
    "cq_error",
    "cqe_dropped",
    "command_fault",
    "data_fault",
    "fw_refused",
    "no_master_dma",
    "mark",
    "exit",
];

impl TraceLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            TraceLevel::All => "all",
            TraceLevel::Errors => "errors",
        }
    }

    /// Whether records of `kind` are written at this level.
    pub fn keeps(self, kind: &str) -> bool {
        match self {
            TraceLevel::All => true,
            TraceLevel::Errors => ERROR_KINDS.contains(&kind),
        }
    }
}

impl FromStr for TraceLevel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "all" => Ok(TraceLevel::All),
            "errors" => Ok(TraceLevel::Errors),
            _ => Err(format!("unknown trace level {s:?} (all, errors)")),
        }
    }
}

/// Records between forced flushes on the hot path (commands, protocol
/// errors, marks and exit flush immediately).
const FLUSH_EVERY: u32 = 256;

enum Sink {
    Null,
    Writer(BufWriter<Box<dyn Write + Send>>),
    Memory(Vec<String>),
}

pub struct Tracer {
    level: TraceLevel,
    seq: u64,
    /// Records written to the sink (at `All`, `seq`).
    written: u64,
    /// The modelled clock, set by the device before it records.
    t_ns: u64,
    sink: Sink,
    unflushed: u32,
    failed: bool,
}

impl Tracer {
    pub fn to_writer(w: Box<dyn Write + Send>) -> Self {
        Self::with(Sink::Writer(BufWriter::with_capacity(1 << 16, w)))
    }

    /// Keeps the lines in memory (tests, documentation excerpts).
    pub fn memory() -> Self {
        Self::with(Sink::Memory(Vec::new()))
    }

    /// Counts records, keeps nothing (fuzzing).
    pub fn null() -> Self {
        Self::with(Sink::Null)
    }

    fn with(sink: Sink) -> Self {
        Tracer {
            level: TraceLevel::All,
            seq: 0,
            written: 0,
            t_ns: 0,
            sink,
            unflushed: 0,
            failed: false,
        }
    }

    /// Keeps only the records `level` names from now on.
    pub fn with_level(mut self, level: TraceLevel) -> Self {
        self.level = level;
        self
    }

    pub fn level(&self) -> TraceLevel {
        self.level
    }

    /// Records so far, written or not (the last `seq`).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Records written so far (`seq` at level `All`).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Whether a record of `kind` would be written.
    pub fn enabled(&self, kind: &str) -> bool {
        self.level.keeps(kind)
    }

    /// The time stamped on the next records (the device's clock).
    pub fn set_time(&mut self, t_ns: u64) {
        self.t_ns = t_ns;
    }

    /// Counts a record of `kind` and, if the level keeps it, builds its
    /// fields (an object) and writes it.
    pub fn record(&mut self, kind: &str, fields: impl FnOnce() -> Value) {
        self.seq += 1;
        if !self.level.keeps(kind) {
            return;
        }
        self.written += 1;
        let fields = fields();
        let mut obj = Map::new();
        obj.insert("seq".into(), Value::from(self.seq));
        obj.insert("kind".into(), Value::from(kind));
        obj.insert("t_ns".into(), Value::from(self.t_ns));
        if let Value::Object(m) = fields {
            obj.extend(m);
        }
        let line = Value::Object(obj).to_string();
        match &mut self.sink {
            Sink::Null => {}
            Sink::Memory(v) => v.push(line),
            Sink::Writer(w) => {
                let r = w
                    .write_all(line.as_bytes())
                    .and_then(|()| w.write_all(b"\n"));
                self.note(r);
                self.unflushed += 1;
                if self.unflushed >= FLUSH_EVERY {
                    self.flush();
                }
            }
        }
    }

    pub fn flush(&mut self) {
        self.unflushed = 0;
        if let Sink::Writer(w) = &mut self.sink {
            let r = w.flush();
            self.note(r);
        }
    }

    fn note(&mut self, r: std::io::Result<()>) {
        if let Err(e) = r {
            if !self.failed {
                log::error!("trace write failed: {e}");
                self.failed = true;
            }
        }
    }

    /// The recorded lines (memory sink only; empty otherwise).
    pub fn lines(&self) -> &[String] {
        match &self.sink {
            Sink::Memory(v) => v,
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn seq_and_kind_come_first() {
        let mut t = Tracer::memory();
        t.record("mark", || json!({"value": 7}));
        t.set_time(1500);
        t.record("irq", || json!({"vector": 1}));
        assert_eq!(
            t.lines()[0],
            r#"{"seq":1,"kind":"mark","t_ns":0,"value":7}"#
        );
        assert_eq!(
            t.lines()[1],
            r#"{"seq":2,"kind":"irq","t_ns":1500,"vector":1}"#
        );
        assert_eq!(t.seq(), 2);
        assert_eq!(t.written(), 2);
    }

    #[test]
    fn errors_level_keeps_errors_and_marks_and_counts_everything() {
        let mut t = Tracer::memory().with_level(TraceLevel::Errors);
        let mut built = 0;
        t.record("mmio_write", || {
            built += 1;
            json!({"bar": 2})
        });
        t.record("mark", || json!({"value": 1}));
        t.record("dma_read", || {
            built += 1;
            json!({})
        });
        t.record("protocol_error", || json!({"code": "x", "expected": false}));
        t.record("exit", || json!({}));
        assert_eq!(built, 0, "the fields of a dropped record are never built");
        assert_eq!(
            t.lines(),
            [
                r#"{"seq":2,"kind":"mark","t_ns":0,"value":1}"#,
                r#"{"seq":4,"kind":"protocol_error","t_ns":0,"code":"x","expected":false}"#,
                r#"{"seq":5,"kind":"exit","t_ns":0}"#,
            ]
        );
        assert_eq!((t.seq(), t.written()), (5, 3));
        assert!(!t.enabled("wqe") && t.enabled("protocol_error"));
    }

    #[test]
    fn levels_parse() {
        assert_eq!("all".parse::<TraceLevel>(), Ok(TraceLevel::All));
        assert_eq!("errors".parse::<TraceLevel>(), Ok(TraceLevel::Errors));
        assert!("none".parse::<TraceLevel>().is_err());
        assert_eq!(TraceLevel::default().as_str(), "all");
    }
}
