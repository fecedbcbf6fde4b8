//! The shell end to end over a real vfio-user socket: DMA through a mapped
//! memfd (fd offset = guest-physical address, as QEMU sends it), MSI-X
//! through an eventfd, commands through region writes, the firmware
//! brought up as mlx4_core does before the first queue.

use mlx4_model::command::op;
use mlx4_model::layout::{DIAG_BASE, HCR_BASE};
use mlx4_model::server::{self, Backend, DmaMaps, EventfdIrq, Model};
use mlx4_model::{Config, Device, Tracer};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::{Arc, Mutex};
use vfio_bindings::bindings::vfio::{
    VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_IRQ_SET_DATA_EVENTFD, VFIO_PCI_CONFIG_REGION_INDEX,
    VFIO_PCI_MSIX_IRQ_INDEX,
};

const RAM: u64 = 0x20_0000;
const IN_MB: u64 = 0x10_0000;
const OUT_MB: u64 = 0x10_1000;
const EQ_BUF: u64 = 0x10_2000;
/// The MTT table's first ICM page, in guest RAM (the model reads the
/// EQ's MTT entry there); the EQC page need not be.
const MTT_PAGE: u64 = 0x10_3000;
const EQC_BASE: u64 = 0x0300_0000;
const MTT_BASE: u64 = 0x0500_0000;

fn owned(fd: i32) -> File {
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor that nothing else owns.
    unsafe { File::from_raw_fd(fd) }
}

fn cmd(c: &mut vfio_user::Client, toggle: &mut u32, words: [u32; 6], go: u32) -> u32 {
    for (i, w) in words.iter().enumerate() {
        c.region_write(0, HCR_BASE + 4 * i as u64, &w.to_be_bytes())
            .unwrap();
    }
    let t = *toggle << 21;
    *toggle ^= 1;
    c.region_write(0, HCR_BASE + 0x18, &((1 << 23) | t | go).to_be_bytes())
        .unwrap();
    let mut b = [0u8; 4];
    c.region_read(0, HCR_BASE + 0x18, &mut b).unwrap();
    u32::from_be_bytes(b)
}

/// A command with a mailbox at IN_MB holding `mailbox`; the status.
fn cmd_mb(
    c: &mut vfio_user::Client,
    toggle: &mut u32,
    ram: &File,
    opcode: u16,
    in_mod: u32,
    mailbox: &[u8],
) -> u32 {
    std::os::unix::fs::FileExt::write_all_at(ram, mailbox, IN_MB).unwrap();
    let words = [0, IN_MB as u32, in_mod, 0, 0, 0];
    cmd(c, toggle, words, u32::from(opcode)) >> 24
}

/// A page list (MAP_FA, MAP_ICM_AUX, MAP_ICM): (ICM address, DMA, order).
fn pages(entries: &[(u64, u64, u64)]) -> Vec<u8> {
    let mut b = Vec::new();
    for &(virt, dma, order) in entries {
        b.extend_from_slice(&virt.to_be_bytes());
        b.extend_from_slice(&(dma | order).to_be_bytes());
    }
    b
}

/// MAP_FA (2 MiB, what QUERY_FW asks for), RUN_FW, SET_ICM_SIZE,
/// MAP_ICM_AUX, MAP_ICM of the EQC and MTT tables' first pages, INIT_HCA.
fn bring_up(c: &mut vfio_user::Client, toggle: &mut u32, ram: &File) {
    let fa = pages(&[(0, 0x4000_0000, 9)]);
    assert_eq!(cmd_mb(c, toggle, ram, op::MAP_FA, 1, &fa), 0);
    assert_eq!(cmd(c, toggle, [0; 6], u32::from(op::RUN_FW)) >> 24, 0);
    let icm_size = [0, 0x0600_0000, 0, 0, 0, 0];
    assert_eq!(
        cmd(c, toggle, icm_size, u32::from(op::SET_ICM_SIZE)) >> 24,
        0
    );
    let aux = pages(&[(0, 0x5000_0000, 0)]);
    assert_eq!(cmd_mb(c, toggle, ram, op::MAP_ICM_AUX, 1, &aux), 0);
    let icm = pages(&[(EQC_BASE, 0x6000_0000, 0), (MTT_BASE, MTT_PAGE, 0)]);
    assert_eq!(cmd_mb(c, toggle, ram, op::MAP_ICM, 2, &icm), 0);
    let mut hca = [0u8; 0x200];
    hca[0] = 2;
    hca[0x80..0x88].copy_from_slice(&(EQC_BASE | 3).to_be_bytes());
    hca[0x100..0x108].copy_from_slice(&MTT_BASE.to_be_bytes());
    hca[0x12a] = 10; // log_uar_sz: 1024 UARs
    assert_eq!(cmd_mb(c, toggle, ram, op::INIT_HCA, 0, &hca), 0);
}

#[test]
fn commands_dma_and_msix_over_vfio_user() {
    let sock = std::env::temp_dir().join(format!("mlx4-model-test-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let cfg = Config::default();
    let model: Arc<Mutex<Model>> = Arc::new(Mutex::new(Device::new(
        cfg,
        DmaMaps::default(),
        EventfdIrq::default(),
        Tracer::memory(),
    )));
    let srv = vfio_user::Server::new(
        &sock,
        true,
        server::irqs(),
        server::regions(cfg.bar2_size()),
    )
    .unwrap();
    let m2 = Arc::clone(&model);
    let t = std::thread::spawn(move || {
        let mut backend = Backend::new(m2);
        srv.run(&mut backend).unwrap();
    });

    let mut c = vfio_user::Client::new(&sock).unwrap();
    assert_eq!(c.region(0).unwrap().size, 1 << 20);
    assert_eq!(c.region(2).unwrap().size, 8 << 20);
    let mut id = [0u8; 4];
    c.region_read(VFIO_PCI_CONFIG_REGION_INDEX, 0, &mut id)
        .unwrap();
    assert_eq!(u32::from_le_bytes(id), 0x1003_15b3);

    // Guest RAM: a memfd mapped whole, fd offset = guest-physical address.
    let name = std::ffi::CString::new("ram").unwrap();
    // SAFETY: memfd_create with a valid name.
    let ram = owned(unsafe { libc::memfd_create(name.as_ptr(), 0) });
    ram.set_len(RAM).unwrap();
    c.dma_map(0, 0, RAM, ram.as_raw_fd()).unwrap();
    // SAFETY: plain eventfd creation.
    let efd = owned(unsafe { libc::eventfd(0, 0) });
    c.set_irqs(
        VFIO_PCI_MSIX_IRQ_INDEX,
        VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER,
        0,
        1,
        &[efd.as_raw_fd()],
    )
    .unwrap();

    let mut toggle = 1;
    // Without bus mastering the model may not write the mailbox: the
    // command fails and the refused DMA is counted (diag 0x5e0).
    let st = cmd(&mut c, &mut toggle, [0, 0, 0, 0, OUT_MB as u32, 0], 0x04);
    assert_eq!(st >> 24, 1);
    let mut v = [0u8; 8];
    c.region_read(0, DIAG_BASE + 0x5e0, &mut v).unwrap();
    assert_eq!(u64::from_le_bytes(v), 1);
    // Memory decoding and bus mastering on, as pci_set_master() writes it.
    c.region_write(VFIO_PCI_CONFIG_REGION_INDEX, 4, &0x0006u16.to_le_bytes())
        .unwrap();
    // QUERY_FW into the out mailbox.
    let st = cmd(&mut c, &mut toggle, [0, 0, 0, 0, OUT_MB as u32, 0], 0x04);
    assert_eq!(st >> 24, 0);
    let mut fw = [0u8; 8];
    std::os::unix::fs::FileExt::read_exact_at(&ram, &mut fw, OUT_MB).unwrap();
    assert_eq!(&fw[2..4], &[0, 2]);

    bring_up(&mut c, &mut toggle, &ram);

    // EQ 0 on vector 0 (its page through MTT entry 8), CMD mapped to it,
    // armed; NOP with E=1.
    let entry = (EQ_BUF | 1).to_be_bytes();
    std::os::unix::fs::FileExt::write_all_at(&ram, &entry, MTT_PAGE + 64).unwrap();
    let mut ctx = [0u8; 0x40];
    ctx[0x0c] = 3;
    ctx[0x1c..0x20].copy_from_slice(&64u32.to_be_bytes());
    std::os::unix::fs::FileExt::write_all_at(&ram, &ctx, IN_MB).unwrap();
    assert_eq!(
        cmd(&mut c, &mut toggle, [0, IN_MB as u32, 0, 0, 0, 0], 0x13) >> 24,
        0
    );
    assert_eq!(
        cmd(&mut c, &mut toggle, [0, 1 << 10, 0, 0, 0, 0], 0x12) >> 24,
        0
    );
    c.region_write(2, 0x800, &(1u32 << 31).to_be_bytes())
        .unwrap();
    let st = cmd(
        &mut c,
        &mut toggle,
        [0, 0, 0x1f, 0, 0, 0xbeef << 16],
        (1 << 22) | 0x31,
    );
    assert_eq!(st >> 24, 0);
    let mut n = [0u8; 8];
    (&efd).read_exact(&mut n).unwrap();
    assert_eq!(u64::from_ne_bytes(n), 1);
    let mut eqe = [0u8; 32];
    std::os::unix::fs::FileExt::read_exact_at(&ram, &mut eqe, EQ_BUF).unwrap();
    assert_eq!((eqe[1], &eqe[6..8]), (0x0a, &[0xbe, 0xef][..]));

    // The diag block says the same, with no protocol error.
    let mut v = [0u8; 8];
    c.region_read(0, DIAG_BASE + 0x60, &mut v).unwrap();
    assert_eq!(u64::from_le_bytes(v), 1);
    c.region_read(0, DIAG_BASE + 0x20, &mut v).unwrap();
    assert_eq!(u64::from_le_bytes(v), 0);

    c.shutdown().unwrap();
    t.join().unwrap();
    let dev = model.lock().unwrap();
    assert_eq!(dev.counters().global.commands, 11);
    assert!(dev
        .tracer()
        .lines()
        .iter()
        .any(|l| l.contains(r#""kind":"dma_map""#)));
}
