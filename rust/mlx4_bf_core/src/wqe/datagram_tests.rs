// SPDX-License-Identifier: GPL-2.0

//! UD SENDs through the QP_POST rules: libmlx4's layout (control, the
//! datagram segment, then the data from byte 64) passes for the QP's own
//! PD and goes by BlueFlame when it fits; an address vector of another PD,
//! an opcode UD cannot carry or a WQE too short for the segment is refused
//! with its reason.

use super::*;
use crate::region::check_gathers;
use crate::wqe_build::{build_datagram_inline, build_inline, Datagram};
use proptest::prelude::*;

const PD: u32 = 0x2001;
const QPN: u32 = 0x248;

fn to() -> Datagram {
    Datagram {
        port: 1,
        pd: PD,
        dlid: 1,
        dqpn: 0x249,
        qkey: 0x1111_1111,
    }
}

fn queued(buf: &mut [u8], pd: u32) -> Result<WqeInfo, Reject> {
    validate_queued(buf, QPN, MAX_WQE_LEN, Transport::Datagram { pd })
}

proptest! {
    /// Any payload libmlx4 sends inline validates for the QP's PD, its
    /// bytes counted, and takes BlueFlame while the WQE fits the buffer.
    #[test]
    fn libmlx4s_ud_send_is_valid(payload in proptest::collection::vec(any::<u8>(), 0..880)) {
        let mut b = [0u8; MAX_WQE_LEN];
        let len = build_datagram_inline(&mut b, &to(), &payload).unwrap();
        prop_assert!(len >= 64);
        let info = queued(&mut b[..len], PD).unwrap();
        prop_assert_eq!(info.opcode, OPCODE_SEND);
        prop_assert_eq!(info.inline_bytes as usize, payload.len());
        prop_assert_eq!(info.gather_segs, 0);
        prop_assert_eq!(fits_blueflame(&info, 256), len <= 256);
        // The same bytes are no connected QP's WQE: the segment would be
        // read as data.
        let mut c = b;
        prop_assert!(validate_queued(&mut c[..len], QPN, MAX_WQE_LEN, Transport::Connected).is_err()
            || payload.is_empty());
    }
}

#[test]
fn an_address_vector_of_another_pd_is_refused() {
    let mut b = [0u8; MAX_WQE_LEN];
    let len = build_datagram_inline(&mut b, &to(), &[7; 12]).unwrap();
    let before = b;
    assert_eq!(queued(&mut b[..len], PD + 1), Err(Reject::Address));
    assert_eq!(b, before, "a refused WQE is left as it was");
    // The port bits are not the PD's.
    let mut p = before;
    p[CTRL_LEN] = 2;
    assert!(queued(&mut p[..len], PD).is_ok());
}

#[test]
fn ud_carries_sends_only() {
    for opcode in [OPCODE_RDMA_WRITE, OPCODE_RDMA_READ, OPCODE_ATOMIC_FA] {
        let mut b = [0u8; MAX_WQE_LEN];
        let len = build_datagram_inline(&mut b, &to(), &[7; 12]).unwrap();
        b[3] = opcode as u8;
        assert_eq!(
            queued(&mut b[..len], PD),
            Err(Reject::Opcode),
            "opcode {opcode:#x}"
        );
    }
    let mut b = [0u8; MAX_WQE_LEN];
    let len = build_datagram_inline(&mut b, &to(), &[7; 12]).unwrap();
    b[3] = OPCODE_SEND_IMM as u8;
    assert!(queued(&mut b[..len], PD).is_ok());
}

#[test]
fn a_wqe_without_room_for_the_segment_is_refused() {
    // An RC SEND of 12 bytes (32 bytes) on a UD QP.
    let mut b = [0u8; MAX_WQE_LEN];
    let len = build_inline(&mut b, OPCODE_SEND, None, &[7; 12]).unwrap();
    assert_eq!(queued(&mut b[..len], PD), Err(Reject::Length));
}

#[test]
fn a_gathered_ud_send_checks_its_segment_as_any_send() {
    let mut b = [0u8; MAX_WQE_LEN];
    let len = build_datagram_inline(&mut b, &to(), &[]).unwrap();
    assert_eq!(len, 64);
    // One data segment after the datagram one.
    put_be32(&mut b, 4, 5);
    put_be32(&mut b, 64, 0x40);
    put_be32(&mut b, 68, 0x100);
    b[72..80].copy_from_slice(&0x1000u64.to_be_bytes());
    let info = queued(&mut b[..80], PD).unwrap();
    assert_eq!(info.gather_segs, 1);
    let region = |_| Some((0x1000u64, 0x40u64, 0u32));
    assert_eq!(check_gathers(&b[..80], &info, region), Ok(()));
    let short = |_| Some((0x1000u64, 0x3fu64, 0u32));
    assert_eq!(check_gathers(&b[..80], &info, short), Err(Reject::Range));
}
