//! MAD_IFC: the port's Performance Management Agent (class 0x04, class
//! version 1), which mlx4_ib's process_mad hands every PerfMgmt GET and
//! SET of the IB port (`ib/mad.c:ib_process_mad`, `mlx4_MAD_IFC`) and the
//! RDMA core's sysfs `ports/1/counters/*` read through it
//! (`core/sysfs.c:get_perf_mad`, `get_counter_table`). Layouts:
//! `include/rdma/ib_pma.h`, IB spec 16.1.3.
//!
//! - ClassPortInfo (GET): base and class version 1, capability mask
//!   `CAP_MASK` (extended width: the core reads data and packets from
//!   PortCountersExtended), RespTimeValue 18 (4.096 us * 2^18, about 1 s).
//! - PortCounters (GET, SET): the error counters 0 (the model's link has
//!   none), PortXmitData/PortRcvData (octets / 4), PortXmitPkts/PortRcvPkts
//!   from the port's counters, saturating at 2^32 - 1 as IB requires;
//!   PortXmitWait 0 (nothing ever waits for credits).
//! - PortCountersExtended (GET, SET): the same 64 bits wide, unicast
//!   packets, multicast 0 (nothing joins a group).
//!
//! PortSelect must be the port (1) or 0xFF (all ports: the one there is);
//! another is "invalid value in attribute or modifier". A SET clears the
//! counters its CounterSelect names (perfquery -r) and answers as a GET
//! does, with the values after the clear. Both attributes read one set of
//! counters: clearing PortXmitData through either clears it for both.
//! The response is GetResp (0x81) with the transaction id and attribute
//! echoed; a bad version, method or attribute keeps the request's data and
//! sets the MAD status.

use crate::bytes::{be16, put_be16, put_be32, put_be64};
use crate::port_counters::PortCounters;

pub const CLASS_PERF_MGMT: u8 = 0x04;
const METHOD_GET: u8 = 0x01;
const METHOD_SET: u8 = 0x02;
const METHOD_GET_RESP: u8 = 0x81;
/// The PMA's data: after the 24-byte MAD header and 40 reserved bytes.
const DATA: usize = 64;

/// MAD status (IB 13.4.7): the invalid-field code in bits 4..2.
pub mod status {
    pub const BAD_VERSION: u16 = 0x0004;
    pub const METHOD_UNSUPPORTED: u16 = 0x0008;
    pub const ATTR_UNSUPPORTED: u16 = 0x000c;
    pub const INVALID_FIELD: u16 = 0x001c;
}

pub mod attr {
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    pub const PORT_COUNTERS: u16 = 0x0012;
    pub const PORT_COUNTERS_EXT: u16 = 0x001d;
}

/// ClassPortInfo's CapabilityMask: IB_PMA_CLASS_CAP_EXT_WIDTH (bit 9),
/// what mlx4_ib's own PMA for its Ethernet ports also advertises
/// (`ib/mad.c:iboe_process_mad_port_info`).
pub const CAP_MASK: u16 = 1 << 9;
/// ClassPortInfo's RespTimeValue (CapabilityMask2 is 0).
pub const RESP_TIME: u32 = 18;

/// PortCounters' CounterSelect bits for the counters the model keeps.
mod sel {
    pub const XMIT_DATA: u16 = 1 << 12;
    pub const RCV_DATA: u16 = 1 << 13;
    pub const XMIT_PKTS: u16 = 1 << 14;
    pub const RCV_PKTS: u16 = 1 << 15;
}

/// PortCountersExtended's CounterSelect bits.
mod selx {
    pub const XMIT_DATA: u16 = 1 << 0;
    pub const RCV_DATA: u16 = 1 << 1;
    pub const XMIT_PKTS: u16 = 1 << 2;
    pub const RCV_PKTS: u16 = 1 << 3;
    pub const UNI_XMIT_PKTS: u16 = 1 << 4;
    pub const UNI_RCV_PKTS: u16 = 1 << 5;
}

/// The response to the PerfMgmt MAD `mad` (256 bytes) of port 1, whose
/// counters are `port` (a SET clears some of them).
pub fn respond(mad: &[u8], port: &mut PortCounters) -> [u8; super::mad::MAD_SIZE] {
    let mut out = [0u8; super::mad::MAD_SIZE];
    out.copy_from_slice(&mad[..super::mad::MAD_SIZE]);
    out[3] = METHOD_GET_RESP;
    put_be16(&mut out, 4, 0);
    match answer(mad, port) {
        Ok(data) => {
            out[DATA..].fill(0);
            out[DATA..DATA + data.len()].copy_from_slice(&data);
        }
        Err(st) => put_be16(&mut out, 4, st),
    }
    out
}

/// The attribute's data, or the MAD status.
fn answer(mad: &[u8], port: &mut PortCounters) -> Result<Vec<u8>, u16> {
    if mad[0] != 1 || mad[2] != 1 {
        return Err(status::BAD_VERSION);
    }
    let (method, attr_id) = (mad[3], be16(mad, 16));
    if method != METHOD_GET && method != METHOD_SET {
        return Err(status::METHOD_UNSUPPORTED);
    }
    let req = &mad[DATA..];
    let counters = matches!(attr_id, attr::PORT_COUNTERS | attr::PORT_COUNTERS_EXT);
    if counters && req[1] != 1 && req[1] != 0xff {
        return Err(status::INVALID_FIELD);
    }
    let select = be16(req, 2);
    match (attr_id, method) {
        (attr::CLASS_PORT_INFO, METHOD_GET) => {
            let mut d = vec![0u8; 72];
            d[0] = 1; // base version
            d[1] = 1; // class version
            put_be16(&mut d, 2, CAP_MASK);
            put_be32(&mut d, 4, RESP_TIME);
            Ok(d)
        }
        (attr::PORT_COUNTERS, _) => {
            if method == METHOD_SET {
                clear(
                    port,
                    select,
                    [
                        sel::XMIT_DATA,
                        sel::RCV_DATA,
                        sel::XMIT_PKTS,
                        sel::RCV_PKTS,
                        0,
                        0,
                    ],
                );
            }
            Ok(port_counters(req[1], port))
        }
        (attr::PORT_COUNTERS_EXT, _) => {
            if method == METHOD_SET {
                let bits = [
                    selx::XMIT_DATA,
                    selx::RCV_DATA,
                    selx::XMIT_PKTS,
                    selx::RCV_PKTS,
                    selx::UNI_XMIT_PKTS,
                    selx::UNI_RCV_PKTS,
                ];
                clear(port, select, bits);
            }
            Ok(port_counters_ext(req[1], port))
        }
        _ => Err(status::ATTR_UNSUPPORTED),
    }
}

/// Clears the counters whose bit (in the order xmit data, rcv data, xmit
/// packets, rcv packets, unicast xmit, unicast rcv; 0: none) `select` has.
fn clear(p: &mut PortCounters, select: u16, bits: [u16; 6]) {
    let fields = [
        &mut p.xmit_octets,
        &mut p.rcv_octets,
        &mut p.xmit_packets,
        &mut p.rcv_packets,
        &mut p.unicast_xmit_packets,
        &mut p.unicast_rcv_packets,
    ];
    for (f, bit) in fields.into_iter().zip(bits) {
        if select & bit != 0 {
            *f = 0;
        }
    }
}

/// A 32-bit counter: saturates, never wraps (IB 16.1.3.5).
fn sat32(v: u64) -> u32 {
    v.min(u64::from(u32::MAX)) as u32
}

/// PortCounters (`ib_pma_portcounters`): the errors stay 0.
fn port_counters(port_select: u8, p: &PortCounters) -> Vec<u8> {
    let mut d = vec![0u8; 44];
    d[1] = port_select;
    put_be32(&mut d, 24, sat32(p.xmit_octets / 4));
    put_be32(&mut d, 28, sat32(p.rcv_octets / 4));
    put_be32(&mut d, 32, sat32(p.xmit_packets));
    put_be32(&mut d, 36, sat32(p.rcv_packets));
    d
}

/// PortCountersExtended (`ib_pma_portcounters_ext`).
fn port_counters_ext(port_select: u8, p: &PortCounters) -> Vec<u8> {
    let mut d = vec![0u8; 72];
    d[1] = port_select;
    put_be64(&mut d, 8, p.xmit_octets / 4);
    put_be64(&mut d, 16, p.rcv_octets / 4);
    put_be64(&mut d, 24, p.xmit_packets);
    put_be64(&mut d, 32, p.rcv_packets);
    put_be64(&mut d, 40, p.unicast_xmit_packets);
    put_be64(&mut d, 48, p.unicast_rcv_packets);
    d
}
