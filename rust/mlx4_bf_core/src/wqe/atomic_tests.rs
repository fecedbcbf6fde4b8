// SPDX-License-Identifier: GPL-2.0

//! Atomics through the WQE rules: libmlx4's layout passes, each way to
//! break it is refused with its reason, and the regions it names are
//! checked as an RDMA read's (where data lands) and with remote atomics.

use super::*;
use crate::region::{check_gathers, check_rdma, ib_access_perm, message_len, raddr};
use crate::verbs::access as ib;
use crate::wqe_build::{build_atomic, build_inline, AtomicOp};
use proptest::prelude::*;

const LEN: usize = CTRL_LEN + RADDR_LEN + ATOMIC_LEN + GATHER_LEN;

fn atomic(op: AtomicOp) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    assert_eq!(
        build_atomic(&mut b, op, (0x8000, 0x700), (0x1000, 0x100)),
        Some(LEN)
    );
    b
}

fn ops() -> impl Strategy<Value = AtomicOp> {
    prop_oneof![
        (any::<u64>(), any::<u64>())
            .prop_map(|(compare, swap)| AtomicOp::CompareSwap { compare, swap }),
        any::<u64>().prop_map(|add| AtomicOp::FetchAdd { add }),
    ]
}

proptest! {
    /// Whatever the operands and addresses, libmlx4's atomic is valid, one
    /// data segment of 8 bytes, never BlueFlame (it gathers), and names
    /// its remote address.
    #[test]
    fn libmlx4s_atomic_is_valid(
        op in ops(),
        remote in any::<(u64, u32)>(),
        result in any::<(u64, u32)>(),
    ) {
        let mut b = [0u8; LEN];
        prop_assert_eq!(build_atomic(&mut b, op, remote, result), Some(LEN));
        let info = validate(&b, MAX_WQE_LEN).unwrap();
        let opcode = match op {
            AtomicOp::CompareSwap { .. } => OPCODE_ATOMIC_CS,
            AtomicOp::FetchAdd { .. } => OPCODE_ATOMIC_FA,
        };
        prop_assert_eq!(info, WqeInfo { size16: 4, opcode, inline_bytes: 0, gather_segs: 1 });
        prop_assert_eq!(raddr(&b, &info), Some(remote));
        prop_assert_eq!(message_len(&b, &info), 8);
        prop_assert_eq!(choose_path(&info, 0, 256), Ok(Path::Doorbell));
        let mut queued = b;
        prop_assert!(validate_queued(&mut queued, 0x41, MAX_WQE_LEN, Transport::Connected).is_ok());
    }
}

#[test]
fn an_atomic_returns_into_exactly_one_8_byte_segment() {
    let b = atomic(AtomicOp::FetchAdd { add: 1 });
    // No data segment: the WQE ends after the atomic segment.
    let mut short = b;
    short[7] = 3;
    assert_eq!(validate(&short[..48], MAX_WQE_LEN), Err(Reject::Length));
    // A count other than the operand's.
    for count in [0u32, 4, 16] {
        let mut c = b;
        c[48..52].copy_from_slice(&count.to_be_bytes());
        assert_eq!(
            validate(&c, MAX_WQE_LEN),
            Err(Reject::Gather),
            "count {count}"
        );
    }
    // Two data segments.
    let mut two = [0u8; LEN + GATHER_LEN];
    two[..LEN].copy_from_slice(&b);
    two[LEN..].copy_from_slice(&b[48..]);
    two[7] = 5;
    assert_eq!(validate(&two, MAX_WQE_LEN), Err(Reject::Gather));
    // The old value carried inline: there is nothing to send.
    let mut inl = b;
    inl[48..52].copy_from_slice(&(INLINE_SEG | 8).to_be_bytes());
    assert_eq!(validate(&inl, MAX_WQE_LEN), Err(Reject::Inline));
    // The remote address segment's reserved dword.
    let mut rsvd = b;
    rsvd[31] = 1;
    assert_eq!(validate(&rsvd, MAX_WQE_LEN), Err(Reject::Ctrl));
}

#[test]
fn masked_atomics_stay_refused() {
    // Not advertised (libmlx4 never builds them): 0x14, 0x15.
    for opcode in [0x14u32, 0x15] {
        let mut b = atomic(AtomicOp::FetchAdd { add: 1 });
        b[3] = opcode as u8;
        assert_eq!(validate(&b, MAX_WQE_LEN), Err(Reject::Opcode));
    }
}

#[test]
fn an_inline_write_relabelled_atomic_has_no_atomic_segment() {
    // Control, remote address, 8 inline bytes: 48 bytes, no room for the
    // atomic segment and its data segment.
    let mut b = [0u8; 64];
    let n = build_inline(&mut b, OPCODE_ATOMIC_FA, Some((0x10, 1)), &[1; 8]).unwrap();
    assert_eq!(validate(&b[..n], MAX_WQE_LEN), Err(Reject::Length));
}

#[test]
fn the_old_value_lands_in_a_locally_writable_region() {
    let b = atomic(AtomicOp::CompareSwap {
        compare: 1,
        swap: 2,
    });
    let info = validate(&b, MAX_WQE_LEN).unwrap();
    let rw = ib_access_perm(ib::LOCAL_WRITE);
    let ro = ib_access_perm(0);
    assert_eq!(check_gathers(&b, &info, |_| Some((0x1000, 8, rw))), Ok(()));
    assert_eq!(
        check_gathers(&b, &info, |_| Some((0x1000, 8, ro))),
        Err(Reject::Lkey)
    );
    assert_eq!(
        check_gathers(&b, &info, |_| Some((0x1001, 8, rw))),
        Err(Reject::Range)
    );
    assert_eq!(check_gathers(&b, &info, |_| None), Err(Reject::Lkey));
}

#[test]
fn the_remote_operand_needs_remote_atomic_around_its_8_bytes() {
    let b = atomic(AtomicOp::FetchAdd { add: 1 });
    let info = validate(&b, MAX_WQE_LEN).unwrap();
    let atomic = ib_access_perm(ib::LOCAL_WRITE | ib::REMOTE_ATOMIC);
    let rw = ib_access_perm(ib::LOCAL_WRITE | ib::REMOTE_WRITE | ib::REMOTE_READ);
    assert_eq!(check_rdma(&b, &info, |_| Some((0x8000, 8, atomic))), Ok(()));
    assert_eq!(
        check_rdma(&b, &info, |_| Some((0x8000, 8, rw))),
        Err(Reject::Rkey)
    );
    assert_eq!(
        check_rdma(&b, &info, |_| Some((0x8000, 7, atomic))),
        Err(Reject::Rkey)
    );
    assert_eq!(check_rdma(&b, &info, |_| None), Err(Reject::Rkey));
}
