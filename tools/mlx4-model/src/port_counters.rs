//! Port 1's traffic counters, what its Performance Management Agent
//! reports (`firmware::pma`): the packets and data octets the port
//! transmits and receives, as IB counts them (PortCounters,
//! PortCountersExtended, IB spec 16.1.3.5 and A13.6.1).
//!
//! The data path counts a message here where it puts it on the wire
//! (`datapath::wire`). A message is counted as the packets IB splits it
//! into: ceil(payload / path MTU), at least one. Each packet's octets are
//! what IB's PortXmitData counts, the bytes between the start and end of
//! packet delimiters: LRH (8), a GRH (40) if the datagram carries one, BTH
//! (12), the packet type's extended headers, the payload padded to 4 bytes
//! (BTH PadCnt), ICRC (4) and VCRC (2). The model has no ACK or NAK
//! packets (its loopback neither acknowledges nor retransmits), so none is
//! counted; the responses that carry data are (RDMA read responses, atomic
//! acknowledges). The port is in loopback: what it transmits to its own
//! LID it also receives. Every packet is unicast (nothing joins a
//! multicast group).
//!
//! The counters are kept in octets and packets, 64 bits wide; the PMA
//! divides the octets by 4 (IB's unit) and saturates the 32-bit
//! PortCounters views. A device reset clears them, as it does a real
//! adapter's; the analyzer's counter reset does not (it is not the port's).

use serde::Serialize;

/// LRH, BTH, ICRC and VCRC: every packet's fixed part.
const BASE: u64 = 8 + 12 + 4 + 2;
const GRH: u64 = 40;
const RETH: u64 = 16;
const AETH: u64 = 4;
const DETH: u64 = 8;
const IMM: u64 = 4;
const ATOMIC_ETH: u64 = 28;
const ATOMIC_ACK_ETH: u64 = 8;
/// The MTU of a path whose context names none (1..5): the port's, 4096.
const PORT_MTU: u64 = 4096;

/// One message on the wire, by what its packets carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    /// SEND (with immediate data if `imm`).
    Send {
        payload: u64,
        imm: bool,
    },
    /// RDMA WRITE: RETH on the first packet.
    Write {
        payload: u64,
        imm: bool,
    },
    /// RDMA READ request: one packet with RETH.
    ReadRequest,
    /// RDMA READ response: AETH on the first and the last packet.
    ReadResponse {
        payload: u64,
    },
    AtomicRequest,
    /// Atomic acknowledge: AETH and AtomicAckETH.
    AtomicResponse,
    /// UD SEND: one packet with DETH (and a GRH if `grh`).
    Datagram {
        payload: u64,
        imm: bool,
        grh: bool,
    },
    /// A special QP's (MLX) packet, whose headers and ICRC slot the driver
    /// wrote into the WQE: `bytes` of them, then the VCRC.
    Raw {
        bytes: u64,
    },
}

impl Message {
    /// (packets, octets) on a path of MTU `mtu` (IB's encoding, 1..5 =
    /// 256..4096; another value is the port's MTU).
    pub fn wire(self, mtu: u8) -> (u64, u64) {
        let mtu = match mtu {
            1..=5 => 128 << mtu,
            _ => PORT_MTU,
        };
        let split = |p: u64| p.div_ceil(mtu).max(1);
        let pad = |p: u64| p.next_multiple_of(4);
        match self {
            Message::Send { payload, imm } => {
                let n = split(payload);
                (n, n * BASE + pad(payload) + imm_len(imm))
            }
            Message::Write { payload, imm } => {
                let n = split(payload);
                (n, n * BASE + RETH + pad(payload) + imm_len(imm))
            }
            Message::ReadRequest => (1, BASE + RETH),
            Message::ReadResponse { payload } => {
                let n = split(payload);
                let aeth = if n == 1 { AETH } else { 2 * AETH };
                (n, n * BASE + aeth + pad(payload))
            }
            Message::AtomicRequest => (1, BASE + ATOMIC_ETH),
            Message::AtomicResponse => (1, BASE + AETH + ATOMIC_ACK_ETH),
            Message::Datagram { payload, imm, grh } => {
                let g = if grh { GRH } else { 0 };
                (1, BASE + g + DETH + pad(payload) + imm_len(imm))
            }
            Message::Raw { bytes } => (1, pad(bytes) + 2),
        }
    }
}

fn imm_len(imm: bool) -> u64 {
    if imm {
        IMM
    } else {
        0
    }
}

#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct PortCounters {
    pub xmit_octets: u64,
    pub rcv_octets: u64,
    pub xmit_packets: u64,
    pub rcv_packets: u64,
    pub unicast_xmit_packets: u64,
    pub unicast_rcv_packets: u64,
}

impl PortCounters {
    /// `m` transmitted on a path of MTU `mtu`; received too if `looped`
    /// (addressed to the port's own LID).
    pub fn count(&mut self, m: Message, mtu: u8, looped: bool) {
        let (packets, octets) = m.wire(mtu);
        self.xmit_packets = self.xmit_packets.saturating_add(packets);
        self.unicast_xmit_packets = self.unicast_xmit_packets.saturating_add(packets);
        self.xmit_octets = self.xmit_octets.saturating_add(octets);
        if looped {
            self.rcv_packets = self.rcv_packets.saturating_add(packets);
            self.unicast_rcv_packets = self.unicast_rcv_packets.saturating_add(packets);
            self.rcv_octets = self.rcv_octets.saturating_add(octets);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_and_octets_of_each_message() {
        let send = |payload| Message::Send {
            payload,
            imm: false,
        };
        assert_eq!(send(0).wire(5), (1, 26));
        assert_eq!(send(5).wire(5), (1, 26 + 8));
        assert_eq!(send(4096).wire(5), (1, 26 + 4096));
        assert_eq!(send(4097).wire(5), (2, 52 + 4100));
        assert_eq!(send(1000).wire(1), (4, 104 + 1000));
        assert_eq!(send(1000).wire(0), (1, 1026));
        let w = Message::Write {
            payload: 8,
            imm: true,
        };
        assert_eq!(w.wire(5), (1, 26 + 16 + 8 + 4));
        assert_eq!(Message::ReadRequest.wire(5), (1, 42));
        assert_eq!(Message::ReadResponse { payload: 0 }.wire(5), (1, 30));
        assert_eq!(
            Message::ReadResponse { payload: 8192 }.wire(5),
            (2, 52 + 8 + 8192)
        );
        assert_eq!(Message::AtomicRequest.wire(5), (1, 54));
        assert_eq!(Message::AtomicResponse.wire(5), (1, 38));
        let ud = Message::Datagram {
            payload: 3,
            imm: false,
            grh: true,
        };
        assert_eq!(ud.wire(5), (1, 26 + 40 + 8 + 4));
        assert_eq!(Message::Raw { bytes: 256 + 28 }.wire(5), (1, 286));
    }
}
