# SPDX-License-Identifier: GPL-2.0
"""The input mailboxes of the commands a verbs application causes, decoded
from the analyzer trace into named fields (trace_view.py --commands
--fields, side_by_side.py).

The model records every mailbox it reads (a ``dma_read`` of ``what``
``mailbox`` with its bytes) before the ``command`` record of the command
that read it. The layouts are mainline's: ``struct mlx4_cq_context``
(include/linux/mlx4/cq.h), ``struct mlx4_mpt_entry``
(drivers/net/ethernet/mellanox/mlx4/mr.c), the QP transitions' optpar and
``struct mlx4_qp_context`` (include/linux/mlx4/qp.h), ``WRITE_MTT``'s
first entry and addresses, and MAD_IFC's MAD header.

Each field is (name, value, kind): kind ``id`` for what names an object
or a place in memory (QPN, CQN, MPT index and key, PD, UAR, DMA and user
addresses, MTT addresses), which two drivers choose differently by right;
``val`` for what says how the object behaves, where two drivers that
program the adapter alike agree.
"""

ID, VAL = "id", "val"

# Opcodes (MLX4_CMD_*).
SW2HW_MPT, WRITE_MTT, HW2SW_MPT = 0x0d, 0x11, 0x0f
SW2HW_CQ, HW2SW_CQ = 0x16, 0x17
MAD_IFC = 0x24
QP_MODIFY = {0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x2d, 0x38}
TO_RST = 0x21

# SMP attributes (IB spec 14.2.5) and mlx4's vendor ones.
MAD_ATTRS = {0x0010: "NodeDescription", 0x0011: "NodeInfo", 0x0014: "GUIDInfo",
             0x0015: "PortInfo", 0x0016: "P_KeyTable", 0xff90: "ExtendedPortInfo"}

# enum mlx4_qp_optpar.
OPTPAR = {0: "ALT_ADDR_PATH", 1: "RRE", 2: "RAE", 3: "RWE", 4: "PKEY_INDEX", 5: "Q_KEY",
          6: "RNR_TIMEOUT", 7: "PRIMARY_ADDR_PATH", 8: "SRA_MAX", 9: "RRA_MAX",
          10: "PM_STATE", 12: "RETRY_COUNT", 13: "RNR_RETRY", 14: "ACK_TIMEOUT",
          16: "SCHED_QUEUE", 20: "COUNTER_INDEX"}


def be(b, off, n):
    return int.from_bytes(b[off:off + n], "big")


def optpar_names(v):
    names = [OPTPAR.get(i, f"bit{i}") for i in range(32) if v >> i & 1]
    return "|".join(names) if names else "0"


def cq_context(b):
    return [
        ("flags", be(b, 0x00, 4), VAL),
        ("page_offset", be(b, 0x0a, 2), VAL),
        ("log_size", be(b, 0x0c, 1) & 0x1f, VAL),
        ("usr_page", be(b, 0x0c, 4) & 0xffffff, ID),
        ("cq_period", be(b, 0x10, 2), VAL),
        ("cq_max_count", be(b, 0x12, 2), VAL),
        ("comp_eqn", b[0x17], ID),
        ("log_page_size", b[0x18], VAL),
        ("mtt_base", (b[0x1b] << 32) | be(b, 0x1c, 4), ID),
        ("last_notified_index", be(b, 0x20, 4), VAL),
        ("solicit_producer_index", be(b, 0x24, 4), VAL),
        ("consumer_index", be(b, 0x28, 4), VAL),
        ("producer_index", be(b, 0x2c, 4), VAL),
        ("db_rec_addr", be(b, 0x38, 8), ID),
    ]


def mpt_entry(b):
    return [
        ("flags", be(b, 0x00, 4), VAL),
        ("qpn", be(b, 0x04, 4), VAL),
        ("key", be(b, 0x08, 4), ID),
        ("pd", be(b, 0x0c, 4) & 0xffffff, ID),
        ("pd_flags", be(b, 0x0c, 4) >> 24, VAL),
        ("start", be(b, 0x10, 8), ID),
        ("length", be(b, 0x18, 8), VAL),
        ("lkey", be(b, 0x20, 4), ID),
        ("win_cnt", be(b, 0x24, 4), VAL),
        ("mtt_rep", b[0x2b], VAL),
        ("mtt_addr", be(b, 0x2c, 8), ID),
        ("mtt_sz", be(b, 0x34, 4), VAL),
        ("entity_size", be(b, 0x38, 4), VAL),
        ("first_byte_offset", be(b, 0x3c, 4), VAL),
    ]


def qp_path(b, off, prefix):
    return [
        (prefix + "fl", b[off], VAL),
        (prefix + "control", b[off + 1], VAL),
        (prefix + "disable_pkey_check", b[off + 2], VAL),
        (prefix + "pkey_index", b[off + 3], VAL),
        (prefix + "counter_index", b[off + 4], VAL),
        (prefix + "grh_mylmc", b[off + 5], VAL),
        (prefix + "rlid", be(b, off + 6, 2), VAL),
        (prefix + "ackto", b[off + 8], VAL),
        (prefix + "mgid_index", b[off + 9], VAL),
        (prefix + "static_rate", b[off + 10], VAL),
        (prefix + "hop_limit", b[off + 11], VAL),
        (prefix + "tclass_flowlabel", be(b, off + 12, 4), VAL),
        (prefix + "rgid", be(b, off + 16, 16), VAL),
        (prefix + "sched_queue", b[off + 32], VAL),
        (prefix + "vlan_index", b[off + 33], VAL),
        (prefix + "feup", b[off + 34], VAL),
        (prefix + "fvl_rx", b[off + 35], VAL),
        (prefix + "dmac", be(b, off + 38, 6), VAL),
    ]


def qp_modify(b):
    """optpar, then struct mlx4_qp_context at +8."""
    c = b[8:]
    fields = [("optpar", be(b, 0, 4), VAL),
              ("flags", be(c, 0x00, 4), VAL),
              ("pd", be(c, 0x04, 4) & 0xffffff, ID),
              ("mtu_msgmax", c[0x08], VAL),
              ("rq_size_stride", c[0x09], VAL),
              ("sq_size_stride", c[0x0a], VAL),
              ("rlkey_roce_mode", c[0x0b], VAL),
              ("usr_page", be(c, 0x0c, 4), ID),
              ("local_qpn", be(c, 0x10, 4), ID),
              ("remote_qpn", be(c, 0x14, 4), ID)]
    fields += qp_path(c, 0x18, "pri_path.")
    if any(c[0x44:0x70]):
        fields += qp_path(c, 0x44, "alt_path.")
    fields += [("params1", be(c, 0x70, 4), VAL),
               ("next_send_psn", be(c, 0x78, 4), ID),
               ("cqn_send", be(c, 0x7c, 4), ID),
               ("roce_entropy", be(c, 0x80, 2), VAL),
               ("last_acked_psn", be(c, 0x88, 4), VAL),
               ("ssn", be(c, 0x8c, 4), VAL),
               ("params2", be(c, 0x90, 4), VAL),
               ("rnr_timer", c[0x94] & 0x1f, VAL),
               ("next_recv_psn", be(c, 0x94, 4) & 0xffffff, ID),
               ("xrcd", be(c, 0x98, 4), VAL),
               ("cqn_recv", be(c, 0x9c, 4), ID),
               ("db_rec_addr", be(c, 0xa0, 8), ID),
               ("qkey", be(c, 0xa8, 4), VAL),
               ("srqn", be(c, 0xac, 4), VAL),
               ("msn", be(c, 0xb0, 4), VAL),
               ("rq_wqe_counter", be(c, 0xb4, 2), VAL),
               ("sq_wqe_counter", be(c, 0xb6, 2), VAL),
               ("rate_limit_params", be(c, 0xbc, 2), VAL),
               ("qos_vport", c[0xbf], VAL),
               ("param3", be(c, 0xc0, 4), VAL),
               ("nummmcpeers_basemkey", be(c, 0xc4, 4), VAL),
               ("log_page_size", c[0xc8], VAL),
               ("mtt_base", (c[0xcb] << 32) | be(c, 0xcc, 4), ID)]
    return fields


def write_mtt(b, count):
    return [("first_mtt", be(b, 0, 8), ID), ("entries", count, VAL)]


def mad(b):
    return [("mgmt_class", b[1], VAL), ("method", b[3], VAL),
            ("attr", MAD_ATTRS.get(be(b, 16, 2), f"{be(b, 16, 2):#06x}"), VAL),
            ("attr_mod", be(b, 20, 4), VAL)]


def decode(opcode, in_mod, data):
    """The named fields of the mailbox `data` (bytes) of command `opcode`,
    or [] for a command this module does not decode."""
    if opcode == SW2HW_CQ and len(data) >= 0x40:
        return cq_context(data)
    if opcode == SW2HW_MPT and len(data) >= 0x40:
        return mpt_entry(data)
    if opcode in QP_MODIFY and len(data) >= 0x100:
        return qp_modify(data)
    if opcode == WRITE_MTT and len(data) >= 16:
        return write_mtt(data, in_mod)
    if opcode == MAD_IFC and len(data) >= 24:
        return mad(data)
    return []


def show(name, value):
    """A field's value as the listings print it."""
    if name == "optpar":
        return f"{value:#x} ({optpar_names(value)})"
    if isinstance(value, str):
        return value
    return f"{value:#x}" if value > 9 else str(value)
