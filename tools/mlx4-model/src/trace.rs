//! The analyzer trace: one JSON object per line, `seq` from 1, `kind` and
//! `t_ns` (the modelled PCIe clock when the transaction started) first,
//! then the record's fields.

use serde_json::{Map, Value};
use std::io::{BufWriter, Write};

/// Records between forced flushes on the hot path (commands, protocol
/// errors, marks and exit flush immediately).
const FLUSH_EVERY: u32 = 256;

enum Sink {
    Null,
    Writer(BufWriter<Box<dyn Write + Send>>),
    Memory(Vec<String>),
}

pub struct Tracer {
    seq: u64,
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
            seq: 0,
            t_ns: 0,
            sink,
            unflushed: 0,
            failed: false,
        }
    }

    /// Records written so far (the last `seq`).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The time stamped on the next records (the device's clock).
    pub fn set_time(&mut self, t_ns: u64) {
        self.t_ns = t_ns;
    }

    pub fn record(&mut self, kind: &str, fields: Value) {
        self.seq += 1;
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
        t.record("mark", json!({"value": 7}));
        t.set_time(1500);
        t.record("irq", json!({"vector": 1}));
        assert_eq!(
            t.lines()[0],
            r#"{"seq":1,"kind":"mark","t_ns":0,"value":7}"#
        );
        assert_eq!(
            t.lines()[1],
            r#"{"seq":2,"kind":"irq","t_ns":1500,"vector":1}"#
        );
        assert_eq!(t.seq(), 2);
    }
}
