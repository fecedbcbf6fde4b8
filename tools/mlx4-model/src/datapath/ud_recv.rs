//! A datagram `ud::ud_route` found a receiving UD QP `d` for, by the
//! rules of `datapath::ud`, continued:
//!
//! l. the receive WQE at `d`'s consumer index (the RQ doorbell record said
//!    one is posted) with every segment's key checked with LOCAL_WRITE
//!    (`receive_wqe`); a refused segment: `d`'s receive completes with
//!    LOCAL_PROT_ERR;
//! m. the first 40 bytes of its scatter list are the GRH slot: the list
//!    must hold 40 + the message's length; else `d`'s receive completes
//!    with LOCAL_LENGTH_ERR (as an RC receive too short does; rxe too,
//!    `rxe_resp_check_length`, "IBA C9-92");
//! n. with a GRH (the address vector's g_slid bit 7) the slot is written
//!    (`grh`, trace `dma_write` what `grh`), else it is left as it was;
//!    the message lands from byte 40 of the list on (what `payload`); the
//!    receive WQE is consumed and the receive CQE (`ud_recv_cqe`) written.
//!
//! A receive that fails by l or m (or a DMA the model cannot make) is the
//! receiver's alone: its error CQE consumes the receive WQE and `d` goes to
//! ERR, as after any error CQE; the sender still completes in success (no
//! acknowledgement comes back on UD). Counted in `ud_recv_errors` (0x6a8;
//! a length error in 0x520 too, a refused segment in 0x548/0x5a0) and
//! recorded (`ud_recv_error`). A doorbell record or receive WQE the model
//! cannot read moves `d` to ERR without a CQE (`receive_failures`), as for
//! RC.

use super::deliver::recv_cqe;
use super::engine::Engine;
use super::recv::{Landing, Refused};
use super::ud::drop;
use crate::bytes::{put_be16, put_be32, put_be64};
use crate::cq::syndrome;
use crate::firmware::mad::{guid, GID_PREFIX, LID};
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::qp::QpState;
use crate::rq;
use crate::wqe::{opcode, Ctrl, Datagram};
use serde_json::json;

/// The GRH slot at the start of every UD receive's scatter list.
pub const GRH_SIZE: u64 = 40;
/// IB's headers after the GRH and the trailer its PayLen counts: BTH,
/// DETH, ImmDt, ICRC.
const BTH: u64 = 12;
const DETH: u64 = 8;
const IMM_DT: u64 = 4;
const ICRC: u64 = 4;
/// GRH: IP version 6, next header 0x1b (IB's BTH).
const IP_VERSION: u32 = 6;
const NEXT_HEADER_BTH: u8 = 0x1b;

/// The GRH a receive of the datagram `av` carrying `len` bytes (with an
/// immediate: `imm`) finds in its first 40 bytes, as IB defines it
/// (IBA 8.3): version 6, the traffic class and flow label from the address
/// vector, PayLen (the BTH, the DETH, the immediate, the payload padded to
/// 4 bytes and the ICRC), next header 0x1b, the hop limit, the SGID (the
/// sender port's GID at the vector's gid_index: prefix and GUID, 0 for an
/// index the port has no GUID at) and the DGID.
pub fn grh(av: &Datagram, len: u64, imm: bool) -> [u8; GRH_SIZE as usize] {
    let mut g = [0u8; GRH_SIZE as usize];
    let vtf = IP_VERSION << 28 | u32::from(av.tclass) << 20 | av.flow_label;
    put_be32(&mut g, 0, vtf);
    let pad = (4 - len % 4) % 4;
    let imm = if imm { IMM_DT } else { 0 };
    let pay_len = BTH + DETH + imm + len + pad + ICRC;
    put_be16(&mut g, 4, pay_len.min(u64::from(u16::MAX)) as u16);
    g[6] = NEXT_HEADER_BTH;
    g[7] = av.hop_limit;
    put_be64(&mut g, 8, GID_PREFIX);
    put_be64(&mut g, 16, guid(av.gid_index));
    g[24..40].copy_from_slice(&av.dgid);
    g
}

/// A UD receive CQE (libmlx4 `mlx4_parse_cqe`, `ib/cq.c:mlx4_ib_poll_one`):
/// my_qpn `d`; 0x04 the immediate of a SEND_IMM, else the receiver's P_Key
/// index (`immed_rss_invalid & 0x7f`); 0x08 g_mlpath_rqpn: bit 31 GRH,
/// bits 30..24 the DLID's path bits (0: LMC 0), bits 23..0 the source QP
/// `s`; 0x0c sl_vid, the SL in bits 15..12; 0x0e rlid, the source LID (the
/// port's: LMC 0, the vector's source path bits add nothing); 0x14
/// byte_cnt, the message's length + 40 (the GRH slot, GRH or not); 0x18
/// the RQ index; 0x1f opcode SEND or SEND_IMM.
#[allow(clippy::too_many_arguments)]
pub fn ud_recv_cqe(
    s: u32,
    d: u32,
    rq_index: u32,
    c: &Ctrl,
    wqe_bytes: &[u8],
    av: &Datagram,
    len: u64,
    pkey_index: u8,
) -> [u8; 32] {
    let mut cqe = recv_cqe(s, d, rq_index, c, wqe_bytes, len + GRH_SIZE);
    if c.opcode != opcode::SEND_IMM {
        put_be32(&mut cqe, 0x04, u32::from(pkey_index));
    }
    if av.grh {
        cqe[0x08] |= 0x80;
    }
    put_be16(&mut cqe, 0x0c, u16::from(av.sl & 0xf) << 12);
    put_be16(&mut cqe, 0x0e, LID);
    cqe
}

impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// Rules k–n for the datagram `av` of `s` (its control segment `c`,
    /// the WQE `wqe_bytes`, the message `payload`, posted at `start`) at
    /// the UD QP `d`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ud_receive(
        &mut self,
        s: u32,
        d: u32,
        c: &Ctrl,
        wqe_bytes: &[u8],
        av: &Datagram,
        payload: &[u8],
        start: u64,
    ) {
        let Some(avail) = self.rq_available(d) else {
            return self.ud_receive_failed(s, d, "its RQ doorbell record cannot be read");
        };
        if avail == 0 {
            return self.ud_dropped(s, av, drop::RQ_EMPTY);
        }
        let Some((ci, cqn, pkey_index)) = self
            .qps
            .get(d)
            .map(|q| (self.qps.recv_index(d), q.cqn_recv, q.pkey_index()))
        else {
            return;
        };
        let l = match self.receive_wqe(d) {
            Ok(l) => l,
            Err(Refused::Unreadable) => {
                return self.ud_receive_failed(s, d, "its receive WQE cannot be read");
            }
            Err(Refused::Scatter) => {
                return self.ud_recv_error(s, d, ci, "scatter key", syndrome::LOCAL_PROT_ERR);
            }
        };
        let len = payload.len() as u64;
        if GRH_SIZE + len > rq::capacity(&l.segs) {
            self.env.counters.global.recv_length_errors += 1;
            return self.ud_recv_error(s, d, ci, "too long", syndrome::LOCAL_LENGTH_ERR);
        }
        if self.ud_land(d, &l, av, c, payload).is_err() {
            self.env.counters.global.scatter_errors += 1;
            return self.ud_recv_error(s, d, ci, "scatter DMA", syndrome::LOCAL_PROT_ERR);
        }
        let cqe = ud_recv_cqe(s, d, ci, c, wqe_bytes, av, len, pkey_index);
        let one_way = self.received(d, ci, cqn, cqe, c.solicited(), start);
        self.env.counters.global.ud_delivered += 1;
        self.env.trace.record("deliver", || {
            json!({"from": s, "to": d, "len": len, "rq_index": ci, "post_t_ns": start,
                   "one_way_ns": one_way, "ud": {"grh": av.grh, "qkey": av.qkey}})
        });
    }

    /// Rule n's writes: the GRH if the vector asks for one, then the
    /// message from byte 40 of the list on.
    fn ud_land(
        &mut self,
        d: u32,
        l: &Landing,
        av: &Datagram,
        c: &Ctrl,
        payload: &[u8],
    ) -> Result<(), ()> {
        if av.grh {
            let g = grh(av, payload.len() as u64, c.opcode == opcode::SEND_IMM);
            self.scatter(d, l, 0, &g, "grh")?;
        }
        self.scatter(d, l, GRH_SIZE, payload, "payload")
    }

    /// Rules l–m (or a DMA): `d`'s receive WQE `ci` completes with `syn`,
    /// `d` to ERR; the sender is not told.
    fn ud_recv_error(&mut self, s: u32, d: u32, ci: u32, why: &'static str, syn: u8) {
        self.receive_error(d, ci, syn);
        self.env.counters.global.ud_recv_errors += 1;
        self.env.trace.record(
            "ud_recv_error",
            || json!({"from": s, "to": d, "error": why, "syndrome": syn, "rq_index": ci}),
        );
    }

    /// `d` could not read its own queue: to ERR, no CQE, the sender not
    /// told.
    fn ud_receive_failed(&mut self, s: u32, d: u32, why: &'static str) {
        if let Some(dq) = self.qps.get_mut(d) {
            dq.state = QpState::Err;
        }
        self.env.counters.global.receive_failures += 1;
        self.env.counters.global.ud_recv_errors += 1;
        self.env.trace.record(
            "ud_recv_error",
            || json!({"from": s, "to": d, "error": why, "syndrome": null, "rq_index": null}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::{be16, be32};

    fn av(grh: bool) -> Datagram {
        Datagram {
            port: 1,
            pd: 0,
            grh,
            src_path_bits: 0,
            dlid: LID,
            gid_index: 0,
            stat_rate: 0,
            hop_limit: 64,
            sl: 5,
            tclass: 0xab,
            flow_label: 0x1_2345,
            dgid: [0x11; 16],
            dqpn: 0x41,
            qkey: 0x1111_1111,
        }
    }

    #[test]
    fn the_grh_is_ibs_with_paylen_padded() {
        let g = grh(&av(true), 5, false);
        assert_eq!(be32(&g, 0), 0x6ab1_2345);
        // BTH 12 + DETH 8 + 5 + pad 3 + ICRC 4.
        assert_eq!(be16(&g, 4), 32);
        assert_eq!((g[6], g[7]), (0x1b, 64));
        assert_eq!(g[8..24], super::super::ud::port_gid());
        assert_eq!(g[24..], [0x11; 16]);
        assert_eq!(be16(&grh(&av(true), 8, true), 4), 36, "ImmDt");
    }

    #[test]
    fn the_receive_cqe_says_what_libmlx4_reads() {
        let mut w = [0u8; 64];
        w[12..16].copy_from_slice(&[1, 2, 3, 4]);
        let c = Ctrl {
            opcode: opcode::SEND,
            ..Ctrl::decode(&w)
        };
        let cqe = ud_recv_cqe(0x40, 0x41, 7, &c, &w, &av(true), 100, 0);
        assert_eq!(be32(&cqe, 0x00), 0x41);
        assert_eq!(be32(&cqe, 0x04), 0, "P_Key index");
        assert_eq!(be32(&cqe, 0x08), 0x8000_0040, "GRH, source QP");
        assert_eq!((be16(&cqe, 0x0c) >> 12, be16(&cqe, 0x0e)), (5, LID));
        assert_eq!((be32(&cqe, 0x14), be16(&cqe, 0x18)), (140, 7));
        assert_eq!(cqe[0x1f], 0x01);
        let c = Ctrl {
            opcode: opcode::SEND_IMM,
            ..c
        };
        let cqe = ud_recv_cqe(0x40, 0x41, 7, &c, &w, &av(false), 0, 0);
        assert_eq!(
            (&cqe[4..8], cqe[0x08], cqe[0x1f]),
            (&[1, 2, 3, 4][..], 0, 0x02)
        );
        assert_eq!(be32(&cqe, 0x14), 40, "the GRH slot counts without a GRH");
    }
}
