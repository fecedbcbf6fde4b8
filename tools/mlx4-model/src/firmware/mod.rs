//! The firmware life cycle, as mainline mlx4_core
//! 7.2 drives it (`core/main.c:mlx4_init_fw`, `mlx4_init_hca`,
//! `mlx4_close_hca`): after reset the firmware is not running and takes only
//! QUERY_FW, MAP_FA, RUN_FW and UNMAP_FA; RUN_FW (with the firmware area
//! mapped) starts it; then the capabilities, ICM (SET_ICM_SIZE, MAP_ICM_AUX,
//! MAP_ICM) and INIT_HCA; only after INIT_HCA do the commands on contexts
//! work, and each finds its context in ICM that MAP_ICM backed. CLOSE_HCA
//! goes back to "running", UNMAP_FA to "not running".
//!
//! A command out of order fails with BAD_SYS_STATE ("system not enabled or
//! bad system state", `core/cmd.c`), a context whose ICM page is not mapped
//! with ICM_ERROR; both are counted (`fw_refused`, `icm_errors`) and
//! recorded. The commands on contexts then go on to the tables, which
//! find the queues' pages through the MTT in ICM (`queue_buf`).

pub mod caps;
pub mod icm;
pub mod init_hca;
pub mod mad;
pub mod mtt;
pub mod pages;
pub mod pma;
pub mod port;

use crate::command::{self, op, read_mailbox, write_mailbox, CmdError, CmdResult, CommandRequest};
use crate::env::Env;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::protocol::Code;
use crate::qbuf::QueueBuf;
use icm::{IcmMap, ICM_PAGE};
use init_hca::{HcaProfile, Table, INIT_HCA_SIZE};
use port::PortState;
use serde_json::json;

/// The phase's number is the diag block's FW_PHASE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// After reset or UNMAP_FA.
    Off = 0,
    /// After RUN_FW: capabilities and ICM, INIT_HCA.
    Running = 1,
    /// After INIT_HCA: everything.
    HcaUp = 2,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Off => "off",
            Phase::Running => "running",
            Phase::HcaUp => "hca_up",
        }
    }
}

/// ICM pages of auxiliary memory SET_ICM_SIZE asks for: one per 128 MiB
/// of ICM, at least one (the model's choice; it keeps nothing there).
pub fn aux_pages_for(icm_bytes: u64) -> u64 {
    icm_bytes.div_ceil(128 << 20).max(1)
}

#[derive(Debug, Clone)]
pub struct Firmware {
    phase: Phase,
    /// Firmware area pages MAP_FA handed over.
    fa_pages: u64,
    /// SET_ICM_SIZE: the ICM size and the auxiliary pages it asked for.
    icm_size: Option<(u64, u64)>,
    aux_pages: u64,
    icm: IcmMap,
    hca: Option<HcaProfile>,
    /// Port 1 and the special QPs (HCA up).
    port: PortState,
    /// Set when CLOSE_HCA or UNMAP_FA ended the HCA: the contexts go too.
    hca_closed: bool,
}

impl Default for Firmware {
    fn default() -> Self {
        Self::new()
    }
}

impl Firmware {
    pub fn new() -> Self {
        Firmware {
            phase: Phase::Off,
            fa_pages: 0,
            icm_size: None,
            aux_pages: 0,
            icm: IcmMap::default(),
            hca: None,
            port: PortState::default(),
            hca_closed: false,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Port 1 as SET_PORT, INIT_PORT, CLOSE_PORT and CONF_SPECIAL_QP left it.
    pub fn port(&self) -> &PortState {
        &self.port
    }

    /// The profile INIT_HCA set, while the HCA is up.
    pub fn hca(&self) -> Option<&HcaProfile> {
        self.hca.as_ref()
    }

    pub fn icm(&self) -> &IcmMap {
        &self.icm
    }

    /// Firmware area and aux pages MAP_FA and MAP_ICM_AUX handed over.
    pub fn host_pages(&self) -> u64 {
        self.fa_pages + self.aux_pages
    }

    /// A queue of `bytes` on the pages of 2^(12 + `log_page_size`) bytes a
    /// context's MTT entries name, from byte `mtt_addr` of INIT_HCA's MTT
    /// table (`mtt`).
    pub(crate) fn queue_buf<M: GuestMemory, I: Irq>(
        &self,
        env: &mut Env<M, I>,
        mtt_addr: u64,
        log_page_size: u8,
        bytes: u64,
    ) -> Result<QueueBuf, CmdError> {
        let hca = self.hca.as_ref().ok_or(CmdError::BadSysState)?;
        let shift = 12 + u32::from(log_page_size);
        let n = bytes.div_ceil(1 << shift);
        let pages = mtt::read_pages(env, hca.mtt, &self.icm, mtt_addr, shift, n)?;
        Ok(QueueBuf { shift, pages })
    }

    /// A memory region's `n` pages of 2^`shift` bytes, from byte
    /// `mtt_addr` of INIT_HCA's MTT table (`core/mr.c:mlx4_mr_enable`).
    pub(crate) fn mr_pages<M: GuestMemory, I: Irq>(
        &self,
        env: &mut Env<M, I>,
        mtt_addr: u64,
        shift: u32,
        n: u64,
    ) -> Result<Vec<u64>, CmdError> {
        let hca = self.hca.as_ref().ok_or(CmdError::BadSysState)?;
        mtt::read_pages(env, hca.mtt, &self.icm, mtt_addr, shift, n)
    }

    /// WRITE_MTT: `entries` (as written, PRESENT set) into the MTT table
    /// from entry `first` on, through MAP_ICM's pages, all or none.
    pub(crate) fn write_mtt<M: GuestMemory, I: Irq>(
        &self,
        env: &mut Env<M, I>,
        first: u64,
        entries: &[u64],
    ) -> Result<(), CmdError> {
        let hca = self.hca.as_ref().ok_or(CmdError::BadSysState)?;
        mtt::write_entries(env, hca.mtt, &self.icm, first, entries)
    }

    /// Device reset: firmware stopped, firmware area, ICM and HCA gone.
    pub fn reset(&mut self) {
        *self = Firmware::new();
    }

    /// The PORT_CHANGE subtype INIT_PORT left to post (port 1), once.
    pub(crate) fn take_port_event(&mut self) -> Option<u8> {
        self.port.pending_event.take()
    }

    /// True once after CLOSE_HCA or UNMAP_FA took the HCA down.
    pub(crate) fn take_hca_closed(&mut self) -> bool {
        std::mem::take(&mut self.hca_closed)
    }

    /// The firmware's answer to `r`, or None when the command goes on to
    /// the tables (a command on contexts, the HCA up and its ICM mapped).
    pub(crate) fn command<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        num_uars: u32,
        r: &CommandRequest,
    ) -> Option<CmdResult> {
        let res = match r.opcode {
            op::QUERY_FW => Some(write_mailbox(env, r.out_param, &caps::query_fw()).map(|()| None)),
            op::MAP_FA => Some(
                self.in_phase(&[Phase::Off])
                    .and_then(|()| self.map_fa(env, r)),
            ),
            op::UNMAP_FA => Some(self.unmap_fa(env)),
            op::RUN_FW => Some(self.in_phase(&[Phase::Off]).and_then(|()| self.run_fw())),
            _ if self.phase == Phase::Off => Some(Err(CmdError::BadSysState)),
            op::QUERY_DEV_CAP => {
                Some(write_mailbox(env, r.out_param, &caps::query_dev_cap(num_uars)).map(|()| None))
            }
            op::QUERY_PORT => Some(query_port(env, r)),
            op::MOD_STAT_CFG => Some(self.mod_stat_cfg(env, r)),
            op::QUERY_ADAPTER => {
                Some(write_mailbox(env, r.out_param, &caps::query_adapter()).map(|()| None))
            }
            op::SET_ICM_SIZE => Some(self.in_phase(&[Phase::Running]).map(|()| {
                let aux = aux_pages_for(r.in_param);
                self.icm_size = Some((r.in_param, aux));
                Some(aux)
            })),
            op::MAP_ICM_AUX => Some(self.map_icm_aux(env, r)),
            op::UNMAP_ICM_AUX => Some(self.in_phase(&[Phase::Running]).map(|()| {
                self.aux_pages = 0;
                None
            })),
            op::MAP_ICM => Some(self.map_icm(env, r)),
            op::UNMAP_ICM => Some(self.unmap_icm(r)),
            op::INIT_HCA => Some(self.init_hca(env, num_uars, r)),
            op::CLOSE_HCA => Some(self.in_phase(&[Phase::HcaUp]).map(|()| {
                self.close_hca();
                None
            })),
            op::QUERY_HCA => Some(match &self.hca {
                Some(p) => write_mailbox(env, r.out_param, &p.query()).map(|()| None),
                None => Err(CmdError::BadSysState),
            }),
            _ if self.phase != Phase::HcaUp => Some(Err(CmdError::BadSysState)),
            op::SET_PORT => Some(self.set_port(env, r)),
            op::INIT_PORT => Some(self.port.init_port(r).map(|()| None)),
            op::CLOSE_PORT => Some(self.port.close_port(r).map(|()| None)),
            op::CONF_SPECIAL_QP => Some(self.port.conf_special_qp(r).map(|()| None)),
            op::MAD_IFC => Some(mad_ifc(env, r)),
            op::DIAG_RPRT => Some(diag_rprt(env, r)),
            _ => self.context_in_icm(r).err().map(Err),
        };
        if let Some(Err(e @ (CmdError::BadSysState | CmdError::IcmError))) = res {
            match e {
                CmdError::BadSysState => env.counters.global.fw_refused += 1,
                _ => env.counters.global.icm_errors += 1,
            }
            let phase = self.phase.as_str();
            env.trace.record("fw_refused", || {
                json!({"opcode": r.opcode, "name": command::name(r.opcode),
                       "phase": phase, "status": e.status()})
            });
        }
        res
    }

    fn in_phase(&self, phases: &[Phase]) -> Result<(), CmdError> {
        if phases.contains(&self.phase) {
            Ok(())
        } else {
            Err(CmdError::BadSysState)
        }
    }

    fn map_fa<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
    ) -> CmdResult {
        let runs = page_list(env, r, false)?;
        self.fa_pages += runs.iter().map(|p| p.pages()).sum::<u64>();
        Ok(None)
    }

    /// RUN_FW needs the whole firmware area QUERY_FW asked for.
    fn run_fw(&mut self) -> CmdResult {
        if self.fa_pages < u64::from(caps::FW_PAGES) {
            return Err(CmdError::IcmError);
        }
        self.phase = Phase::Running;
        Ok(None)
    }

    /// UNMAP_FA stops the firmware in any state: mlx4 treats its failure
    /// as fatal (`core/cmd.c:mlx4_closing_cmd_fatal_error`). ICM or aux
    /// pages still mapped are dropped with it, but mainline gives them back
    /// first (`core/main.c:mlx4_free_icms` before `mlx4_close_fw`): a
    /// driver that did not leaked them on a real adapter, whose firmware
    /// behaviour there is unknown. Recorded as a protocol error.
    fn unmap_fa<M: GuestMemory, I: Irq>(&mut self, env: &mut Env<M, I>) -> CmdResult {
        let (icm, aux) = (self.icm.pages(), self.aux_pages);
        if icm != 0 || aux != 0 {
            env.protocol_error(
                Code::UnmapFaWithIcm,
                format!("UNMAP_FA with {icm} ICM pages and {aux} aux pages still mapped"),
            );
        }
        let was_up = self.phase == Phase::HcaUp;
        self.reset();
        self.hca_closed = was_up;
        Ok(None)
    }

    fn close_hca(&mut self) {
        self.hca = None;
        self.port = PortState::default();
        self.phase = Phase::Running;
        self.hca_closed = true;
    }

    fn set_port<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
    ) -> CmdResult {
        let mb = read_mailbox(env, r.in_param, 8)?;
        self.port.set_port(r, &mb)?;
        let rec = self.port.record();
        env.trace.record("port", || rec);
        Ok(None)
    }

    /// opmod 0 sets the page size (`core/main.c:mlx4_init_fw`: log_pg_sz 0,
    /// 4 KiB, the only one the model has), before INIT_HCA; opmod 2 reads a
    /// port's GUID (`core/fw.c:mlx4_get_phys_port_id`).
    fn mod_stat_cfg<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
    ) -> CmdResult {
        match r.op_mod {
            0 => {
                self.in_phase(&[Phase::Running])?;
                let b = read_mailbox(env, r.in_param, 4)?;
                if b[0x02] & 1 != 0 && b[0x03] != 0 {
                    return Err(CmdError::BadParam);
                }
                Ok(None)
            }
            2 => {
                if r.in_mod >> 8 != 1 {
                    return Err(CmdError::BadParam);
                }
                write_mailbox(env, r.out_param, &caps::port_guid_query()).map(|()| None)
            }
            _ => Err(CmdError::BadOp),
        }
    }

    fn map_icm_aux<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
    ) -> CmdResult {
        self.in_phase(&[Phase::Running])?;
        if self.icm_size.is_none() {
            return Err(CmdError::BadSysState);
        }
        let runs = page_list(env, r, false)?;
        self.aux_pages += runs.iter().map(|p| p.pages()).sum::<u64>();
        Ok(None)
    }

    /// Maps every entry or none; a page mapped twice or beyond the ICM the
    /// firmware advertised fails the command. The SET_ICM_SIZE total is not
    /// a bound: mlx4 maps the EQ context table for 1024 EQs beyond it
    /// (`core/main.c:mlx4_init_icm`).
    fn map_icm<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
    ) -> CmdResult {
        self.in_phase(&[Phase::Running, Phase::HcaUp])?;
        let runs = page_list(env, r, true)?;
        let mut icm = self.icm.clone();
        for p in &runs {
            if p.virt.saturating_add(p.pages() * ICM_PAGE) > caps::MAX_ICM {
                return Err(CmdError::BadParam);
            }
            icm.map(p.virt, p.dma, p.pages())
                .map_err(|_| CmdError::IcmError)?;
        }
        self.icm = icm;
        Ok(None)
    }

    /// UNMAP_ICM: in_param the ICM address, in_mod the pages; pages not
    /// mapped are no error (mlx4 may free what a failed MAP_ICM left).
    fn unmap_icm(&mut self, r: &CommandRequest) -> CmdResult {
        self.in_phase(&[Phase::Running, Phase::HcaUp])?;
        if !r.in_param.is_multiple_of(ICM_PAGE) {
            return Err(CmdError::BadParam);
        }
        self.icm.unmap(r.in_param, u64::from(r.in_mod));
        Ok(None)
    }

    /// INIT_HCA after SET_ICM_SIZE and with its auxiliary pages mapped.
    fn init_hca<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        num_uars: u32,
        r: &CommandRequest,
    ) -> CmdResult {
        self.in_phase(&[Phase::Running])?;
        let (_, aux) = self.icm_size.ok_or(CmdError::BadSysState)?;
        if self.aux_pages < aux {
            return Err(CmdError::IcmError);
        }
        let b = read_mailbox(env, r.in_param, INIT_HCA_SIZE)?;
        let p = HcaProfile::parse(&b, num_uars)?;
        env.trace.record("init_hca", || p.record());
        self.hca = Some(p);
        self.phase = Phase::HcaUp;
        Ok(None)
    }

    /// A command creating a context (SW2HW_EQ, SW2HW_CQ, SW2HW_MPT,
    /// RST2INIT_QP, SW2HW_SRQ) needs its index inside the INIT_HCA table
    /// (BAD_INDEX) and the ICM page of its entry mapped (ICM_ERROR): mlx4
    /// maps it first (`core/icm.c:mlx4_table_get` from
    /// `core/qp.c:mlx4_qp_alloc_icm`, `core/cq.c:mlx4_cq_alloc_icm`,
    /// `core/mr.c:mlx4_mpt_alloc_icm`, `core/srq.c:__mlx4_srq_alloc_icm`;
    /// the EQ table whole in `core/main.c:mlx4_init_icm`).
    fn context_in_icm(&self, r: &CommandRequest) -> Result<(), CmdError> {
        let Some(p) = &self.hca else {
            return Ok(());
        };
        let (table, entry) = match r.opcode {
            op::SW2HW_EQ => (p.eqc, caps::EQC_ENTRY),
            op::SW2HW_CQ => (p.cqc, caps::CQC_ENTRY),
            op::RST2INIT_QP => (p.qpc, caps::QPC_ENTRY),
            op::SW2HW_SRQ => (p.srqc, caps::SRQC_ENTRY),
            op::SW2HW_MPT => (
                Table {
                    base: p.dmpt,
                    log_num: p.log_mpt_sz,
                },
                caps::DMPT_ENTRY,
            ),
            _ => return Ok(()),
        };
        let index = u64::from(r.in_mod & 0xff_ffff);
        if index >> table.log_num != 0 {
            return Err(CmdError::BadIndex);
        }
        let virt = table.base.checked_add(index * u64::from(entry));
        if virt.and_then(|v| self.icm.translate(v)).is_none() {
            return Err(CmdError::IcmError);
        }
        Ok(())
    }
}

/// MAD_IFC to port 1's agent (in_mod bits 15..0; bits 31..16 the source
/// LID of an incoming MAD, opmod bit 2: its work completion follows the MAD
/// in the mailbox, which the agent does not need): PerfMgmt to the PMA
/// (`pma`), the rest to the SMA (`mad`).
fn mad_ifc<M: GuestMemory, I: Irq>(env: &mut Env<M, I>, r: &CommandRequest) -> CmdResult {
    if r.in_mod & 0xffff != 1 {
        return Err(CmdError::BadParam);
    }
    let mad = read_mailbox(env, r.in_param, mad::MAD_SIZE)?;
    let out = if mad[1] == pma::CLASS_PERF_MGMT {
        pma::respond(&mad, &mut env.port)
    } else {
        mad::respond(&mad)
    };
    write_mailbox(env, r.out_param, &out).map(|()| None)
}

/// DIAG_RPRT opmod 2 (transport and CI error counters) of the device (in_mod
/// 0) or port 1: all zero, nothing having gone wrong. mlx4_ib reads it when
/// it registers its hw_counters (`ib/main.c:mlx4_ib_get_hw_stats` from
/// `ibcore/sysfs.c`), and fails the registration if it fails.
fn diag_rprt<M: GuestMemory, I: Irq>(env: &mut Env<M, I>, r: &CommandRequest) -> CmdResult {
    if r.op_mod != 2 {
        return Err(CmdError::BadOp);
    }
    if r.in_mod > 1 {
        return Err(CmdError::BadParam);
    }
    write_mailbox(env, r.out_param, &[0u8; 4096]).map(|()| None)
}

/// QUERY_PORT of port 1, the only one.
fn query_port<M: GuestMemory, I: Irq>(env: &mut Env<M, I>, r: &CommandRequest) -> CmdResult {
    if r.in_mod != 1 {
        return Err(CmdError::BadParam);
    }
    write_mailbox(env, r.out_param, &caps::query_port()).map(|()| None)
}

/// The page list of MAP_FA, MAP_ICM_AUX or MAP_ICM (in_mod entries).
fn page_list<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    r: &CommandRequest,
    with_virt: bool,
) -> Result<Vec<pages::PageRun>, CmdError> {
    let len = pages::list_len(r.in_mod)?;
    let b = read_mailbox(env, r.in_param, len)?;
    pages::parse(&b, with_virt)
}
