//! mlx4-model: serve one QEMU vfio-user connection as a ConnectX-3.

use anyhow::{Context, Result};
use clap::Parser;
use mlx4_model::server::{self, Backend, DmaMaps, EventfdIrq, Model};
use mlx4_model::{Config, Device, TraceLevel, Tracer};
use signal_hook::consts::{SIGINT, SIGTERM};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A ConnectX-3 (mlx4) device model for QEMU's vfio-user-pci, with an
/// analyzer trace.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// vfio-user socket to create (a stale one is removed first).
    #[arg(long)]
    socket: PathBuf,
    /// Analyzer trace: one JSON object per line.
    #[arg(long)]
    trace: PathBuf,
    /// What the trace keeps: `all` (every transaction) or `errors`
    /// (protocol errors, the data path's error records, marks, exit).
    #[arg(long, default_value = "all")]
    trace_level: TraceLevel,
    /// JSON summary of all counters, written at exit.
    #[arg(long)]
    summary: Option<PathBuf>,
    /// UAR pages (BAR2 holds as many BlueFlame pages again).
    #[arg(long, default_value_t = 1024)]
    num_uars: u32,
    /// Every Nth valid BlueFlame post falls back to the doorbell path (0: never).
    #[arg(long, default_value_t = 0)]
    fallback_every: u32,
    /// Accepted for old callers and ignored: `strict` is the only firmware
    /// (QUERY_FW, MAP_FA, RUN_FW, ICM and INIT_HCA first, as mainline
    /// mlx4_core drives it); `ready` is refused.
    #[arg(long, hide = true, value_parser = mlx4_model::config::firmware_arg)]
    #[allow(dead_code)]
    firmware: Option<String>,
}

fn write_summary(model: &Mutex<Model>, path: Option<&Path>) -> Result<()> {
    let mut dev = model.lock().unwrap_or_else(|e| e.into_inner());
    dev.finish();
    let Some(path) = path else {
        return Ok(());
    };
    let text = serde_json::to_string_pretty(&dev.summary())?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text + "\n").with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

fn main() -> Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args = Args::parse();
    let cfg = Config {
        num_uars: args.num_uars,
        fallback_every: args.fallback_every,
    };
    cfg.validate()?;

    match std::fs::remove_file(&args.socket) {
        Ok(()) => log::info!("removed stale socket {}", args.socket.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).context(format!("removing {}", args.socket.display())),
    }
    let trace = File::create(&args.trace)
        .with_context(|| format!("creating trace {}", args.trace.display()))?;
    let model: Arc<Mutex<Model>> = Arc::new(Mutex::new(Device::new(
        cfg,
        DmaMaps::default(),
        EventfdIrq::default(),
        Tracer::to_writer(Box::new(trace)).with_level(args.trace_level),
    )));

    let srv = vfio_user::Server::new(
        &args.socket,
        true,
        server::irqs(),
        server::regions(cfg.bar2_size()),
    )
    .map_err(|e| anyhow::anyhow!("creating vfio-user socket {}: {e}", args.socket.display()))?;

    // SIGTERM/SIGINT (the runner stopping us): summary, socket, exit 0.
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])?;
    {
        let model = Arc::clone(&model);
        let summary = args.summary.clone();
        let socket = args.socket.clone();
        std::thread::spawn(move || {
            if let Some(sig) = signals.forever().next() {
                eprintln!("mlx4-model: signal {sig}, writing summary");
                if let Err(e) = write_summary(&model, summary.as_deref()) {
                    eprintln!("mlx4-model: {e:#}");
                }
                let _ = std::fs::remove_file(&socket);
                std::process::exit(0);
            }
        });
    }

    // RNR retries run on the wall clock (`datapath::rnr`).
    server::spawn_timer(Arc::clone(&model)).context("starting the timer thread")?;

    eprintln!("mlx4-model: listening on {}", args.socket.display());
    let mut backend = Backend::new(Arc::clone(&model));
    let served = srv.run(&mut backend);
    drop(srv); // removes the socket
    write_summary(&model, args.summary.as_deref())?;
    match served {
        Ok(()) => {
            eprintln!("mlx4-model: client disconnected");
            Ok(())
        }
        Err(e) => Err(anyhow::anyhow!("vfio-user server: {e}")),
    }
}
