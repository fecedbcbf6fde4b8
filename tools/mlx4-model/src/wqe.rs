//! Send WQE decoding (§4.1–4.4): control segment, then raddr / datagram /
//! raddr and atomic, inline and data segments, all checked against DS. Pure: whether a data
//! segment or a remote address may be touched is `keys`' question, touching
//! it the send path's.

use crate::bytes::{be16, be32, be64};
use crate::layout::MAX_SG_SQ;
use crate::protocol::Code;
use crate::qp::service;

pub mod opcode {
    pub const NOP: u8 = 0x00;
    pub const RDMA_WRITE: u8 = 0x08;
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    pub const SEND: u8 = 0x0a;
    pub const SEND_IMM: u8 = 0x0b;
    /// RC only.
    pub const RDMA_READ: u8 = 0x10;
    /// MLX4_OPCODE_ATOMIC_CS and MLX4_OPCODE_ATOMIC_FA, RC only. The masked
    /// atomics (0x14, 0x15) are not taken.
    pub const ATOMIC_CS: u8 = 0x11;
    pub const ATOMIC_FA: u8 = 0x12;
}

pub const CTRL_SIZE: usize = 16;
const RADDR_SIZE: usize = 16;
/// struct mlx4_wqe_atomic_seg: be64 swap_add, be64 compare.
const ATOMIC_SIZE: usize = 16;
const DATAGRAM_SIZE: usize = 48;
const INLINE_ALIGN: usize = 64;
/// srcrb_flags: CQ_UPDATE (`3 << 2`).
pub const CQ_UPDATE: u32 = 0xc;
/// srcrb_flags: SOLICITED (`1 << 1`), the receive CQE's solicited event.
pub const SOLICITED: u32 = 0x2;

/// The control segment's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctrl {
    pub owner: bool,
    /// WQE counter, owner_opcode bits 23..8 (BlueFlame only).
    pub counter: u16,
    pub opcode: u8,
    /// QPN from bf_qpn (BlueFlame only).
    pub bf_qpn: u32,
    pub ds: u8,
    pub srcrb: u32,
}

impl Ctrl {
    /// `b` holds at least the 16-byte control segment.
    pub fn decode(b: &[u8]) -> Ctrl {
        let oo = be32(b, 0);
        Ctrl {
            owner: oo & (1 << 31) != 0,
            counter: ((oo >> 8) & 0xffff) as u16,
            opcode: (oo & 0x1f) as u8,
            bf_qpn: be32(b, 4) >> 8,
            ds: b[7] & 0x3f,
            srcrb: be32(b, 8),
        }
    }

    pub fn wqe_bytes(&self) -> usize {
        usize::from(self.ds) * 16
    }

    pub fn signaled(&self) -> bool {
        self.srcrb & CQ_UPDATE == CQ_UPDATE
    }

    pub fn solicited(&self) -> bool {
        self.srcrb & SOLICITED != 0
    }
}

/// The immediate (ctrl + 0x0c) as its 4 bytes appear in the WQE.
pub fn imm(b: &[u8]) -> [u8; 4] {
    [b[12], b[13], b[14], b[15]]
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Raddr {
        addr: u64,
        rkey: u32,
    },
    /// A UD SEND's datagram segment (`struct mlx4_wqe_datagram_seg`).
    Datagram(Datagram),
    /// An atomic's operands (mlx4_wqe_atomic_seg): the swap value of a
    /// CMP_SWAP or the addend of a FETCH_ADD, and the compare value (0 for
    /// FETCH_ADD).
    Atomic {
        swap_add: u64,
        compare: u64,
    },
    /// `off`: where the bytes start in the WQE.
    Inline {
        len: u32,
        off: usize,
    },
    Data {
        len: u32,
        lkey: u32,
        addr: u64,
    },
}

/// A UD SEND's datagram segment as libmlx4 `set_datagram_seg` and
/// mlx4_ib write it (`struct mlx4_wqe_datagram_seg`, 48 bytes): the
/// address handle's `struct mlx4_av` (32 bytes: be32 port_pd, reserved,
/// g_slid, be16 dlid, reserved, gid_index, stat_rate, hop_limit, be32
/// sl_tclass_flowlabel, dgid[16]; libmlx4 `mlx4_create_ah`), then be32
/// dqpn, be32 qkey, be16 vlan and the MAC (RoCE only; not decoded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// port_pd bits 31..24: the port the datagram leaves by.
    pub port: u8,
    /// port_pd bits 23..0: the address handle's protection domain.
    pub pd: u32,
    /// g_slid bit 7: a GRH goes with the datagram.
    pub grh: bool,
    /// g_slid bits 6..0: the source path bits.
    pub src_path_bits: u8,
    pub dlid: u16,
    /// The sender port's GID index of the GRH's SGID.
    pub gid_index: u8,
    pub stat_rate: u8,
    pub hop_limit: u8,
    /// sl_tclass_flowlabel: SL in bits 31..28 (IB), traffic class in
    /// 27..20, flow label in 19..0.
    pub sl: u8,
    pub tclass: u8,
    pub flow_label: u32,
    pub dgid: [u8; 16],
    /// The destination QP (24 bits).
    pub dqpn: u32,
    /// The Q_Key; bit 31 set means the sending QP's own (IB: a
    /// "controlled" Q_Key in a work request).
    pub qkey: u32,
}

impl Datagram {
    /// The segment at the start of `b` (48 bytes).
    pub fn decode(b: &[u8]) -> Datagram {
        let port_pd = be32(b, 0);
        let stf = be32(b, 12);
        let mut dgid = [0u8; 16];
        dgid.copy_from_slice(&b[16..32]);
        Datagram {
            port: (port_pd >> 24) as u8,
            pd: port_pd & 0xff_ffff,
            grh: b[5] & 0x80 != 0,
            src_path_bits: b[5] & 0x7f,
            dlid: be16(b, 6),
            gid_index: b[9],
            stat_rate: b[10],
            hop_limit: b[11],
            sl: (stf >> 28) as u8,
            tclass: ((stf >> 20) & 0xff) as u8,
            flow_label: stf & 0xf_ffff,
            dgid,
            dqpn: be32(b, 32) & 0xff_ffff,
            qkey: be32(b, 36),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wqe {
    pub ctrl: Ctrl,
    pub segments: Vec<Segment>,
    /// Inline bytes plus data-segment byte counts.
    pub payload: u64,
}

impl Wqe {
    /// An RDMA write's remote address segment: (raddr, rkey).
    pub fn raddr(&self) -> Option<(u64, u32)> {
        self.segments.iter().find_map(|s| match s {
            Segment::Raddr { addr, rkey } => Some((*addr, *rkey)),
            _ => None,
        })
    }

    /// A UD SEND's datagram segment.
    pub fn datagram(&self) -> Option<&Datagram> {
        self.segments.iter().find_map(|s| match s {
            Segment::Datagram(d) => Some(d),
            _ => None,
        })
    }

    /// An atomic's operands: (swap_add, compare).
    pub fn atomic(&self) -> Option<(u64, u64)> {
        self.segments.iter().find_map(|s| match s {
            Segment::Atomic { swap_add, compare } => Some((*swap_add, *compare)),
            _ => None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WqeError {
    #[error("opcode {0:#x} is not accepted on this QP")]
    BadOpcode(u8),
    #[error("DS {ds} ({} bytes) is larger than the send queue ({ring} bytes)", *ds as usize * 16)]
    DsTooLarge { ds: u8, ring: u64 },
    #[error("segment at +{off:#x} runs past DS*16 = {len}")]
    SegmentOverrun { off: usize, len: usize },
    #[error("more than {MAX_SG_SQ} data segments")]
    TooManySges,
    #[error("inline data at +{off:#x} ({len} bytes) crosses a 64-byte boundary")]
    InlineCrosses { off: usize, len: usize },
    #[error("{0} segment missing")]
    Missing(&'static str),
}

impl WqeError {
    pub fn code(&self) -> Code {
        match self {
            WqeError::BadOpcode(_) => Code::WqeBadOpcode,
            WqeError::DsTooLarge { .. } => Code::WqeDsTooLarge,
            WqeError::SegmentOverrun { .. } => Code::WqeSegmentOverrun,
            WqeError::TooManySges => Code::WqeTooManySges,
            WqeError::InlineCrosses { .. } => Code::WqeInlineCrosses64,
            WqeError::Missing(_) => Code::WqeMissingSegment,
        }
    }
}

/// Parses the WQE in `b` (exactly DS*16 bytes, DS >= 1). `base` is the
/// WQE's byte offset in the queue buffer: the 64-byte rule for inline data
/// is about memory, not about the WQE. RDMA_READ is taken on an RC QP:
/// the raddr segment, then the data segments it scatters into; so are
/// ATOMIC_CS and ATOMIC_FA: the raddr segment, the atomic segment, then
/// the data segment the original value lands in (libmlx4
/// `mlx4_post_send`). Whether that is one segment of 8 bytes is the
/// atomic path's question (`datapath::atomic`).
pub fn parse(b: &[u8], qp_service: u8, base: u64) -> Result<Wqe, WqeError> {
    let ctrl = Ctrl::decode(b);
    let len = b.len();
    let mut w = Wqe {
        ctrl,
        segments: Vec::new(),
        payload: 0,
    };
    let ud = qp_service == service::UD;
    let mut off = CTRL_SIZE;
    match ctrl.opcode {
        // A NOP's body is padding (mlx4_ib pads with an inline header).
        opcode::NOP => return Ok(w),
        opcode::SEND | opcode::SEND_IMM => {
            if ud {
                if off + DATAGRAM_SIZE > len {
                    return Err(WqeError::Missing("datagram"));
                }
                w.segments
                    .push(Segment::Datagram(Datagram::decode(&b[off..])));
                off += DATAGRAM_SIZE;
            }
        }
        op @ (opcode::RDMA_READ | opcode::RDMA_WRITE | opcode::RDMA_WRITE_IMM)
            if (op == opcode::RDMA_READ && qp_service == service::RC)
                || (op != opcode::RDMA_READ && !ud && qp_service != service::MLX) =>
        {
            off = raddr(&mut w, b, off)?;
        }
        opcode::ATOMIC_CS | opcode::ATOMIC_FA if qp_service == service::RC => {
            off = raddr(&mut w, b, off)?;
            if off + ATOMIC_SIZE > len {
                return Err(WqeError::Missing("atomic"));
            }
            w.segments.push(Segment::Atomic {
                swap_add: be64(b, off),
                compare: be64(b, off + 8),
            });
            off += ATOMIC_SIZE;
        }
        op => return Err(WqeError::BadOpcode(op)),
    }
    let mut sges = 0;
    let base = (base % INLINE_ALIGN as u64) as usize;
    while off < len {
        let bc = be32(b, off);
        if bc & (1 << 31) != 0 {
            let n = (bc & 0x7fff_ffff) as usize;
            let start = off + 4;
            if n > len - start {
                return Err(WqeError::SegmentOverrun { off, len });
            }
            let end = start + n;
            if n > 0 && (base + start) / INLINE_ALIGN != (base + end - 1) / INLINE_ALIGN {
                return Err(WqeError::InlineCrosses { off, len: n });
            }
            w.segments.push(Segment::Inline {
                len: n as u32,
                off: start,
            });
            w.payload += n as u64;
            off = end.div_ceil(16) * 16;
        } else {
            sges += 1;
            if sges > MAX_SG_SQ {
                return Err(WqeError::TooManySges);
            }
            w.segments.push(Segment::Data {
                len: bc,
                lkey: be32(b, off + 4),
                addr: be64(b, off + 8),
            });
            w.payload += u64::from(bc);
            off += 16;
        }
    }
    Ok(w)
}

/// The raddr segment at `off` of the WQE `b` into `w`; where the next
/// segment starts.
fn raddr(w: &mut Wqe, b: &[u8], off: usize) -> Result<usize, WqeError> {
    if off + RADDR_SIZE > b.len() {
        return Err(WqeError::Missing("raddr"));
    }
    w.segments.push(Segment::Raddr {
        addr: be64(b, off),
        rkey: be32(b, off + 8),
    });
    Ok(off + RADDR_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::put_be32;

    fn ctrl(op: u8, ds: u8) -> Vec<u8> {
        let mut b = vec![0u8; usize::from(ds) * 16];
        put_be32(&mut b, 0, u32::from(op));
        b[7] = ds;
        put_be32(&mut b, 8, CQ_UPDATE);
        b
    }

    #[test]
    fn inline_send() {
        let mut b = ctrl(opcode::SEND, 2);
        put_be32(&mut b, 16, (1 << 31) | 2);
        let w = parse(&b, service::RC, 0).unwrap();
        assert_eq!(w.segments, vec![Segment::Inline { len: 2, off: 20 }]);
        assert_eq!(w.payload, 2);
        assert!(w.ctrl.signaled());
    }

    #[test]
    fn inline_must_not_cross_64() {
        // 16 + 4 + 48 = 68 > 64: crosses.
        let mut b = ctrl(opcode::SEND, 5);
        put_be32(&mut b, 16, (1 << 31) | 48);
        assert!(matches!(
            parse(&b, service::RC, 0),
            Err(WqeError::InlineCrosses { .. })
        ));
        // Split as libmlx4 does: 44 bytes, then a new header at 64.
        put_be32(&mut b, 16, (1 << 31) | 44);
        put_be32(&mut b, 64, (1 << 31) | 4);
        let w = parse(&b, service::RC, 0).unwrap();
        assert_eq!(w.segments[1], Segment::Inline { len: 4, off: 68 });
        assert_eq!(w.payload, 48);
        // The same WQE at a 32-byte offset in memory crosses.
        assert!(parse(&b, service::RC, 32).is_err());
    }

    #[test]
    fn rdma_write_needs_raddr_and_data_segments_count() {
        let b = ctrl(opcode::RDMA_WRITE, 1);
        assert_eq!(parse(&b, service::RC, 0), Err(WqeError::Missing("raddr")));
        let mut b = ctrl(opcode::RDMA_WRITE, 3);
        put_be32(&mut b, 32, 100);
        let w = parse(&b, service::UC, 0).unwrap();
        assert_eq!(w.payload, 100);
        assert_eq!(parse(&b, service::UD, 0), Err(WqeError::BadOpcode(8)));
        let b = ctrl(opcode::SEND, 18);
        assert_eq!(parse(&b, service::RC, 0), Err(WqeError::TooManySges));
    }

    #[test]
    fn inline_overrun_and_bad_opcode() {
        let mut b = ctrl(opcode::SEND, 2);
        put_be32(&mut b, 16, (1 << 31) | 13);
        assert!(matches!(
            parse(&b, service::RC, 0),
            Err(WqeError::SegmentOverrun { .. })
        ));
        // RDMA_READ: RC only, and its raddr segment first.
        let b = ctrl(0x10, 1);
        assert_eq!(parse(&b, service::UC, 0), Err(WqeError::BadOpcode(0x10)));
        assert_eq!(parse(&b, service::RC, 0), Err(WqeError::Missing("raddr")));
        let b = ctrl(opcode::SEND, 3);
        assert!(matches!(
            parse(&b, service::UD, 0),
            Err(WqeError::Missing("datagram"))
        ));
    }

    #[test]
    fn a_ud_send_decodes_its_datagram_segment() {
        // libmlx4's AV: PD 5 on port 1, GRH, path bits 3, DLID 0x12,
        // GID index 2, hop limit 64, SL 9, class 0xab, flow 0x12345.
        let mut b = ctrl(opcode::SEND_IMM, 5);
        put_be32(&mut b, 16, (1 << 24) | 5);
        b[21] = 0x83;
        b[22..24].copy_from_slice(&[0, 0x12]);
        (b[25], b[27]) = (2, 64);
        put_be32(&mut b, 28, (9 << 28) | (0xab << 20) | 0x1_2345);
        b[32..48].copy_from_slice(&[0xfe; 16]);
        put_be32(&mut b, 48, 0xff00_0041); // dqpn: 24 bits
        put_be32(&mut b, 52, 0x8000_0000);
        put_be32(&mut b, 64, 7);
        let w = parse(&b, service::UD, 0).unwrap();
        let d = w.datagram().unwrap();
        assert_eq!((d.port, d.pd, d.grh, d.src_path_bits), (1, 5, true, 3));
        assert_eq!((d.dlid, d.gid_index, d.hop_limit), (0x12, 2, 64));
        assert_eq!((d.sl, d.tclass, d.flow_label), (9, 0xab, 0x1_2345));
        assert_eq!((d.dgid, d.dqpn, d.qkey), ([0xfe; 16], 0x41, 0x8000_0000));
        assert_eq!(w.payload, 7, "then the data segments");
    }

    #[test]
    fn atomics_raddr_atomic_then_data_on_rc_only() {
        let mut b = ctrl(opcode::ATOMIC_CS, 4);
        put_be32(&mut b, 16, 0x1234_5678);
        put_be32(&mut b, 20, 0x9abc_def0);
        put_be32(&mut b, 24, 0x0102);
        put_be32(&mut b, 32, 0xaaaa_bbbb);
        put_be32(&mut b, 36, 0xcccc_dddd);
        put_be32(&mut b, 44, 7);
        put_be32(&mut b, 48, 8);
        put_be32(&mut b, 52, 0x100);
        put_be32(&mut b, 60, 0x4000);
        let w = parse(&b, service::RC, 0).unwrap();
        assert_eq!(w.raddr(), Some((0x1234_5678_9abc_def0, 0x0102)));
        assert_eq!(w.atomic(), Some((0xaaaa_bbbb_cccc_dddd, 7)));
        assert_eq!(
            w.segments[2],
            Segment::Data {
                len: 8,
                lkey: 0x100,
                addr: 0x4000
            }
        );
        assert_eq!(w.payload, 8);
        for s in [service::UC, service::UD, service::MLX] {
            assert_eq!(parse(&b, s, 0), Err(WqeError::BadOpcode(0x11)));
        }
        let b = ctrl(opcode::ATOMIC_FA, 2);
        assert_eq!(parse(&b, service::RC, 0), Err(WqeError::Missing("atomic")));
        // The masked atomics are not taken.
        for op in [0x14, 0x15] {
            let b = ctrl(op, 5);
            assert_eq!(parse(&b, service::RC, 0), Err(WqeError::BadOpcode(op)));
        }
    }
}
