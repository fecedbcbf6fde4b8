// SPDX-License-Identifier: GPL-2.0

//! What an event queue entry says (`struct mlx4_eqe`,
//! include/linux/mlx4/device.h), decoded as mlx4_core's `mlx4_eq_int()`
//! (drivers/net/ethernet/mellanox/mlx4/eq.c) reads it, and the IB event
//! mlx4_ib makes of each asynchronous one (`ib/qp.c:
//! mlx4_ib_handle_qp_event()`, `ib/cq.c:mlx4_ib_cq_event()`,
//! `ib/main.c:mlx4_ib_event()`, `ib/srq.c:mlx4_ib_srq_event()`).
//!
//! The interrupt handler hands the asynchronous events to process context
//! through a lock-free ring of `u64`s: [`AsyncEvent::pack`] and
//! [`AsyncEvent::unpack`] (0 is never a packed event: an empty slot).

use crate::verbs::IbEvent;

/// Bytes of an EQE, and where its fields are.
pub const EQE_SIZE: usize = 32;
pub const EQE_TYPE: usize = 0x01;
pub const EQE_SUBTYPE: usize = 0x03;
/// The event union, six dwords; the handler reads the first three.
pub const EQE_EVENT: usize = 0x04;
pub const EQE_OWNER: usize = 0x1f;

/// `enum mlx4_event`: the types this provider decodes.
pub mod kind {
    pub const COMP: u8 = 0x00;
    pub const PATH_MIG: u8 = 0x01;
    pub const COMM_EST: u8 = 0x02;
    pub const SQ_DRAINED: u8 = 0x03;
    pub const CQ_ERROR: u8 = 0x04;
    pub const WQ_CATAS_ERROR: u8 = 0x05;
    pub const PATH_MIG_FAILED: u8 = 0x07;
    pub const PORT_CHANGE: u8 = 0x09;
    pub const CMD: u8 = 0x0a;
    pub const WQ_INVAL_REQ_ERROR: u8 = 0x10;
    pub const WQ_ACCESS_ERROR: u8 = 0x11;
    pub const SRQ_CATAS_ERROR: u8 = 0x12;
    pub const SRQ_QP_LAST_WQE: u8 = 0x13;
    pub const SRQ_LIMIT: u8 = 0x14;
}

/// `MLX4_PORT_CHANGE_SUBTYPE_DOWN`; any other subtype is the port up.
pub const PORT_CHANGE_SUBTYPE_DOWN: u8 = 1;
/// `event.cq_err.syndrome` of an overrun (else an access violation).
pub const CQ_ERR_OVERRUN: u8 = 1;

/// The QP events `mlx4_eq_int()` hands to `mlx4_qp_event()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpEvent {
    PathMig = 1,
    CommEst = 2,
    SqDrained = 3,
    LastWqeReached = 4,
    CatasError = 5,
    PathMigFailed = 6,
    InvalidRequest = 7,
    AccessError = 8,
}

const QP_EVENTS: [QpEvent; 8] = [
    QpEvent::PathMig,
    QpEvent::CommEst,
    QpEvent::SqDrained,
    QpEvent::LastWqeReached,
    QpEvent::CatasError,
    QpEvent::PathMigFailed,
    QpEvent::InvalidRequest,
    QpEvent::AccessError,
];

/// An asynchronous event for the provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncEvent {
    /// On QP `qpn` (24 bits).
    Qp { qpn: u32, event: QpEvent },
    /// CQ `cqn` overran or hit an access violation (`mlx4_cq_event()`).
    CqError { cqn: u32, overrun: bool },
    /// Port `port` went down or became active (`MLX4_DEV_EVENT_PORT_*`).
    Port { port: u8, active: bool },
    /// SRQ `srqn` fell below its armed limit, or (`limit` false) failed
    /// (`mlx4_srq_event()`).
    Srq { srqn: u32, limit: bool },
}

/// One EQE, as `mlx4_eq_int()` dispatches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eqe {
    /// A completion event of CQ `cqn` (`mlx4_cq_completion()`).
    Completion {
        cqn: u32,
    },
    /// A command's completion (E bit): the interface polls, nothing to do.
    Command,
    Async(AsyncEvent),
    /// What this provider does not act on (EQ overrun,
    /// catastrophic and ECC reports...): counted, logged by the caller.
    Other {
        kind: u8,
        subtype: u8,
    },
}

/// The EQE of type `kind` and `subtype` whose event union starts with the
/// big-endian dwords `event` (already in CPU order).
pub fn decode(kind: u8, subtype: u8, event: [u32; 3]) -> Eqe {
    let qp = |e| {
        Eqe::Async(AsyncEvent::Qp {
            qpn: event[0] & 0xff_ffff,
            event: e,
        })
    };
    match kind {
        kind::COMP => Eqe::Completion {
            cqn: event[0] & 0xff_ffff,
        },
        kind::CMD => Eqe::Command,
        kind::PATH_MIG => qp(QpEvent::PathMig),
        kind::COMM_EST => qp(QpEvent::CommEst),
        kind::SQ_DRAINED => qp(QpEvent::SqDrained),
        kind::SRQ_QP_LAST_WQE => qp(QpEvent::LastWqeReached),
        kind::WQ_CATAS_ERROR => qp(QpEvent::CatasError),
        kind::PATH_MIG_FAILED => qp(QpEvent::PathMigFailed),
        kind::WQ_INVAL_REQ_ERROR => qp(QpEvent::InvalidRequest),
        kind::WQ_ACCESS_ERROR => qp(QpEvent::AccessError),
        // cq_err: cqn, a reserved dword, then the syndrome in the low
        // byte of the third.
        kind::CQ_ERROR => Eqe::Async(AsyncEvent::CqError {
            cqn: event[0] & 0xff_ffff,
            overrun: event[2] as u8 == CQ_ERR_OVERRUN,
        }),
        // srq: the SRQN in the first dword's low 24 bits.
        kind::SRQ_LIMIT | kind::SRQ_CATAS_ERROR => Eqe::Async(AsyncEvent::Srq {
            srqn: event[0] & 0xff_ffff,
            limit: kind == kind::SRQ_LIMIT,
        }),
        // port_change: two reserved dwords, then the port in bits 31..28.
        kind::PORT_CHANGE => Eqe::Async(AsyncEvent::Port {
            port: (event[2] >> 28) as u8,
            active: subtype != PORT_CHANGE_SUBTYPE_DOWN,
        }),
        _ => Eqe::Other { kind, subtype },
    }
}

const TAG_QP: u64 = 1;
const TAG_CQ: u64 = 2;
const TAG_PORT: u64 = 3;
const TAG_SRQ: u64 = 4;

impl AsyncEvent {
    /// The IB event mlx4_ib dispatches for it.
    pub const fn ib_event(&self) -> IbEvent {
        match self {
            AsyncEvent::Qp { event, .. } => match event {
                QpEvent::PathMig => IbEvent::PathMig,
                QpEvent::CommEst => IbEvent::CommEst,
                QpEvent::SqDrained => IbEvent::SqDrained,
                QpEvent::LastWqeReached => IbEvent::QpLastWqeReached,
                QpEvent::CatasError => IbEvent::QpFatal,
                QpEvent::PathMigFailed => IbEvent::PathMigErr,
                QpEvent::InvalidRequest => IbEvent::QpReqErr,
                QpEvent::AccessError => IbEvent::QpAccessErr,
            },
            AsyncEvent::CqError { .. } => IbEvent::CqErr,
            AsyncEvent::Port { active: true, .. } => IbEvent::PortActive,
            AsyncEvent::Port { active: false, .. } => IbEvent::PortErr,
            AsyncEvent::Srq { limit: true, .. } => IbEvent::SrqLimitReached,
            AsyncEvent::Srq { limit: false, .. } => IbEvent::SrqErr,
        }
    }

    /// The event in one nonzero word: tag (bits 63..56), detail (bits
    /// 39..32), number (bits 23..0).
    pub const fn pack(&self) -> u64 {
        let (tag, detail, n) = match *self {
            AsyncEvent::Qp { qpn, event } => (TAG_QP, event as u64, qpn),
            AsyncEvent::CqError { cqn, overrun } => (TAG_CQ, overrun as u64, cqn),
            AsyncEvent::Port { port, active } => (TAG_PORT, active as u64, port as u32),
            AsyncEvent::Srq { srqn, limit } => (TAG_SRQ, limit as u64, srqn),
        };
        (tag << 56) | (detail << 32) | (n & 0xff_ffff) as u64
    }

    /// The event [`AsyncEvent::pack`] made `w` of; `None` for anything
    /// else (0, an empty slot).
    pub fn unpack(w: u64) -> Option<AsyncEvent> {
        let detail = (w >> 32) as u8;
        let n = (w & 0xff_ffff) as u32;
        match w >> 56 {
            TAG_QP => {
                let event = *QP_EVENTS.get(usize::from(detail).checked_sub(1)?)?;
                Some(AsyncEvent::Qp { qpn: n, event })
            }
            TAG_CQ => Some(AsyncEvent::CqError {
                cqn: n,
                overrun: detail != 0,
            }),
            TAG_PORT => Some(AsyncEvent::Port {
                port: n as u8,
                active: detail != 0,
            }),
            TAG_SRQ => Some(AsyncEvent::Srq {
                srqn: n,
                limit: detail != 0,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_and_commands() {
        assert_eq!(
            decode(kind::COMP, 0, [0xff00_00c3, 0, 0]),
            Eqe::Completion { cqn: 0xc3 }
        );
        assert_eq!(decode(kind::CMD, 0, [0, 0x1234, 0]), Eqe::Command);
        assert_eq!(
            decode(0x0f, 0, [0; 3]),
            Eqe::Other {
                kind: 0x0f,
                subtype: 0
            }
        );
    }

    #[test]
    fn qp_events_as_mlx4_ib_names_them() {
        let cases = [
            (kind::PATH_MIG, IbEvent::PathMig),
            (kind::COMM_EST, IbEvent::CommEst),
            (kind::SQ_DRAINED, IbEvent::SqDrained),
            (kind::SRQ_QP_LAST_WQE, IbEvent::QpLastWqeReached),
            (kind::WQ_CATAS_ERROR, IbEvent::QpFatal),
            (kind::PATH_MIG_FAILED, IbEvent::PathMigErr),
            (kind::WQ_INVAL_REQ_ERROR, IbEvent::QpReqErr),
            (kind::WQ_ACCESS_ERROR, IbEvent::QpAccessErr),
        ];
        for (k, ib) in cases {
            let Eqe::Async(e) = decode(k, 0, [0x0100_0248, 0, 0]) else {
                panic!("type {k:#x}");
            };
            assert_eq!(e.ib_event(), ib);
            assert!(matches!(e, AsyncEvent::Qp { qpn: 0x248, .. }));
            assert_eq!(AsyncEvent::unpack(e.pack()), Some(e));
        }
    }

    #[test]
    fn cq_errors_and_port_changes() {
        let e = decode(kind::CQ_ERROR, 0, [0xc5, 0, 0x01]);
        assert_eq!(
            e,
            Eqe::Async(AsyncEvent::CqError {
                cqn: 0xc5,
                overrun: true
            })
        );
        let down = decode(kind::PORT_CHANGE, PORT_CHANGE_SUBTYPE_DOWN, [0, 0, 1 << 28]);
        let up = decode(kind::PORT_CHANGE, 4, [0, 0, 1 << 28]);
        let Eqe::Async(down) = down else { panic!() };
        let Eqe::Async(up) = up else { panic!() };
        assert_eq!(
            down,
            AsyncEvent::Port {
                port: 1,
                active: false
            }
        );
        assert_eq!(
            (down.ib_event(), up.ib_event()),
            (IbEvent::PortErr, IbEvent::PortActive)
        );
        for e in [down, up] {
            assert_ne!(e.pack(), 0);
            assert_eq!(AsyncEvent::unpack(e.pack()), Some(e));
        }
    }

    #[test]
    fn srq_events_as_mlx4_ib_srq_event() {
        let Eqe::Async(limit) = decode(kind::SRQ_LIMIT, 0, [0xff00_0041, 0, 0]) else {
            panic!()
        };
        let Eqe::Async(catas) = decode(kind::SRQ_CATAS_ERROR, 0, [0x41, 0, 0]) else {
            panic!()
        };
        assert_eq!(
            limit,
            AsyncEvent::Srq {
                srqn: 0x41,
                limit: true
            }
        );
        assert_eq!(
            (limit.ib_event(), catas.ib_event()),
            (IbEvent::SrqLimitReached, IbEvent::SrqErr)
        );
        for e in [limit, catas] {
            assert_eq!(AsyncEvent::unpack(e.pack()), Some(e));
        }
    }

    #[test]
    fn only_packed_words_unpack() {
        assert_eq!(AsyncEvent::unpack(0), None);
        assert_eq!(AsyncEvent::unpack(1 << 56), None);
        assert_eq!(AsyncEvent::unpack((1 << 56) | (9 << 32)), None);
        assert_eq!(AsyncEvent::unpack(7 << 56), None);
    }
}
