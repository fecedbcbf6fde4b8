#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Boot the mlx4-bf test kernel in QEMU and report what happened.

The guest's adapter is the ConnectX-3 device model (tools/mlx4-model), a
vfio-user server started before QEMU and stopped after it, attached with
vfio-user-pci; guest RAM is a shared memfd so the model can DMA. The model's
analyzer trace is kept (--trace), and a protocol error it logged outside a
window a test declared (its summary's unexpected_protocol_errors) fails the
run.

Like the kernel's kunit.py, QEMU runs with -nodefaults -no-reboot -nographic
-serial stdio and the result is read from the console:

- the guest prints "mlx4-bf-guest-exit: N" with its command's exit status;
- in --ktap mode the console must also carry a complete KTAP document, whose
  leaf results are counted and summarised as "N passed, M failed";
- any oops/BUG/WARN/KASAN/lockdep/KFENCE report on the console is a failure;
- QEMU runs under a timeout and is killed with the runner.
"""

import argparse
import base64
import bisect
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

EXIT_RE = re.compile(r"mlx4-bf-guest-exit: (\d+)")
RESULT_RE = re.compile(r"^( *)(ok|not ok) (\d+)(?: -)? ?([^#]*?)\s*(?:#\s*(\w+)(.*))?$")
PLAN_RE = re.compile(r"^( *)1\.\.(\d+)\s*$")

# Reports the kernel prints when something went wrong inside it.
KERNEL_PROBLEM_RE = re.compile(
    r"(\] |^)(Oops|BUG:|WARNING:|Kernel panic|kernel BUG at|KASAN:|UBSAN:|KFENCE:|"
    r"general protection fault|possible circular locking|possible recursive locking|"
    r"inconsistent lock state|suspicious RCU usage|Unable to handle kernel|"
    r"rust_panic|panicked at|BUG: sleeping function|kmemleak: \d+ new suspected|"
    r"unreferenced object 0x)"
)


def set_pdeathsig():
    """Let the kernel kill QEMU if this runner dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    os.setsid()


def adapter_args(args, sock, sock2=None):
    """The QEMU options that give the guest its adapter, the model on `sock`
    (and a second one, on `sock2`)."""
    socks = [sock] + ([sock2] if sock2 else [])
    devices = []
    for n, path in enumerate(socks, 1):
        device = {"driver": "vfio-user-pci", "socket": {"type": "unix", "path": path}}
        if args.no_posted_writes:
            # Every write waits for the model: it sees guest memory as it
            # was at the moment of the MMIO write (ordering tests).
            device["x-no-posted-writes"] = True
        if args.arch == "s390":
            # On s390x each function sits behind a zPCI device (uid/fid,
            # its PCI domain in the guest: 0001:00:00.0, 0002:00:00.0);
            # its DMA goes through that function's zPCI IOMMU.
            device["id"] = "mlx" if n == 1 else f"mlx{n}"
            devices += ["-device", f"zpci,uid={n},fid={n},target={device['id']}"]
        devices += ["-device", json.dumps(device)]
    machine = "s390-ccw-virtio" if args.arch == "s390" else "q35"
    return [
        "-object", f"memory-backend-memfd,id=guestmem,size={args.memory},share=on",
        "-machine", f"{machine},memory-backend=guestmem",
    ] + devices


def monitor_path():
    """QEMU's human monitor socket for this run (vm.py asks it where the
    CPUs are when QEMU does not exit after the guest's exit status)."""
    return f"/tmp/mlx4-bf-mon-{os.getpid()}.sock"


def qemu_command(args, sock, sock2=None):
    accel = "kvm" if args.accel == "kvm" else "tcg"
    if args.arch == "s390":
        # The console is SCLP's VT220 (QEMU's first serial port there); the
        # bare QEMU build has no firmware: Debian's, from -L.
        cmdline = "console=ttysclp0 loglevel=5 panic=-1 oops=panic " + args.append
        head = [args.qemu or "qemu-system-s390x", "-L", args.firmware_dir,
                "-cpu", "max" if accel == "tcg" else "host"]
    else:
        cmdline = "console=ttyS0 loglevel=5 panic=-1 oops=panic " + args.append
        # la57=off: with 5-level paging (-cpu max) KASAN reports a false
        # wild-memory-access in identify_cpu() on about one boot in three.
        head = [args.qemu or "qemu-system-x86_64",
                "-cpu", "max,la57=off" if accel == "tcg" else "host"]
    return head + [
        "-nodefaults", "-no-reboot", "-nographic",
        "-serial", "stdio", "-accel", accel,
        "-monitor", f"unix:{monitor_path()},server=on,wait=off",
        "-smp", str(args.smp), "-m", args.memory,
    ] + (
        # One guest ns per instruction, no sleeping: guest timings are
        # instruction counts and repeat exactly (vCPUs then take turns).
        ["-icount", "shift=0,sleep=off"] if args.icount else []
    ) + [
        # TCG plugins (make profile's tools/profile/insn_profile.so).
        arg for spec in getattr(args, "plugin", None) or [] for arg in ("-plugin", spec)
    ] + [
        "-kernel", args.kernel, "-initrd", args.initrd, "-append", cmdline,
    ] + adapter_args(args, sock, sock2)


class Model:
    """The device model process: started before QEMU, stopped after it."""

    def __init__(self, args, second=False):
        tag = f"{os.getpid()}-2" if second else f"{os.getpid()}"
        self.sock = f"/tmp/mlx4-bf-model-{tag}.sock"
        self.trace = os.path.abspath(args.trace or f"/tmp/mlx4-bf-trace-{os.getpid()}.jsonl")
        if second:
            self.trace = self.trace.removesuffix(".jsonl") + "-2.jsonl"
        self.summary_path = self.trace + ".summary.json"
        self.log_path = self.trace + ".log"
        for path in (self.sock, self.summary_path):
            if os.path.exists(path):
                os.unlink(path)
        cmd = [args.model, "--socket", self.sock, "--trace", self.trace,
               "--summary", self.summary_path] + (args.model2_arg if second else args.model_arg)
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, preexec_fn=set_pdeathsig)
        deadline = time.monotonic() + 20
        while not os.path.exists(self.sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the device model did not start (log: {self.log_path})")
            time.sleep(0.02)
        print(f"vm: device model on {self.sock}, analyzer trace {self.trace}", file=sys.stderr)

    def stop(self):
        """Stops the model; returns its summary (a dict), or None."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        try:
            with open(self.summary_path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def first_unexpected_error(self):
        """The first protocol error in the trace outside a declared window."""
        try:
            with open(self.trace) as f:
                for line in f:
                    if '"protocol_error"' not in line:
                        continue
                    rec = json.loads(line)
                    if rec.get("kind") == "protocol_error" and not rec.get("expected"):
                        return rec
        except (OSError, ValueError):
            pass
        return None


def model_errors(model, summary):
    """What the model's summary says went wrong, as runner errors."""
    if summary is None:
        return [f"the device model left no summary (log: {model.log_path})"]
    unexpected = summary.get("unexpected_protocol_errors", 0)
    if not unexpected:
        return []
    first = model.first_unexpected_error() or {}
    return [f"the device model logged {unexpected} unexpected protocol error(s), first: "
            f"seq {first.get('seq')} {first.get('code')}: {first.get('detail')} "
            f"(trace: {model.trace})"]


class FileSaver:
    """Collects files the guest prints base64-encoded between markers."""

    def __init__(self, directory):
        self.directory = directory
        self.name = None
        self.chunks = []

    def feed(self, line):
        """Returns True if the line belonged to a file."""
        if self.name is None:
            # A cleared progress bar leaves its escapes, with no newline,
            # before the marker (the s390 console is a sized terminal).
            m = re.search(r"(?:^|\x1b\[2K)mlx4-bf-file: ([\w.\-]+)$", line)
            if m:
                self.name, self.chunks = m.group(1), []
            return m is not None
        if line == "mlx4-bf-file-end":
            os.makedirs(self.directory, exist_ok=True)
            path = os.path.join(self.directory, self.name)
            with open(path, "wb") as f:
                f.write(base64.b64decode("".join(self.chunks)))
            print(f"vm: saved {path}", file=sys.stderr)
            self.name = None
        else:
            self.chunks.append(line.strip())
        return True


class Ktap:
    """A tolerant KTAP/TAP reader: counts leaf results, checks the top plan."""

    def __init__(self, clock=time.monotonic):
        self.top_plan = None
        self.top_results = 0
        # Where the time goes: each top-level result with the seconds since
        # the one before it (or since the plan), for the slowest() summary.
        self.clock = clock
        self.mark = None
        self.durations = []
        self.passed = self.failed = self.skipped = 0
        self.failures = []
        # Per indentation level: did a deeper result appear since the last one here?
        self.deeper_failed = {}
        self.deeper_seen = {}

    def feed(self, line):
        m = PLAN_RE.match(line)
        if m and len(m.group(1)) == 0 and self.top_plan is None:
            self.top_plan = int(m.group(2))
            self.mark = self.clock()
            return
        m = RESULT_RE.match(line)
        if not m:
            return
        depth = len(m.group(1))
        ok = m.group(2) == "ok"
        name = m.group(4).strip()
        directive = (m.group(5) or "").upper()
        if depth == 0:
            self.top_results += 1
            now = self.clock()
            if self.mark is not None:
                self.durations.append((now - self.mark, name))
            self.mark = now
        had_children = self.deeper_seen.pop(depth, False)
        child_failed = self.deeper_failed.pop(depth, False)
        for d in [d for d in self.deeper_seen if d > depth]:
            self.deeper_seen.pop(d)
            self.deeper_failed.pop(d, None)
        for d in range(0, depth):
            self.deeper_seen[d] = True
            if not ok and directive not in ("SKIP", "XFAIL"):
                self.deeper_failed[d] = True
        if had_children:
            # A parent: its leaves were counted already, unless it failed
            # without a failing child (a crashed or timed-out program).
            if not ok and not child_failed:
                self.failed += 1
                self.failures.append(name + " (no failing subtest: crashed?)")
            return
        if directive == "SKIP":
            self.skipped += 1
        elif ok or directive == "XFAIL":
            self.passed += 1
        else:
            self.failed += 1
            self.failures.append(name)

    def slowest(self, count=5):
        """The top-level results that took longest, as 'name 12.3 s, ...'."""
        top = sorted(self.durations, key=lambda d: -d[0])[:count]
        return ", ".join(f"{name} {secs:.1f} s" for secs, name in top)


# How long QEMU may take to exit once the guest has printed its exit status
# (init.sh's reboot -f; -no-reboot turns it into QEMU exiting): a second or
# two. Past it the kernel is stuck in its reboot path: where the CPUs are is
# printed and the run fails then, not at the whole run's timeout.
EXIT_GRACE = 60

PC_RES = (re.compile(r"PSW=mask [0-9a-f]+ addr ([0-9a-f]+)"), re.compile(r"RIP=([0-9a-f]+)"))


def monitor_query(path, command, wait=5.0):
    """COMMAND's answer from QEMU's human monitor at PATH ('' if none)."""
    out = b""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as mon:
            mon.settimeout(wait)
            mon.connect(path)
            while not out.endswith(b"(qemu) "):
                out += mon.recv(65536) or b"(qemu) "
            out = b""
            mon.sendall(command.encode() + b"\n")
            while not out.endswith(b"(qemu) "):
                chunk = mon.recv(65536)
                if not chunk:
                    break
                out += chunk
    except OSError:
        pass
    return out.decode("utf-8", "replace").replace("\r", "")


def symbolize(text, system_map):
    """Each program counter in TEXT (an s390 PSW's address, x86's RIP) as
    symbol+offset from SYSTEM_MAP's text symbols."""
    symbols = []
    try:
        with open(system_map) as f:
            for line in f:
                addr, kind, name = line.split()[:3]
                if kind in "tTwW":
                    symbols.append((int(addr, 16), name))
    except (OSError, ValueError):
        return []
    symbols.sort()
    addrs = [addr for addr, _ in symbols]
    out = []
    for pattern in PC_RES:
        for m in pattern.finditer(text):
            pc = int(m.group(1), 16)
            i = bisect.bisect_right(addrs, pc) - 1
            out.append(f"{pc:#x} {symbols[i][1]}+{pc - addrs[i]:#x}" if i >= 0 else f"{pc:#x} ?")
    return out


def system_map_of(kernel):
    """The System.map of the build whose image is KERNEL (arch/*/boot/bzImage)."""
    d = os.path.dirname(os.path.abspath(kernel))
    for _ in range(4):
        if os.path.exists(os.path.join(d, "System.map")):
            return os.path.join(d, "System.map")
        d = os.path.dirname(d)
    return ""


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernel", required=True)
    p.add_argument("--initrd", required=True)
    p.add_argument("--shell", action="store_true", help="interactive console, no checks")
    p.add_argument("--ktap", action="store_true", help="parse and summarise KTAP results")
    p.add_argument("--timeout", type=int, default=600, help="seconds (default 600)")
    p.add_argument("--model", default="mlx4-model", help="the device model binary")
    p.add_argument("--model-arg", action="append", default=[],
                   help="an argument for the model (repeatable)")
    p.add_argument("--second-adapter", action="store_true",
                   help="a second adapter, its own model instance")
    p.add_argument("--model2-arg", action="append", default=[],
                   help="an argument for the second adapter's model (repeatable)")
    p.add_argument("--trace", help="the model's analyzer trace (default: temporary); "
                   "the second adapter's ends in -2.jsonl")
    p.add_argument("--no-posted-writes", action="store_true",
                   help="QEMU waits for the model on every write (ordering tests)")
    p.add_argument("--accel", choices=("tcg", "kvm"), default="tcg")
    p.add_argument("--arch", choices=("x86_64", "s390"), default="x86_64",
                   help="the guest's architecture (s390: s390-ccw-virtio, the adapter behind zpci)")
    p.add_argument("--qemu", help="the QEMU binary (default: qemu-system-ARCH from PATH)")
    p.add_argument("--firmware-dir", default="/usr/share/qemu",
                   help="QEMU's -L on s390 (s390-ccw.img)")
    p.add_argument("--smp", type=int, default=2)
    p.add_argument("--icount", action="store_true",
                   help="-icount shift=0,sleep=off: the guest clock counts instructions")
    p.add_argument("--plugin", action="append", default=[], metavar="SO[,ARG=VALUE...]",
                   help="load a TCG plugin (QEMU's -plugin; repeatable, TCG only)")
    p.add_argument("--memory", default="512M")
    p.add_argument("--append", default="", help="extra kernel command line")
    p.add_argument("--quiet", action="store_true", help="print only problems and the summary")
    p.add_argument("--save-files", metavar="DIR",
                   help="save files the guest sends as 'mlx4-bf-file: NAME', base64, 'mlx4-bf-file-end'")
    args = p.parse_args()
    if args.plugin and args.accel != "tcg":
        p.error("--plugin needs --accel tcg")

    models = [Model(args)]
    if args.second_adapter:
        models.append(Model(args, second=True))
    cmd = qemu_command(args, models[0].sock, models[1].sock if args.second_adapter else None)
    try:
        if args.shell:
            return subprocess.call(cmd)
        return run(cmd, args, models)
    finally:
        for model in models:
            model.stop()
        if os.path.exists(monitor_path()):
            os.unlink(monitor_path())


def stuck_in_reboot(args):
    """Print where the guest's CPUs are (QEMU's monitor), symbolized."""
    regs = monitor_query(monitor_path(), "info registers -a")
    print("vm: the guest's CPUs after its exit status, from QEMU's monitor:", file=sys.stderr)
    for line in regs.splitlines():
        if "PSW=" in line or "RIP=" in line or line.startswith("CPU#"):
            print(f"vm:   {line.strip()}", file=sys.stderr)
    for pc in symbolize(regs, system_map_of(args.kernel)):
        print(f"vm:   pc {pc}", file=sys.stderr)


def run(cmd, args, models):
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, preexec_fn=set_pdeathsig)
    ktap = Ktap()
    saver = FileSaver(args.save_files) if args.save_files else None
    problems = []
    exit_status = None
    timed_out = False

    def on_alarm(_sig, _frame):
        raise TimeoutError

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(args.timeout)
    try:
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if saver and saver.feed(line):
                continue
            if not args.quiet:
                print(line, flush=True)
            if KERNEL_PROBLEM_RE.search(line):
                problems.append(line.strip())
                if args.quiet:
                    print(line, flush=True)
            m = EXIT_RE.search(line)
            if m:
                exit_status = int(m.group(1))
                signal.alarm(EXIT_GRACE)
            if args.ktap:
                ktap.feed(line)
        proc.wait()
    except TimeoutError:
        timed_out = True
        if exit_status is not None:
            stuck_in_reboot(args)
    finally:
        signal.alarm(0)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    elapsed = time.monotonic() - start
    errors = [e for model in models for e in model_errors(model, model.stop())]
    if timed_out and exit_status is not None:
        errors.append(f"QEMU did not exit within {EXIT_GRACE} s of the guest's exit status "
                      "(the kernel stuck in reboot: its CPUs above)")
    elif timed_out:
        errors.append(f"timed out after {args.timeout} s")
    if exit_status is None:
        errors.append("the guest did not report an exit status (crash or hang?)")
    elif exit_status != 0:
        errors.append(f"the guest command exited with status {exit_status}")
    if problems:
        errors.append(f"the kernel reported {len(problems)} problem line(s), first: {problems[0]}")
    if args.ktap:
        if ktap.top_plan is None:
            errors.append("no KTAP plan on the console")
        elif ktap.top_results != ktap.top_plan:
            errors.append(f"KTAP plan 1..{ktap.top_plan} but {ktap.top_results} results")
        for name in ktap.failures:
            print(f"FAILED: {name}")
    for e in errors:
        print(f"vm: {e}", file=sys.stderr)
    print(f"vm: QEMU ran {elapsed:.1f} s", file=sys.stderr)
    if args.ktap and ktap.durations:
        print(f"vm: slowest: {ktap.slowest()}", file=sys.stderr)
    if args.ktap:
        failed = ktap.failed + (1 if errors and ktap.failed == 0 else 0)
        line = f"{ktap.passed} passed, {failed} failed"
        if ktap.skipped:
            line += f", {ktap.skipped} skipped"
        print(line)
    return 1 if errors or ktap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
