//! Shared receive queues: the SRQ context (`struct mlx4_srq_context`,
//! `core/mlx4.h`), the hardware's state of each SRQ in hardware ownership
//! (its head, the WQEs it consumed, the armed limit), and the SRQ table.
//! The commands (SW2HW_SRQ, HW2SW_SRQ, QUERY_SRQ, ARM_SRQ) are in
//! `commands`; the QPs that take their receives from an SRQ find it
//! through `qp::srq`, and the data path consumes its WQEs in
//! `datapath::srq_recv`.
//!
//! An SRQ WQE is a 16-byte next segment (`struct mlx4_wqe_srq_next_seg`:
//! 2 reserved bytes, be16 next_wqe_index, 12 reserved), then data segments
//! as a receive WQE's (`rq::parse`), filling the stride. The WQEs form a
//! list: software posts at its head and relinks freed WQEs at its tail
//! (libmlx4 `mlx4_post_srq_recv`, `mlx4_free_srq_wqe`; mlx4_ib the same),
//! so the hardware keeps its own head, from WQE 0, and follows each
//! consumed WQE's next_wqe_index, read when it consumes it. The doorbell
//! record holds software's count of posted WQEs (`*srq->db =
//! htobe32(srq->counter)`, low 16 bits): a WQE is there to take while
//! (counter - consumed) mod 2^16 > 0.

pub mod commands;

use crate::bytes::{addr40, be16, be32, be64, put_be16};
use crate::qbuf::QueueBuf;
use serde::Serialize;
use std::collections::BTreeMap;

/// `struct mlx4_srq_context`: 48 bytes (its ICM entry is 64, SRQC_ENTRY).
pub const SRQ_CTX_SIZE: usize = 0x30;
/// The next segment before an SRQ WQE's data segments.
pub const NEXT_SEG_SIZE: usize = 16;
/// MLX4_EVENT_TYPE_SRQ_LIMIT (`include/linux/mlx4/device.h`).
pub const EVENT_SRQ_LIMIT: u8 = 0x14;
/// SRQs the firmware keeps for itself: QUERY_DEV_CAP 0x14 bits 7..4 = 0,
/// `core/fw.c`: `reserved_srqs = 1 << (field >> 4)`, so SRQ 0; mlx4
/// allocates SRQNs above them (`core/srq.c:mlx4_init_srq_table`).
pub const RESERVED_SRQS: u32 = 1;

/// Context offsets (`core/srq.c:mlx4_srq_alloc` fills them).
mod ctx {
    pub const STATE_LOGSIZE_SRQN: usize = 0x00;
    pub const LOGSTRIDE: usize = 0x04;
    pub const PG_OFFSET_CQN: usize = 0x08;
    pub const LOG_PAGE_SIZE: usize = 0x10;
    pub const MTT_H: usize = 0x13;
    pub const MTT_L: usize = 0x14;
    pub const PD: usize = 0x18;
    pub const LIMIT_WATERMARK: usize = 0x1c;
    pub const WQE_COUNTER: usize = 0x22;
    pub const DB_REC_ADDR: usize = 0x28;
}

#[derive(Debug, Clone)]
pub struct Srq {
    pub srqn: u32,
    /// log2 of its WQEs (state_logsize_srqn bits 27..24).
    pub log_size: u8,
    /// log2 of a WQE's stride (logstride + 4).
    pub log_stride: u8,
    /// The protection domain its WQEs' lkeys must match.
    pub pd: u32,
    /// The doorbell record's DMA address.
    pub db: u64,
    pub buf: QueueBuf,
    /// The WQE the next receive takes.
    pub head: u16,
    /// WQEs consumed (free-running; compared with the record's 16 bits).
    pub consumed: u32,
    /// The armed limit watermark (ARM_SRQ; SW2HW_SRQ's context's, which
    /// mainline leaves 0), 0 when not armed.
    pub limit: u16,
    /// The record's counter as last read.
    pub counter: u16,
    /// The next_wqe_index of the WQE at `head`, once its WQE was read for
    /// a receive, until that receive consumes it.
    pub next_of_head: Option<u16>,
    ctx: [u8; SRQ_CTX_SIZE],
}

/// Why an SRQ context is refused (`Srq::parse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bad {
    /// Its log size or stride is beyond the model's (BAD_SIZE).
    Size,
    /// Another field (BAD_PARAM).
    Param,
}

/// What `Srq::parse` reads of a context before its buffer is resolved.
pub struct Layout {
    pub srqn: u32,
    pub log_size: u8,
    pub log_stride: u8,
    pub log_page_size: u8,
    pub mtt: u64,
}

impl Layout {
    /// The context's geometry (`ctx` the mailbox), checked: log size at
    /// most `max_log_size`, the stride from 16 bytes (one next segment) to
    /// `max_stride`, page offset 0, pages at most 2 GiB, a doorbell record
    /// 4-aligned and not 0.
    pub fn parse(c: &[u8], max_log_size: u8, max_stride: u16) -> Result<Layout, Bad> {
        let w = be32(c, ctx::STATE_LOGSIZE_SRQN);
        let log_size = ((w >> 24) & 0xf) as u8;
        let log_stride = (c[ctx::LOGSTRIDE] & 0x7) + 4;
        if log_size > max_log_size || 1u32 << log_stride > u32::from(max_stride) {
            return Err(Bad::Size);
        }
        let db = be64(c, ctx::DB_REC_ADDR);
        if be32(c, ctx::PG_OFFSET_CQN) >> 24 != 0
            || c[ctx::LOG_PAGE_SIZE] > 19
            || db == 0
            || !db.is_multiple_of(4)
        {
            return Err(Bad::Param);
        }
        Ok(Layout {
            srqn: w & 0xff_ffff,
            log_size,
            log_stride,
            log_page_size: c[ctx::LOG_PAGE_SIZE],
            mtt: addr40(c, ctx::MTT_H, ctx::MTT_L),
        })
    }

    pub fn bytes(&self) -> u64 {
        1u64 << (self.log_size + self.log_stride)
    }
}

impl Srq {
    /// The SRQ of context `c` (checked by `Layout::parse`) on `buf`.
    pub fn new(l: &Layout, c: &[u8], buf: QueueBuf) -> Srq {
        let mut saved = [0u8; SRQ_CTX_SIZE];
        saved.copy_from_slice(&c[..SRQ_CTX_SIZE]);
        Srq {
            srqn: l.srqn,
            log_size: l.log_size,
            log_stride: l.log_stride,
            pd: be32(c, ctx::PD) & 0xff_ffff,
            db: be64(c, ctx::DB_REC_ADDR),
            buf,
            head: 0,
            consumed: 0,
            limit: be16(c, ctx::LIMIT_WATERMARK),
            counter: 0,
            next_of_head: None,
            ctx: saved,
        }
    }

    pub fn entries(&self) -> u32 {
        1 << self.log_size
    }

    pub fn stride(&self) -> usize {
        1 << self.log_stride
    }

    /// DMA address of WQE `index` (wrapped to the SRQ's size).
    pub fn wqe_addr(&self, index: u16) -> u64 {
        let slot = u64::from(u32::from(index) & (self.entries() - 1));
        self.buf.addr(slot << self.log_stride)
    }

    /// WQEs posted and not consumed by the record's counter `counter`: (how
    /// many the model may take, whether the counter claimed more than the
    /// SRQ holds).
    pub fn available(&self, counter: u16) -> (u32, bool) {
        let n = u32::from(counter.wrapping_sub(self.consumed as u16));
        (n.min(self.entries()), n > self.entries())
    }

    /// The context as QUERY_SRQ and HW2SW_SRQ return it: as SW2HW_SRQ
    /// gave it, with the armed limit watermark (`core/srq.c:mlx4_srq_query`
    /// reads it) and the WQEs consumed (wqe_counter, 16 bits).
    pub fn context(&self) -> [u8; SRQ_CTX_SIZE] {
        let mut c = self.ctx;
        put_be16(&mut c, ctx::LIMIT_WATERMARK, self.limit);
        put_be16(&mut c, ctx::WQE_COUNTER, self.consumed as u16);
        c
    }
}

/// The SRQ counters (diag version 15; in the summary as they are named),
/// reset by the counter reset.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct SrqCounters {
    /// SRQ WQEs consumed by a receive, in success or in error (0x6b0).
    pub srq_wqes: u64,
    /// SRQ_LIMIT events: an armed SRQ's WQEs fell below its watermark
    /// (0x6b8), posted or not (no EQ had the event mapped).
    pub srq_limit_events: u64,
    /// SRQ commands refused, RST2INIT_QPs refused for naming an SRQ not
    /// in hardware ownership, doorbell records claiming more WQEs than the
    /// SRQ holds, next segments that could not be read (0x6c0).
    pub srq_refused: u64,
}

impl SrqCounters {
    pub fn diag_value(&self, off: u64) -> Option<u64> {
        match off {
            0x6b0 => Some(self.srq_wqes),
            0x6b8 => Some(self.srq_limit_events),
            0x6c0 => Some(self.srq_refused),
            _ => None,
        }
    }
}

/// The SRQs in hardware ownership, by SRQN.
#[derive(Debug, Clone, Default)]
pub struct SrqTable {
    srqs: BTreeMap<u32, Srq>,
}

impl SrqTable {
    pub fn get(&self, srqn: u32) -> Option<&Srq> {
        self.srqs.get(&srqn)
    }

    pub fn get_mut(&mut self, srqn: u32) -> Option<&mut Srq> {
        self.srqs.get_mut(&srqn)
    }

    pub fn contains(&self, srqn: u32) -> bool {
        self.srqs.contains_key(&srqn)
    }

    /// SRQs in hardware ownership.
    pub fn len(&self) -> usize {
        self.srqs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.srqs.is_empty()
    }

    pub(crate) fn insert(&mut self, srq: Srq) {
        self.srqs.insert(srq.srqn, srq);
    }

    pub(crate) fn remove(&mut self, srqn: u32) -> Option<Srq> {
        self.srqs.remove(&srqn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::{put_be32, put_be64};

    fn context(log_size: u8, logstride: u8, db: u64) -> [u8; SRQ_CTX_SIZE] {
        let mut c = [0u8; SRQ_CTX_SIZE];
        put_be32(&mut c, 0, (u32::from(log_size) << 24) | 5);
        c[4] = logstride;
        put_be32(&mut c, 0x18, 3);
        put_be64(&mut c, 0x28, db);
        c
    }

    #[test]
    fn layout_and_availability() {
        let c = context(4, 1, 0x1000);
        let l = Layout::parse(&c, 12, 512).unwrap();
        assert_eq!(
            (l.srqn, l.log_size, l.log_stride, l.bytes()),
            (5, 4, 5, 512)
        );
        assert_eq!(
            Layout::parse(&context(13, 1, 8), 12, 512).err(),
            Some(Bad::Size)
        );
        assert_eq!(
            Layout::parse(&context(4, 6, 8), 12, 512).err(),
            Some(Bad::Size)
        );
        assert_eq!(
            Layout::parse(&context(4, 1, 0), 12, 512).err(),
            Some(Bad::Param)
        );
        assert_eq!(
            Layout::parse(&context(4, 1, 6), 12, 512).err(),
            Some(Bad::Param)
        );
        let buf = QueueBuf {
            shift: 12,
            pages: vec![0x8000],
        };
        let mut s = Srq::new(&l, &c, buf);
        assert_eq!(s.pd, 3);
        assert_eq!(s.wqe_addr(17), 0x8020);
        assert_eq!(s.available(3), (3, false));
        s.consumed = 0x1_fffe;
        assert_eq!(s.available(1), (3, false));
        assert_eq!(s.available(0x20), (16, true));
        s.limit = 7;
        let q = s.context();
        assert_eq!((be16(&q, 0x1c), be16(&q, 0x22)), (7, 0xfffe));
    }
}
