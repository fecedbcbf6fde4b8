//! The command line: `--firmware=strict` is accepted for old callers and
//! changes nothing; `--firmware=ready` is refused, the shortcut gone.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String) {
    let dir = std::env::temp_dir();
    let sock = dir.join(format!("mlx4-model-cli-{}.sock", std::process::id()));
    let trace = dir.join(format!("mlx4-model-cli-{}.trace", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_mlx4-model"))
        .arg("--socket")
        .arg(&sock)
        .arg("--trace")
        .arg(&trace)
        .args(args)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&trace);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn firmware_strict_is_a_no_op_and_ready_is_refused() {
    // Past the option parsing: --num-uars 3 is what fails.
    let (ok, err) = run(&["--firmware=strict", "--num-uars", "3"]);
    assert!(!ok && err.contains("num_uars 3"), "{err}");
    let (ok, err) = run(&["--firmware=ready"]);
    assert!(!ok && err.contains("ready mode was removed"), "{err}");
}
