//! Diag version 5: command faults (CMD_FAULT) and what a teardown leaves
//! behind (RESETS, LIVE), and DMA refused while Bus Master Enable is clear
//! (NO_MASTER_DMA); version 12: a command fault's skip, for the Nth command
//! with its opcode.

use super::harness::*;
use crate::command::{op, status};
use crate::diag::{CMD_FAULT, LIVE, NO_MASTER_DMA, RESETS, RESET_COUNTERS};
use crate::hcr::GO;
use crate::layout::*;
use serde_json::Value;

const FAIL: u32 = 1 << 16;
const STALL: u32 = 2 << 16;
/// CMD_FAULT's skip: `n` commands with the opcode run before it fires.
const fn skip(n: u32) -> u32 {
    n << 20
}
/// MAP_EQ's event mask bit of the CMD event.
const CMD_EVENTS: u64 = 1 << 0x0a;
/// Diag counters: EQEs written, MSI-X raised, commands executed.
const EQES: u64 = 0x58;
const IRQS: u64 = 0x60;
const COMMANDS: u64 = 0x68;

/// LIVE: (EQs + CQs in hardware ownership, QPs out of RESET).
fn live(h: &mut Harness) -> (u32, u32) {
    let v = h.diag_read(LIVE);
    (v as u32, (v >> 32) as u32)
}

/// CMD_FAULT: (the armed value, the faults fired).
fn cmd_fault(h: &mut Harness) -> (u32, u32) {
    let v = h.diag_read(CMD_FAULT);
    (v as u32, (v >> 32) as u32)
}

#[test]
fn a_failed_hw2sw_cq_leaves_the_cq_live() {
    let mut h = Harness::setup();
    assert_eq!(live(&mut h), (4, 1), "EQ 0 and 1, CQ 1 and 2; QP 0x40");
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), status::OK);
    assert_eq!(live(&mut h), (4, 0));
    h.diag_write(CMD_FAULT, FAIL | u32::from(op::HW2SW_CQ));
    assert_eq!(cmd_fault(&mut h), (FAIL | 0x17, 0));
    h.poke(OUT_MB, &[0xaa; 0x40]);
    assert_eq!(h.cmd(op::HW2SW_CQ, 0, CQN), status::INTERNAL_ERR);
    assert_eq!(live(&mut h), (4, 0), "the CQ is still the device's");
    assert!(h.dev.cqs().contains(CQN));
    assert_eq!(h.mem(OUT_MB, 0x40), [0xaa; 0x40], "not executed");
    assert_eq!(cmd_fault(&mut h), (0, 1), "one-shot");
    let f = h.records_of("command_fault");
    assert_eq!(f.len(), 1);
    assert_eq!(
        (&f[0]["opcode"], &f[0]["name"], &f[0]["mode"]),
        (&Value::from(0x17), &"HW2SW_CQ".into(), &"fail".into())
    );
    assert_eq!(h.records_of("command").last().unwrap()["status"], 1);
    assert!(h.error_codes().is_empty(), "an injected fault is no error");
    // Fired once: the retry runs.
    assert_eq!(h.cmd(op::HW2SW_CQ, 0, CQN), status::OK);
    assert_eq!(live(&mut h), (3, 0));
    h.check_invariants(false);
}

#[test]
fn a_failed_command_with_e_completes_by_event_too() {
    let mut h = Harness::setup();
    assert_eq!(h.cmd_full(op::MAP_EQ, 0, CMD_EVENTS, 0, 0, None), 0);
    h.eq_doorbell(0, 0, true);
    h.diag_write(CMD_FAULT, FAIL | u32::from(op::HW2SW_EQ));
    let st = h.cmd_full(op::HW2SW_EQ, 0, 0, 1, OUT_MB, Some(0x1234));
    assert_eq!(st, status::INTERNAL_ERR);
    let e = h.eqe(EQ0_BUF, 0);
    assert_eq!((e[1], &e[6..8], e[0x0f]), (0x0a, &[0x12, 0x34][..], 1));
    assert_eq!(h.dev.irq().raised, [0]);
    assert_eq!(live(&mut h), (4, 1));
    assert!(h.error_codes().is_empty());
}

#[test]
fn a_stalled_command_holds_go_until_a_reset() {
    let mut h = Harness::setup();
    assert_eq!(h.cmd_full(op::MAP_EQ, 0, CMD_EVENTS, 0, 0, None), 0);
    h.eq_doorbell(0, 0, true);
    let (eqes, cmds) = (h.diag_read(EQES), h.diag_read(COMMANDS));
    h.diag_write(CMD_FAULT, STALL | u32::from(op::TO_RST_QP));
    let st = h.cmd_go(op::TO_RST_QP, 2, 0, QPN, 0, Some(7));
    assert_eq!(st & GO, GO, "never completes");
    assert_eq!(st >> 24, 0, "no status");
    assert_eq!(h.read32(0, HCR_BASE + 0x18), st, "still pending");
    assert_eq!(h.diag_read(EQES), eqes, "no completion event");
    assert!(h.dev.irq().raised.is_empty());
    assert_eq!(h.diag_read(COMMANDS), cmds, "not executed");
    assert_eq!(live(&mut h), (4, 1), "the QP was not reset");
    assert_eq!(cmd_fault(&mut h), (0, 1));
    let f = h.records_of("command_fault");
    assert_eq!(
        (&f[0]["name"], &f[0]["mode"]),
        (&"2RST_QP".into(), &"stall".into())
    );
    assert!(h.error_codes().is_empty());
    // A command behind it is the driver's error, as always.
    h.cmd_go(op::NOP, 0, 0, 0, 0, None);
    assert_eq!(h.error_codes(), ["cmd_while_pending"]);
    // The last resort: the reset register idles the HCR and drops it all.
    assert_eq!(h.diag_read(RESETS), 0);
    h.reset_adapter();
    assert_eq!(h.read32(0, HCR_BASE + 0x18), 0, "idle, T=0");
    assert_eq!(h.diag_read(RESETS), 1);
    assert_eq!(live(&mut h), (0, 0));
    assert_eq!(h.cmd(op::QUERY_FW, 0, 0), status::OK, "the HCR works again");
    // The client's DEVICE_RESET counts too; the counter reset clears
    // neither count.
    h.dev.reset("vfio_user");
    h.diag_write(RESET_COUNTERS, 1);
    assert_eq!(h.diag_read(RESETS), 2);
    assert_eq!(cmd_fault(&mut h), (0, 1));
    let s = h.dev.summary();
    assert_eq!(
        (&s["device_resets"], &s["command_faults"]),
        (&2.into(), &1.into())
    );
}

#[test]
fn the_armed_fault_reads_back_and_waits_for_its_opcode() {
    let mut h = Harness::new();
    assert!(h.diag_read(0) >> 32 >= 12, "version 12 or later");
    assert_eq!(cmd_fault(&mut h), (0, 0));
    h.diag_write(CMD_FAULT, STALL | u32::from(op::HW2SW_MPT));
    assert_eq!(cmd_fault(&mut h), (STALL | 0x0f, 0));
    let mut b = [0u8; 4];
    h.dev.mmio_read(0, DIAG_BASE + CMD_FAULT, &mut b);
    assert_eq!(u32::from_le_bytes(b), STALL | 0x0f, "a 4-byte read");
    assert_eq!(h.cmd(op::NOP, 0, 0), status::OK, "another opcode runs");
    // Armed until it fires or is disarmed, whatever resets meanwhile.
    h.diag_write(RESET_COUNTERS, 1);
    h.reset_adapter();
    super::bringup::hca_up(&mut h);
    assert_eq!(cmd_fault(&mut h), (STALL | 0x0f, 0));
    h.diag_write(CMD_FAULT, u32::from(op::HW2SW_MPT));
    assert_eq!(cmd_fault(&mut h), (0, 0), "mode 0 disarms");
    assert_eq!(
        h.cmd(op::HW2SW_MPT, 1, 1),
        status::BAD_RES_STATE,
        "executed"
    );
    // Undefined modes and opcodes are refused, the armed fault kept.
    h.diag_write(CMD_FAULT, FAIL | u32::from(op::NOP));
    h.diag_write(CMD_FAULT, (3 << 16) | 0x31);
    h.diag_write(CMD_FAULT, FAIL | 0x1031);
    assert_eq!(h.error_codes(), ["diag_bad_access", "diag_bad_access"]);
    assert_eq!(cmd_fault(&mut h), (FAIL | 0x31, 0));
    assert_eq!(h.cmd(op::NOP, 0, 0), status::INTERNAL_ERR);
    assert_eq!(h.cmd(op::NOP, 0, 0), status::OK);
    assert_eq!(cmd_fault(&mut h), (0, 1));
    // The other new registers are read-only.
    h.diag_write(RESETS, 1);
    h.diag_write(LIVE, 1);
    h.diag_write(NO_MASTER_DMA, 1);
    assert_eq!(h.error_codes().len(), 5);
}

#[test]
fn the_third_hw2sw_cq_fails_after_two_let_through() {
    let mut h = Harness::setup();
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), status::OK);
    assert_eq!(
        h.sw2hw_cq(RCQN2, RCQ_LOG, UAR, 1, RCQ2_BUF, RCQ2_DB),
        status::OK
    );
    assert_eq!(live(&mut h), (5, 0), "EQ 0 and 1, CQ 1, 2 and 3");
    let armed = FAIL | u32::from(op::HW2SW_CQ);
    h.diag_write(CMD_FAULT, armed | skip(2));
    assert_eq!(cmd_fault(&mut h), (armed | skip(2), 0));
    // The first two run, each counting the skip down.
    assert_eq!(h.cmd(op::HW2SW_CQ, 0, CQN), status::OK);
    assert_eq!(cmd_fault(&mut h), (armed | skip(1), 0));
    assert_eq!(h.cmd(op::HW2SW_CQ, 0, RCQN), status::OK);
    assert_eq!(cmd_fault(&mut h), (armed, 0));
    assert_eq!(live(&mut h), (3, 0));
    // The third fails, not executed.
    h.poke(OUT_MB, &[0xaa; 0x40]);
    assert_eq!(h.cmd(op::HW2SW_CQ, 0, RCQN2), status::INTERNAL_ERR);
    assert_eq!(live(&mut h), (3, 0), "CQ 3 is still the device's");
    assert!(h.dev.cqs().contains(RCQN2));
    assert_eq!(h.mem(OUT_MB, 0x40), [0xaa; 0x40], "not executed");
    assert_eq!(cmd_fault(&mut h), (0, 1), "one-shot");
    let f = h.records_of("command_fault");
    assert_eq!(f.len(), 1);
    assert_eq!(
        (&f[0]["name"], &f[0]["mode"], &f[0]["skipped"]),
        (&"HW2SW_CQ".into(), &"fail".into(), &2.into())
    );
    assert!(h.error_codes().is_empty(), "an injected fault is no error");
    // The fourth runs.
    assert_eq!(h.cmd(op::HW2SW_CQ, 0, RCQN2), status::OK);
    assert_eq!(live(&mut h), (2, 0));
    assert_eq!(cmd_fault(&mut h), (0, 1));
    h.check_invariants(false);
}

#[test]
fn a_skip_waits_through_counter_and_device_resets() {
    let mut h = Harness::new();
    let armed = FAIL | u32::from(op::NOP);
    h.diag_write(CMD_FAULT, armed | skip(2));
    assert_eq!(h.cmd(op::NOP, 0, 0), status::OK);
    h.diag_write(RESET_COUNTERS, 1);
    h.dev.reset("vfio_user");
    h.reset_adapter();
    assert_eq!(h.diag_read(RESETS), 2);
    assert_eq!(cmd_fault(&mut h), (armed | skip(1), 0), "all kept it");
    // A command refused by the firmware (off after the reset) is a
    // command with the opcode all the same.
    assert_eq!(h.cmd(op::NOP, 0, 0), status::BAD_SYS_STATE);
    assert_eq!(cmd_fault(&mut h), (armed, 0));
    super::bringup::hca_up(&mut h);
    assert_eq!(cmd_fault(&mut h), (armed, 0), "the bring-up has no NOP");
    assert_eq!(h.cmd(op::NOP, 0, 0), status::INTERNAL_ERR);
    assert_eq!(h.cmd(op::NOP, 0, 0), status::OK);
    assert_eq!(cmd_fault(&mut h), (0, 1));
    assert_eq!(h.records_of("command_fault")[0]["skipped"], 2);
    assert!(h.error_codes().is_empty());
}

#[test]
fn other_opcodes_do_not_count_down_a_skip() {
    let mut h = Harness::setup();
    let armed = FAIL | u32::from(op::HW2SW_CQ);
    h.diag_write(CMD_FAULT, armed | skip(1));
    // Its neighbours, commands on the same CQ, failed ones.
    assert_eq!(h.cmd(op::NOP, 0, 0), status::OK);
    assert_eq!(
        h.sw2hw_cq(RCQN2, RCQ_LOG, UAR, 1, RCQ2_BUF, RCQ2_DB),
        status::OK
    );
    assert_eq!(h.cmd(op::HW2SW_EQ, 0, 1), status::RESOURCE_BUSY);
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, 1), status::BAD_RES_STATE);
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), status::OK);
    assert_eq!(cmd_fault(&mut h), (armed | skip(1), 0), "not one counted");
    assert_eq!(h.cmd(op::HW2SW_CQ, 0, CQN), status::OK);
    assert_eq!(cmd_fault(&mut h), (armed, 0));
    assert_eq!(h.cmd(op::HW2SW_CQ, 0, RCQN), status::INTERNAL_ERR);
    assert!(h.error_codes().is_empty());
}

#[test]
fn mode_0_disarms_whatever_the_skip_and_mode_3_is_refused() {
    let mut h = Harness::new();
    let armed = STALL | u32::from(op::HW2SW_MPT);
    h.diag_write(CMD_FAULT, armed | skip(0xfff));
    assert_eq!(cmd_fault(&mut h), (armed | skip(0xfff), 0), "the largest");
    h.diag_write(CMD_FAULT, u32::from(op::HW2SW_MPT) | skip(3));
    assert_eq!(cmd_fault(&mut h), (0, 0), "mode 0 disarms");
    assert_eq!(h.cmd(op::NOP, 0, 0), status::OK);
    // Refused with any skip, the armed fault kept: modes 3 and 15 (the
    // mode's bits are 16..19), an opcode above 0xfff.
    h.diag_write(CMD_FAULT, FAIL | u32::from(op::NOP) | skip(1));
    h.diag_write(CMD_FAULT, (3 << 16) | 0x31 | skip(1));
    h.diag_write(CMD_FAULT, (15 << 16) | 0x31);
    h.diag_write(CMD_FAULT, FAIL | 0x1031 | skip(1));
    assert_eq!(
        h.error_codes(),
        ["diag_bad_access", "diag_bad_access", "diag_bad_access"]
    );
    assert_eq!(cmd_fault(&mut h), (FAIL | 0x31 | skip(1), 0));
    assert_eq!(h.cmd(op::NOP, 0, 0), status::OK);
    assert_eq!(h.cmd(op::NOP, 0, 0), status::INTERNAL_ERR);
    assert_eq!(cmd_fault(&mut h), (0, 1));
}

#[test]
fn dma_and_msix_without_bus_mastering_are_refused_and_counted() {
    let mut h = Harness::setup();
    assert_eq!(h.cmd_full(op::MAP_EQ, 0, CMD_EVENTS, 0, 0, None), 0);
    h.arm_cq(UAR, CQN, 2, 0);
    h.eq_doorbell(1, 0, true);
    h.set_master(false);
    // A doorbell: the WQE fetch is not made, nothing runs, and the
    // doorbell is answered as one whose WQE cannot be fetched.
    let wqe = Harness::inline_send(QPN, 0, b"hi", true);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.doorbell(UAR, QPN);
    assert_eq!(h.diag_read(NO_MASTER_DMA), 1);
    assert_eq!(h.sq_ci(QPN), 0, "nothing executed");
    assert_eq!(h.error_codes(), ["doorbell_nothing_to_fetch"]);
    let r = h.records_of("no_master_dma");
    assert_eq!(
        (&r[0]["op"], &r[0]["what"]),
        (&"read".into(), &"wqe".into())
    );
    // A command's mailbox write and its completion EQE are dropped.
    h.poke(OUT_MB, &[0xaa; 16]);
    let st = h.cmd_full(op::QUERY_FW, 0, 0, 0, OUT_MB, Some(1));
    assert_eq!(st, status::INTERNAL_ERR);
    assert_eq!(h.mem(OUT_MB, 16), [0xaa; 16]);
    assert_eq!(h.eqe(EQ0_BUF, 0)[1], 0, "no EQE");
    assert_eq!(h.diag_read(NO_MASTER_DMA), 3);
    assert_eq!(h.diag_read(EQES), 0);
    // An MSI-X is a DMA write: EQ 0 gets an EQE with the master on, then
    // is armed over it with the master off.
    h.set_master(true);
    assert_eq!(h.cmd_full(op::NOP, 0, 0, 0, 0, Some(2)), status::OK);
    assert_eq!(h.diag_read(EQES), 1);
    h.set_master(false);
    h.eq_doorbell(0, 0, true);
    assert!(h.dev.irq().raised.is_empty());
    assert_eq!(h.diag_read(IRQS), 0);
    assert_eq!(h.diag_read(NO_MASTER_DMA), 4);
    let r = h.records_of("no_master_dma");
    assert_eq!((&r[3]["op"], &r[3]["vector"]), (&"msi".into(), &0.into()));
    // Never cleared; with the master back on everything runs again.
    h.diag_write(RESET_COUNTERS, 1);
    h.set_master(true);
    h.eq_doorbell(0, 0, true);
    h.doorbell(UAR, QPN);
    assert_eq!(h.sq_ci(QPN), 1);
    assert_eq!(h.dev.irq().raised, [0, 1]);
    assert_eq!(h.diag_read(NO_MASTER_DMA), 4);
    assert_eq!(h.dev.summary()["no_master_dma"], 4);
    h.check_invariants(true);
}

/// The same posts with bus mastering on from the start and after a clear
/// and set: the same memory, interrupts, counters and records (but for the
/// config writes and the time they took).
#[test]
fn bus_mastering_on_changes_nothing() {
    let run = |toggle: bool| {
        let mut h = Harness::setup();
        if toggle {
            h.set_master(false);
            h.set_master(true);
        }
        h.arm_cq(UAR, CQN, 2, 0);
        h.eq_doorbell(1, 0, true);
        let wqe = Harness::inline_send(QPN, 0, b"doorbell", true);
        h.write_wqe(QP_BUF, 0, &wqe);
        h.doorbell(UAR, QPN);
        let wqe = Harness::inline_send(QPN, 1, b"blueflame", true);
        h.write_wqe(QP_BUF, 1, &wqe);
        h.bf_copy(UAR, 0, &wqe, 8);
        assert_eq!(h.diag_read(NO_MASTER_DMA), 0);
        assert!(h.error_codes().is_empty());
        let records: Vec<Value> = h
            .records()
            .into_iter()
            .filter(|r| r["kind"] != "config_write")
            .map(|mut r| {
                let m = r.as_object_mut().unwrap();
                m.remove("seq");
                m.remove("t_ns");
                m.remove("post_t_ns");
                r
            })
            .collect();
        let g = h.dev.counters().global.clone();
        let raised = h.dev.irq().raised.clone();
        (h.mem(MEM_BASE, MEM_LEN), raised, g, records)
    };
    let (on, toggled) = (run(false), run(true));
    assert_eq!(on.1, [1]);
    assert!(on.2.cqes >= 2);
    assert_eq!((&on.1, &on.2, &on.3), (&toggled.1, &toggled.2, &toggled.3));
    assert!(on.0 == toggled.0, "the same memory");
}
