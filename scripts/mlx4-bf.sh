#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The test bed's entry point; the top-level Makefile calls it.
#
#   mlx4-bf.sh setup                 make the toolchain root, fetch the kernel source
#   mlx4-bf.sh versions              print the root's toolchain versions
#   mlx4-bf.sh test                  versions, host-test, suites
#   mlx4-bf.sh ci                    host-test, then test of x86_64 and s390 at once (.ci/run)
#   mlx4-bf.sh host-test             cargo test (pure rules, ABI, tools)
#   mlx4-bf.sh kernel                build (or reuse) the test kernel; print its directory
#   mlx4-bf.sh qemu                  build (or reuse) the s390x QEMU; print its path
#   mlx4-bf.sh rdma                  build (or reuse) rdma-core and perftest for the
#                                    guest (static); print their directory
#   mlx4-bf.sh debs [pyverbs]        Debian's rdma (iproute2) for the guest with its
#                                    loader and libraries (pyverbs: x86_64, with python3
#                                    and rdma-core's tests); print the directory
#   mlx4-bf.sh pcistb-test           s390x: BlueFlame posts through PCISTB, checked
#                                    by the model (fails on an unfixed QEMU)
#   mlx4-bf.sh module                build drivers/mlx4_bf against it
#   mlx4-bf.sh vm-run CMD [DIR...]   boot, load + bind, run CMD, return its status
#   mlx4-bf.sh vm-shell              boot to an interactive shell
#   mlx4-bf.sh run                   the demo: boot, load, post, show
#   mlx4-bf.sh bench                 the benchmark; results land in results/ (s390x: results/s390x/)
#   mlx4-bf.sh profile               instructions per call by function, in results/
#   mlx4-bf.sh post-cost             one post over mlx4_bf0: libmlx4, QP_POST, doorbell
#   mlx4-bf.sh profile-post          instructions per ibv_post_send() by function, QP_POST and libmlx4
#   mlx4-bf.sh fuzz                  the long fuzz campaign on the RDMA device
#                                    (FUZZ_VERBS_OPS, FUZZ_PROCS, FUZZ_SEED)
#   mlx4-bf.sh selftests             one boot: the kselftests (KTAP)
#   mlx4-bf.sh suites                every boot of make test (posted writes,
#                                    non-posted writes, nopat, upstream, provider,
#                                    pyverbs on x86),
#                                    and a total
#   mlx4-bf.sh upstream              one boot: mainline mlx4_core + mlx4_ib against
#                                    the model's strict firmware (KTAP)
#   mlx4-bf.sh provider              one boot: our RDMA device, mlx4_bf0, under
#                                    rdma-core and perftest (KTAP)
#   mlx4-bf.sh pyverbs               x86_64, one boot: rdma-core's own tests (pyverbs)
#                                    over mainline mlx4_ib and mlx4_bf0, side by side
#   mlx4-bf.sh lint                  rustfmt, clippy and checkpatch
#   mlx4-bf.sh compile-fail          what must not build (scripts/compile-fail.sh), KTAP
#
# Environment: ARCH=x86_64|s390 (s390: the cross-built s390x kernel and
# module, the s390x QEMU of scripts/build-qemu.sh, the adapter behind zPCI),
# KCONFIG=base|debug, KERNEL_SRC=tree, KDIR=built tree (skips
# the kernel build), ACCEL=tcg|kvm, VM_TIMEOUT=seconds, MODPARAMS="...",
# NO_POSTED_WRITES=1 (QEMU waits for the device model on every write),
# ICOUNT=1 (QEMU -icount shift=0: the guest clock counts instructions),
# QEMU_S390X=binary (another s390x QEMU, e.g. the root's unfixed one),
# BENCH_CLOCK=icount|wall (make bench's cost table in instructions or time),
# MLX4_BF_QP_POST_FUZZ_OPS=operations (the fuzzer in make test, per writer),
# SUITES="posted provider" (make test: only those suites, in its order),
# MLX4_BF_PARAM_SETS="writer=2" (the selftest boots' module parameter sets,
# ";" between them; both writers by default).
#
# The guest's adapter is always the ConnectX-3 device model (tools/mlx4-model);
# every boot keeps its analyzer trace in build/$KCONFIG/traces/.
#
# Every command runs inside the toolchain root (scripts/setup-root.sh): this
# script makes the root if needed and runs itself again in it.

source "$(dirname "$0")/lib.sh"

if [ -z "${MLX4_BF_IN_ROOT:-}" ]; then
	root=$("$TOP/scripts/setup-root.sh")
	# The cargo target directories (below) of checkouts that are gone.
	# Here, on the host: inside the root only this checkout is visible,
	# and every other one would look gone.
	for dir in "$CACHE"/cargo-target-*; do
		[ -f "$dir/.checkout" ] && [ ! -d "$(cat "$dir/.checkout")" ] && rm -rf "$dir"
	done
	in_root_at "$root" "$TOP/scripts/mlx4-bf.sh" "$@"
	exit $?
fi

# Rust build outputs, keyed by the root's toolchain like the kernel build and
# by the checkout: cargo decides freshness by comparing its outputs' times
# with the sources' (paths relative to the package), so a target directory
# shared with another checkout whose files are older than its last build
# would hand out that checkout's binaries. Those of checkouts that are gone
# are removed before entering the root (above).
CARGO_TARGET=$CACHE/cargo-target-$( { toolchain_id; echo "$TOP"; } | sha256sum | cut -c1-16)
mkdir -p "$CARGO_TARGET"
echo "$TOP" >"$CARGO_TARGET/.checkout"

KCONFIG=${KCONFIG:-base}
OUT=$TOP/build/$KCONFIG
[ "$ARCH" = x86_64 ] || OUT=$TOP/build/$ARCH-$KCONFIG
# QEMU's time limit in seconds: 1500 unless given (a selftest boot, both
# writers, ran 240 s in QEMU on 2026-11-29, 530-650 s on a loaded host while
# it had the misc device's programs too; VM_TIMEOUT_DEFAULT: 3600 on the
# debug kernel, KASAN, lockdep and kmemleak under TCG, where a boot of the
# misc programs alone took 1 370 s); make fuzz scales it.
VM_TIMEOUT=${VM_TIMEOUT:-}
VM_TIMEOUT_DEFAULT=1500
[ "$KCONFIG" = debug ] && VM_TIMEOUT_DEFAULT=3600
SELFTESTS=$TOP/tools/testing/selftests/mlx4_bf
# Tables and plots of bench, pingpong, profile and the upstream boot; the
# s390x ones apart, so that neither architecture's run replaces the other's.
RESULTS=$TOP/results
[ "$ARCH" = x86_64 ] || RESULTS=$TOP/results/s390x

# The built kernel tree (KDIR, or the cached test kernel, built if missing).
# Run it in the main shell: it sets KDIR for the later steps.
need_kdir() {
	if [ -z "${KDIR:-}" ]; then
		"$TOP/scripts/kernel-source.sh" >&2
		KDIR=$("$TOP/scripts/build-kernel.sh" "$KCONFIG")
		# In use until this run ends: another checkout's build-kernel.sh
		# does not prune it meanwhile.
		exec 6>>"$KDIR.use"
		flock -s 6
	fi
}

# The module's objects go to a directory of this architecture and kernel
# configuration (Kbuild's MO=), not beside its sources: make ci builds both
# architectures' at the same time. Kbuild refuses that while the sources
# hold an in-tree build's modules.order (a checkout built before): it is
# cleaned first, once.
module_objects() { # kdir outdir [make args...]
	local kdir=$1 mo=$2
	shift 2
	if [ -f "$TOP/modules.order" ]; then
		log "module: cleaning the in-tree build of the sources (objects go to build/ now)"
		make -s -C "$kdir" M="$TOP" "${KMAKE_FLAGS[@]}" clean >&2
	fi
	mkdir -p "$mo"
	make -s -C "$kdir" M="$TOP" MO="$mo" "${KMAKE_FLAGS[@]}" "$@" modules
}

build_module() {
	local kdir=$1
	log "module: building drivers/mlx4_bf against $kdir"
	module_objects "$kdir" "$OUT/module" >&2
	cp "$OUT/module/drivers/mlx4_bf/mlx4_bf.ko" "$OUT/"
}

# The source tree of a kernel build: an O= build directory names it in its
# Makefile; an in-tree build is its own source.
ksrc_of() {
	local ksrc
	ksrc=$(sed -n 's|^include \(.*\)/Makefile$|\1|p' "$1/Makefile" | head -n1)
	echo "${ksrc:-$1}"
}

build_selftests() {
	local kdir=$1 ksrc
	ksrc=$(ksrc_of "$kdir")
	log "selftests: building (static) against $ksrc/tools/testing/selftests"
	rm -rf "$OUT/guest"
	mkdir -p "$OUT/guest/selftests"
	local cross=()
	[ "$ARCH" = s390 ] && cross=(CROSS_COMPILE=s390x-linux-gnu-)
	# The programs on the RDMA device link the guest's rdma-core.
	make -s -C "$SELFTESTS" OUTPUT="$OUT/guest/selftests" "${cross[@]}" \
		KSFT_DIR="$ksrc/tools/testing/selftests" CFLAGS_EXTRA=-static \
		MLX4_BF_RDMA="$("$TOP/scripts/build-rdma-core.sh")" all >&2
	cp "$SELFTESTS/run_guest.sh" "$SELFTESTS/settings" "$SELFTESTS"/*_test.sh "$OUT/guest/selftests/"
}

# The helper, statically linked: the guest has no libc. For s390x the root's
# rustc has no s390x standard library: cargo builds it from rust-src
# (-Zbuild-std, which needs RUSTC_BOOTSTRAP=1 on a stable rustc). It is
# linked with rdma-core's static libraries for $ARCH (MLX4_BF_RDMA,
# tools/mlx4-bf/build.rs): it speaks the RDMA device only.
build_helper() {
	local target=x86_64-unknown-linux-gnu build_std=() rdma
	rdma=$("$TOP/scripts/build-rdma-core.sh")
	if [ "$ARCH" = s390 ]; then
		target=s390x-unknown-linux-gnu
		build_std=("-Zbuild-std=std,panic_abort")
		export RUSTC_BOOTSTRAP=1 CARGO_TARGET_S390X_UNKNOWN_LINUX_GNU_LINKER=s390x-linux-gnu-gcc
	fi
	log "helper: building tools/mlx4-bf (static, $target)"
	CARGO_TARGET_DIR=$CARGO_TARGET RUSTFLAGS="-C target-feature=+crt-static" MLX4_BF_RDMA=$rdma \
		cargo build --quiet --release -p mlx4-bf --target "$target" "${build_std[@]}" \
		--manifest-path "$TOP/Cargo.toml" >&2
	mkdir -p "$OUT/guest"
	cp "$CARGO_TARGET/$target/release/mlx4-bf" "$OUT/guest/"
}

# The device model (tools/mlx4-model), for the root's QEMU.
build_model() {
	log "model: building tools/mlx4-model"
	CARGO_TARGET_DIR=$CARGO_TARGET cargo build --quiet --release -p mlx4-model \
		--manifest-path "$TOP/Cargo.toml" >&2
	MODEL_BIN=$CARGO_TARGET/release/mlx4-model
}

# vm_boot MODE CMD VMARGS -- DIRS...
vm_boot() {
	local mode=$1 cmd=$2 vmargs=() dirs=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do vmargs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	dirs=("$@")
	need_kdir
	build_module "$KDIR"
	local busybox=/bin/busybox
	if [ "$ARCH" = s390 ]; then
		busybox=$S390X_BUSYBOX
		vmargs+=(--arch s390 --qemu "${QEMU_S390X:-$("$TOP/scripts/build-qemu.sh")}")
	fi
	BUSYBOX=$busybox "$TOP/tools/vm/mkinitramfs.sh" "$OUT/initramfs.cpio.gz" "$OUT/mlx4_bf.ko" \
		"$mode" "$cmd" "${MODPARAMS:-}" "${dirs[@]}"
	build_model
	# Every run keeps its analyzer trace.
	mkdir -p "$OUT/traces"
	TRACE=$OUT/traces/$(date +%Y%m%d-%H%M%S)-$$.jsonl
	vmargs+=(--model "$MODEL_BIN" --trace "$TRACE")
	[ -n "${NO_POSTED_WRITES:-}" ] && vmargs+=(--no-posted-writes)
	[ -n "${ICOUNT:-}" ] && vmargs+=(--icount)
	[ -n "${KERNEL_APPEND:-}" ] && vmargs+=(--append "$KERNEL_APPEND")
	log "vm: booting $ARCH $KCONFIG kernel${KERNEL_APPEND:+ ($KERNEL_APPEND)} under ${ACCEL:-tcg} with the device model${NO_POSTED_WRITES:+ (non-posted writes)} (timeout ${VM_TIMEOUT:-$VM_TIMEOUT_DEFAULT}s)"
	python3 "$TOP/tools/vm/vm.py" --kernel "$KDIR/$KIMAGE" \
		--initrd "$OUT/initramfs.cpio.gz" --timeout "${VM_TIMEOUT:-$VM_TIMEOUT_DEFAULT}" \
		--accel "${ACCEL:-tcg}" "${vmargs[@]}"
}

# The toolchain the run uses, as the first lines of make test.
versions() {
	sed -n 's/^\(rustc\|bindgen\|clang\|qemu\|packages\): /toolchain: &/p' /etc/mlx4-bf-toolchain
	echo "toolchain: rdma-core: Debian's sources rdma-core $RDMA_CORE_SRC_VERSION, perftest $PERFTEST_SRC_VERSION (static, scripts/build-rdma-core.sh)"
	if [ "$ARCH" = x86_64 ]; then
		echo "toolchain: guest debs: Debian's amd64 ${GUEST_DEBS[*]} (scripts/build-guest-debs.sh)"
	else
		echo "toolchain: guest debs: Debian's s390x ${GUEST_DEBS_S390X[*]} (scripts/build-guest-debs.sh)"
		sed -n 's/^\(s390x-gcc\): /toolchain: &/p' /etc/mlx4-bf-toolchain
		echo "toolchain: qemu-s390x: Debian's qemu source $QEMU_SRC_VERSION + $(cd "$TOP" && echo tools/qemu/*.patch)"
	fi
}

# rdma-core for the host's own builds of the helper (cargo test, clippy),
# which always links it (tools/mlx4-bf/build.rs): the x86_64 build, whatever
# ARCH the guest is.
host_rdma() {
	ARCH=x86_64 "$TOP/scripts/build-rdma-core.sh"
}

host_test() {
	log "host: cargo test (pure rules, ABI against uapi/mlx4_bf.h, tools)"
	CARGO_TARGET_DIR=$CARGO_TARGET MLX4_BF_RDMA=$(host_rdma) \
		cargo test --quiet --workspace --manifest-path "$TOP/Cargo.toml"
	log "host: the QEMU runner's console parsing"
	python3 -m unittest discover -s "$TOP/tools/vm" -p 'test_*.py'
	log "host: rdma-core's tests side by side (make pyverbs' verdicts)"
	python3 -m unittest discover -s "$TOP/tools/vm/pyverbs" -p 'test_*.py'
	log "host: the profile report's address attribution"
	python3 -m unittest discover -s "$TOP/tools/profile" -p 'test_*.py'
	log "host: the lint scripts' own tests"
	python3 -m unittest discover -s "$TOP/scripts" -p 'test_*.py'
}

# One boot running the selftests (MLX4_BF_TESTS: which programs; all by
# default) once per writer (MLX4_BF_PARAM_SETS; WRITER_BLIND_TESTS with the
# first only), as KTAP. The fuzzer's MLX4_BF_QP_POST_FUZZ_OPS
# operations take about 1 s per thousand: make test runs a short campaign,
# make fuzz the long one.
selftests() {
	local cmd
	cmd="MLX4_BF_WRITES=${NO_POSTED_WRITES:+nonposted} MLX4_BF_TESTS='${MLX4_BF_TESTS:-}'"
	cmd="$cmd MLX4_BF_QP_POST_FUZZ_OPS=${MLX4_BF_QP_POST_FUZZ_OPS:-15000}"
	cmd="$cmd MLX4_BF_PARAM_SETS='${MLX4_BF_PARAM_SETS:-writer=1;writer=2}'"
	cmd="$cmd MLX4_BF_ONCE='$WRITER_BLIND_TESTS' sh /work/selftests/run_guest.sh"
	if [ "$KCONFIG" = debug ]; then
		# Objects must be unreferenced for a while before kmemleak reports
		# them; its report lines fail the run (vm.py).
		cmd="$cmd; rc=\$?; rmmod mlx4_bf; sleep 6; echo scan >/sys/kernel/debug/kmemleak;
		     echo scan >/sys/kernel/debug/kmemleak; cat /sys/kernel/debug/kmemleak; exit \$rc"
	fi
	vm_boot test "$cmd" --ktap -- "$OUT/guest"
}

# Programs whose rules no BlueFlame writer changes, run with the first
# writer only: the unbind lifetimes (disassociation, zapped pages, pins,
# teardown; a QP_POST loop sees EIO whichever writer it had), 45% of a
# posted suite's time on s390x with both writers.
WRITER_BLIND_TESTS="mlx4_bf_qp_unbind_test"

# What depends on when the model looks at guest memory (the BlueFlame
# fallback), the byte checks and the refusals: run again with non-posted
# writes.
NONPOSTED_TESTS="mlx4_bf_qp_post_test mlx4_bf_qp_post_refusal_test"

# The C compiler for the guest's programs (static, like everything it runs).
guest_cc() {
	if [ "$ARCH" = s390 ]; then echo s390x-linux-gnu-gcc; else echo gcc; fi
}

# Mainline's side of the guest, in DIR: mlx4_core and mlx4_ib from the kernel
# build (the RDMA core and ib_uverbs are built in: configs/), rdma-core's
# tools and perftest (static, scripts/build-rdma-core.sh) in DIR/rdma/bin,
# Debian's rdma tool in DIR/debroot (guest_debroot), the guest
# scripts of tools/vm/upstream and its system call counter (syscount.c: the
# guest has no strace).
mainline_dir() { # dir [debs set: rdma]
	local dir=$1 ko rdma
	rm -rf "$dir"
	mkdir -p "$dir/rdma"
	for ko in drivers/net/ethernet/mellanox/mlx4/mlx4_core.ko drivers/infiniband/hw/mlx4/mlx4_ib.ko; do
		[ -f "$KDIR/$ko" ] || die "$KDIR/$ko missing: the kernel needs MLX4_INFINIBAND=m (configs/)"
		cp "$KDIR/$ko" "$dir/"
	done
	cp "$TOP/tools/vm/upstream/lib.sh" "$TOP/tools/vm/upstream/upstream.sh" \
		"$TOP/tools/vm/upstream/versus.sh" "$dir/"
	rdma=$("$TOP/scripts/build-rdma-core.sh")
	cp -a "$rdma/bin" "$dir/rdma/"
	guest_debroot "$dir" "${2:-rdma}"
	"$(guest_cc)" -O2 -Wall -Wextra -Werror -static -o "$dir/syscount" \
		"$TOP/tools/vm/upstream/syscount.c"
	build_ibv_program "$dir/ibv_comp_vectors" "$TOP/tools/vm/provider/ibv_comp_vectors.c"
}

# Debian's rdma tool (iproute2) with its own loader and libraries
# (scripts/build-guest-debs.sh: amd64 or s390x binaries, as the guest is;
# the set pyverbs, x86_64's only, adds python3 and pyverbs) in
# DIR/debroot, the guest's /work/debroot.
guest_debroot() { # dir [set: rdma]
	local debs
	debs=$("$TOP/scripts/build-guest-debs.sh" "${2:-rdma}")
	cp -a "$debs" "$1/debroot"
}

# make profile's TCG plugin in DIR, for this architecture's QEMU (its plugin
# API: Debian's QEMU 11.1 for x86, our 10.2 for s390x), and TARGETs of
# tools/profile for the guest.
build_profile() { # dir target...
	local dir=$1 api=7
	shift
	[ "$ARCH" = s390 ] && api=5
	make -s -C "$TOP/tools/profile" OUTPUT="$dir" HOSTCC=gcc CC="$(guest_cc)" \
		QEMU_PLUGIN_API=$api "$dir/insn_profile.so" "$@" >&2
}

# tools/profile/report.py over what a profile boot left in DIR.
profile_report() { # dir guest-program
	local nm=nm
	[ "$ARCH" = s390 ] && nm=s390x-linux-gnu-nm
	python3 "$TOP/tools/profile/report.py" --counts "$1/counts.txt" \
		--windows "$1/back/windows.txt" --kallsyms "$1/back/kallsyms.txt" \
		--system-map "$KDIR/System.map" --user "$2" --nm "$nm" \
		--out-dir "$RESULTS" ${PROFILE_ADDRS:+--addrs "$PROFILE_ADDRS"}
}

# A C program of ours (tools/vm/upstream/ibv_post_cost.c,
# tools/vm/provider/*.c) with what they share (tools/vm/upstream/verbs_util.c),
# static against the libibverbs and libmlx4 the guest's rdma-core programs
# are built with (scripts/build-rdma-core.sh, which also says why the
# provider is linked with --undefined).
build_ibv_program() { # out source...
	local out=$1 rdma
	shift
	rdma=$("$TOP/scripts/build-rdma-core.sh")
	"$(guest_cc)" -O2 -Wall -Wextra -Werror -static -I"$rdma/include" -o "$out" \
		"$TOP/tools/vm/upstream/verbs_util.c" "$@" \
		-L"$rdma/lib" -Wl,--undefined=verbs_provider_mlx4 -lmlx4 -libverbs -lpthread
}

# ibv_post_cost against Debian's libmlx4 and against the patched one
# (the QP_POST method), and tools/vm/provider/post_cost.sh, into DIR.
post_cost_dir() { # dir
	local rdma
	rdma=$("$TOP/scripts/build-rdma-core.sh")
	build_ibv_program "$1/ibv_post_cost" "$TOP/tools/vm/upstream/ibv_post_cost.c"
	build_ibv_program "$1/ibv_post_cost_qp" "$TOP/tools/vm/upstream/ibv_post_cost.c" \
		-L"$rdma/qp-post/lib"
	cp -a "$rdma/qp-post/bin" "$1/qp-post"
	cp "$TOP/tools/vm/provider/post_cost.sh" "$1/"
}

# Issue 23: unmodified mainline mlx4_core and mlx4_ib bind the model in
# strict firmware mode (tools/vm/upstream/upstream.sh), one boot, KTAP;
# rdma-core's tools and perftest run on them, with the analyzer's counters
# (mlx4-bf counters) around each run.
upstream() {
	local udir=$OUT/upstream
	mainline_dir "$udir"
	mkdir -p "$OUT/guest" "$RESULTS"
	build_helper
	cp "$OUT/guest/mlx4-bf" "$udir/"
	vm_boot test "sh /work/upstream.sh; rc=\$?; $send_back; exit \$rc" --ktap \
		--save-files "$RESULTS" -- "$udir"
}

# Issue 36: our driver's RDMA device, mlx4_bf0, under unmodified rdma-core
# and perftest (tools/vm/provider/provider.sh), one boot, KTAP, with the
# analyzer's counters around each run; its refusals; the QP_POST method
# (issue 38) by perftest over the patched libmlx4 and by the helper; then
# processes that leave without cleaning up, an unbind under a running
# application and a reload. Needs the selftests (mlx4_bf_invariants) and
# the helper built.
provider() {
	local pdir=$OUT/provider rdma prog cmd
	rm -rf "$pdir"
	mkdir -p "$pdir/rdma" "$RESULTS"
	rdma=$("$TOP/scripts/build-rdma-core.sh")
	cp -a "$rdma/bin" "$pdir/rdma/"
	cp -a "$rdma/qp-post/bin" "$pdir/qp-post"
	guest_debroot "$pdir"
	cp "$TOP/tools/vm/upstream/lib.sh" "$TOP"/tools/vm/provider/*.sh "$pdir/"
	for prog in ibv_refusals ibv_hold ibv_comp_vectors; do
		build_ibv_program "$pdir/$prog" "$TOP/tools/vm/provider/$prog.c"
	done
	cp "$OUT/guest/mlx4-bf" "$OUT/guest/selftests/mlx4_bf_invariants" "$pdir/"
	# The module again, its QP_POST declaration not what ib/methods.c
	# describes (ib/post.rs): the suite sees that device refused.
	local variant
	variant=$(mktemp -d)
	module_sources_copy "$variant"
	log "module: building the method-mismatch variant"
	make -s -C "$KDIR" M="$variant" "${KMAKE_FLAGS[@]}" \
		KRUSTFLAGS="--cfg mlx4_bf_method_mismatch" modules >&2
	cp "$variant/drivers/mlx4_bf/mlx4_bf.ko" "$pdir/mlx4_bf_mismatch.ko"
	rm -rf "$variant"
	cmd="sh /work/provider.sh; rc=\$?; $send_back"
	if [ "$KCONFIG" = debug ] && [ "$ARCH" = x86_64 ]; then
		# Issue 43: the fault walk (tools/vm/provider/fault_walk.sh) at
		# the end of the boot, with the model's diagnostic block
		# (mlx4_bf_model.h); some 30 minutes more.
		build_ibv_program "$pdir/ibv_fault_walk" \
			"$TOP"/tools/vm/provider/{ibv_fault_walk,fault_walk_ops,fault_walk_world,fault_walk_state,fault_walk_report,fault_walk_spare}.c \
			-I"$SELFTESTS" -I"$TOP/uapi"
		cmd="FAULT_WALK=1 FAULT_WALK_ARGS='${FAULT_WALK_ARGS:-}' $cmd"
		VM_TIMEOUT=${VM_TIMEOUT:-4800}
	fi
	if [ "$KCONFIG" = debug ]; then
		# As selftests(): what kmemleak finds once the module is gone.
		cmd="$cmd; rmmod mlx4_bf; sleep 6; echo scan >/sys/kernel/debug/kmemleak;
		     echo scan >/sys/kernel/debug/kmemleak; cat /sys/kernel/debug/kmemleak"
	fi
	vm_boot test "$cmd; exit \$rc" --ktap --save-files "$RESULTS" -- "$pdir"
}

# Issue 46: rdma-core's own test suite (tests/run_tests.py over pyverbs:
# Debian's amd64 python3-pyverbs, scripts/build-guest-debs.sh pyverbs) over
# mainline mlx4_core + mlx4_ib and over our provider in one boot with two
# adapters (tools/vm/pyverbs/pyverbs.sh), then every test's result side by
# side (tools/vm/pyverbs/side_by_side.py: results/pyverbs-side-by-side.txt;
# KTAP, one result per test: not ok where our provider does worse than
# mainline and tools/vm/pyverbs/differences.txt does not say why; the tests
# of not_run.txt are left out over both). make test's last suite on
# x86_64, and only there: the root reads no s390x binary index.
pyverbs() {
	local dir=$OUT/pyverbs
	[ "$ARCH" = x86_64 ] ||
		die "pyverbs: Debian's amd64 python3-pyverbs runs in the x86_64 guest only (s390x keeps to the static tools)"
	mainline_dir "$dir" pyverbs
	mkdir -p "$OUT/guest" "$RESULTS"
	build_helper
	cp "$OUT/guest/mlx4-bf" "$TOP/tools/vm/pyverbs/pyverbs.sh" "$TOP/tools/vm/pyverbs/not_run.txt" "$dir/"
	rm -f "$RESULTS"/pyverbs-*.txt
	# The suite runs twice, some 300 tests each.
	VM_TIMEOUT=${VM_TIMEOUT:-3600} vm_boot run "PYVERBS_DEVICES='${PYVERBS_DEVICES:-}' PYVERBS_TESTS='${PYVERBS_TESTS:-}' \
		sh /work/pyverbs.sh; rc=\$?; $send_back; exit \$rc" \
		--second-adapter --save-files "$RESULTS" -- "$dir" || return 1
	python3 "$TOP/tools/vm/pyverbs/side_by_side.py" "$RESULTS" \
		"$TOP/tools/vm/pyverbs/differences.txt" "$TOP/tools/vm/pyverbs/not_run.txt"
}

# Every suite of make test, one boot each, and their total as the last line:
# on x86 first what must not build (scripts/compile-fail.sh, no boot); then
# every program with posted writes (QEMU's default); NONPOSTED_TESTS with
# non-posted writes (the model then sees the send queue as it was at each
# MMIO write); on x86 every program again with `nopat` and the
# write-combining writer, where the memory types of the driver's and the
# user's mappings are only what they state (uncached; write-combining falls
# back to uncached); last, on x86,
# rdma-core's own tests over mainline and ours side by side (pyverbs()).
suites() {
	local out passed=0 failed=0 skipped=0 rc=0 line p f k started
	out=$(mktemp)
	# SUITES: some of them only, in this order (e.g. "posted provider").
	for suite in ${SUITES:-build posted nonposted nopat upstream provider pyverbs}; do
		[ "$suite" = nopat ] && [ "$ARCH" = s390 ] && continue
		# Debian's amd64 python3-pyverbs: the x86_64 guest only.
		[ "$suite" = pyverbs ] && [ "$ARCH" = s390 ] && continue
		# What must not build is the same Rust on both architectures.
		[ "$suite" = build ] && [ "$ARCH" = s390 ] && continue
		log "suite: $suite"
		started=$(date +%s)
		(
			case $suite in
			build)     exec "$TOP/scripts/compile-fail.sh" "$KDIR" ;;
			nonposted) NO_POSTED_WRITES=1
				   MLX4_BF_TESTS=$NONPOSTED_TESTS ;;
			# What nopat changes is the write-combining writer's
			# mapping (the store-block writer's is uncached
			# already) and user space's BlueFlame pages, whatever
			# the writer: the WC writer only.
			nopat)     KERNEL_APPEND=nopat
				   MLX4_BF_PARAM_SETS=writer=2 ;;
			upstream)  upstream; exit ;;
			provider)  provider; exit ;;
			pyverbs)   pyverbs; exit ;;
			esac
			selftests
		) | tee "$out" || rc=1
		log "suite: $suite took $(($(date +%s) - started)) s"
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n1)
		[ -n "$line" ] || { rc=1; continue; }
		read -r p _ f _ k _ <<<"${line//,/}"
		passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ${k:-0}))
	done
	rm -f "$out"
	[ "$failed" = 0 ] || rc=1
	echo "selftests: $passed passed, $failed failed, $skipped skipped"
	return $rc
}

total_of() { # log: its make test total line
	local line
	line=$(grep '^selftests: ' "$1" | tail -n1) || true
	echo "${line:-no total line}"
}

# What CI runs (.ci/run): the host tests once, then make test of both
# architectures at the same time, each a QEMU mostly on one of the two
# cores: x86_64's output as it comes, s390x's after it, then both verdicts.
# Fails if either does.
ci() {
	local dir rc_x86=0 rc_s390=0 pid
	host_test
	dir=$(mktemp -d)
	ARCH=s390 MLX4_BF_HOST_TESTED=1 "$TOP/scripts/mlx4-bf.sh" test >"$dir/s390" 2>&1 &
	pid=$!
	ARCH=x86_64 MLX4_BF_HOST_TESTED=1 "$TOP/scripts/mlx4-bf.sh" test 2>&1 | tee "$dir/x86_64" || rc_x86=1
	log "ci: x86_64 done; s390x's make test (running beside it):"
	wait $pid || rc_s390=1
	cat "$dir/s390"
	echo "ci: x86_64: $(total_of "$dir/x86_64") (exit $rc_x86)"
	echo "ci: s390x: $(total_of "$dir/s390") (exit $rc_s390)"
	rm -rf "$dir"
	[ $rc_x86 = 0 ] && [ $rc_s390 = 0 ]
}

cmd=${1:-}
shift || true
# The guest sends result files back over the console (vm.py --save-files).
# shellcheck disable=SC2016
send_back='for f in /tmp/results/*; do echo "mlx4-bf-file: ${f##*/}"; base64 "$f"; echo mlx4-bf-file-end; done'

case $cmd in
setup)     "$TOP/scripts/kernel-source.sh" ;;
versions)  versions ;;
test)      versions
	   if [ -n "${MLX4_BF_HOST_TESTED:-}" ]; then
		log "host: tested once for both architectures by make ci"
	   else
		host_test
	   fi
	   need_kdir; build_selftests "$KDIR"
	   build_helper
	   suites ;;
ci)        ci ;;
host-test) host_test ;;
kernel)    need_kdir; echo "$KDIR" ;;
qemu)      "$TOP/scripts/build-qemu.sh" ;;
rdma)      "$TOP/scripts/build-rdma-core.sh" ;;
debs)      "$TOP/scripts/build-guest-debs.sh" "$@" ;;
pcistb-test) # s390x: BlueFlame posts of one, two and two store blocks
	   # (32, 100, 160 bytes of payload) through QEMU's PCISTB. The model
	   # must execute each from its bytes with no protocol error (vm.py);
	   # on a QEMU without tools/qemu/0001 (QEMU_S390X=/usr/bin/qemu-system-s390x,
	   # the root's Debian build) every doubleword arrives byte-reversed and
	   # the model reports bf_ds_zero: this fails.
	   [ "$ARCH" = s390 ] || die "pcistb-test is for ARCH=s390"
	   need_kdir
	   mkdir -p "$OUT/guest"
	   build_helper
	   vm_boot run "for n in 32 100 160; do
			/work/mlx4-bf --device mlx4_bf0 post --size \$n || exit 1; done &&
		/work/mlx4-bf --device mlx4_bf0 info | grep 'device counters'" -- "$OUT/guest" ;;
module)    need_kdir; build_module "$KDIR" ;;
compile-fail) need_kdir; "$TOP/scripts/compile-fail.sh" "$KDIR" ;;
vm-run)    [ $# -ge 1 ] || die "usage: vm-run CMD [DIR...]"
	   c=$1; shift; vm_boot run "$c" -- "$@" ;;
vm-shell)  vm_boot shell "" --shell -- "$@" ;;
run)       need_kdir; build_selftests "$KDIR"
	   build_helper
	   cp "$TOP/tools/vm/demo/demo.sh" "$OUT/guest/"
	   rm -rf "$OUT/demo"
	   vm_boot run "sh /work/demo.sh; rc=\$?; $send_back; exit \$rc" \
		--save-files "$OUT/demo" -- "$OUT/guest"
	   echo "== the adapter's view of the first BlueFlame and doorbell post (analyzer trace $TRACE)"
	   python3 "$TOP/tools/vm/trace_view.py" "$TRACE"
	   # The sweep's numbers the adapter can vouch for, beside its wall clock.
	   echo "== per post, what the adapter saw, beside the guest's wall clock (mlx4-bf lat)"
	   python3 "$TOP/tools/vm/trace_view.py" --paths --wall "$OUT/demo" "$TRACE" ;;
bench)     need_kdir; build_selftests "$KDIR"
	   build_helper
	   mkdir -p "$RESULTS"
	   # Both boots have a second adapter, another model instance, for
	   # mainline mlx4_core + mlx4_ib and rdma-core (versus.sh), so that
	   # their posts are measured beside ours in the same boot.
	   mainline_dir "$OUT/mainline"
	   post_cost_dir "$OUT/mainline"
	   two=(--second-adapter)
	   # The cost table under -icount (BENCH_CLOCK=icount, the default):
	   # instructions, deterministic; or in wall-clock time (wall).
	   icount=()
	   [ "${BENCH_CLOCK:-icount}" = icount ] && icount=(--icount)
	   # Then the ioctl against rdma-core's way of posting (userpost), and
	   # libmlx4's own post (ibv_post_cost).
	   vm_boot run "sh /work/versus.sh up &&
		/work/mlx4-bf --device mlx4_bf0 bench ${icount[*]} --out-dir /tmp/results \
		${BENCH_ARGS:---min 4 --max 208 --step 12 --iters 2000} &&
		/work/mlx4-bf --device mlx4_bf0 userpost ${icount[*]} --out-dir /tmp/results \
		${USERPOST_ARGS:---min 4 --max 208 --step 68 --iters 300} &&
		sh /work/versus.sh post-cost ${POST_COST_ARGS:--m 4 -M 208 -s 68 -n 300} &&
		POST_COST_CLOCK=${BENCH_CLOCK:-icount} sh /work/post_cost.sh && $send_back" \
		"${icount[@]}" "${two[@]}" --save-files "$RESULTS" -- "$OUT/guest" "$OUT/mainline"
	   # Scaling needs vCPUs running side by side, and the ping-pong the
	   # model's asynchronous answers: never under -icount. The stress
	   # results come back even if the ping-pong fails; its status is the
	   # boot's.
	   vm_boot run "mkdir -p /tmp/results && sh /work/versus.sh up &&
		/work/mlx4-bf --device mlx4_bf0 stress --threads 1,2 --seconds 2 >/tmp/results/stress.txt &&
		cat /tmp/results/stress.txt &&
		{ /work/mlx4-bf --device mlx4_bf0 pingpong --out-dir /tmp/results \
			${PINGPONG_ARGS:---all --min 4 --max 208 --step 68 --iters 300} &&
		  /work/mlx4-bf --device mlx4_bf0 userpost --pingpong --out-dir /tmp/results \
			${USERPOST_PINGPONG_ARGS:---min 4 --max 208 --step 68 --iters 300} &&
		  sh /work/versus.sh perftest ${PERFTEST_SIZES:-4 72 140 208} &&
		  sh /work/versus.sh side-by-side ${SIDE_BY_SIDE_SIZES:-4 64 208 1024} &&
		  POST_COST_CLOCK=wall sh /work/post_cost.sh; rc=\$?;
		  $send_back; exit \$rc; }" \
		"${two[@]}" --save-files "$RESULTS" -- "$OUT/guest" "$OUT/mainline"
	   # rdma-core's post and latency beside ours, one table and its plot.
	   s390=()
	   [ "$ARCH" = s390 ] && s390=(--s390)
	   python3 "$TOP/tools/vm/versus.py" "${s390[@]}" "$RESULTS"
	   # The same perftest runs over mainline mlx4_ib and over our
	   # provider: equal per post, or this fails; the commands of one run
	   # side by side, from each adapter's analyzer trace.
	   python3 "$TOP/tools/vm/side_by_side.py" "$RESULTS" "$TRACE" \
		--run ${SIDE_BY_SIDE_RUN:-ib_write_lat 64}
	   # One post four ways (mainline, libmlx4, QP_POST, doorbell), the
	   # two boots' post_cost.sh tables joined.
	   python3 "$TOP/tools/vm/post_cost_table.py" "$RESULTS" ;;
pingpong)  need_kdir; build_selftests "$KDIR"
	   build_helper
	   mkdir -p "$RESULTS"
	   # perftest ib_send_lat between two contexts, wall clock (the model
	   # answers asynchronously: never under -icount).
	   vm_boot run "mkdir -p /tmp/results &&
		{ /work/mlx4-bf --device mlx4_bf0 pingpong --out-dir /tmp/results \
			${PINGPONG_ARGS:---all --min 4 --max 208 --step 68 --iters 300} &&
		  /work/mlx4-bf --device mlx4_bf0 userpost --pingpong --out-dir /tmp/results \
			${USERPOST_PINGPONG_ARGS:---min 4 --max 208 --step 68 --iters 300}; rc=\$?;
		  $send_back; exit \$rc; }" \
		--save-files "$RESULTS" -- "$OUT/guest" ;;
profile|profile-post) need_kdir
	   # Instructions per call by function, under -icount with
	   # tools/profile/insn_profile.so counting inside the guest program's
	   # window (Documentation/performance.rst, "Profiling a post"); one
	   # vCPU: the plugin cannot tell which vCPU runs an instruction. It
	   # counts around libmlx4's ibv_post_send() over
	   # mlx4_bf0, through QP_POST and by its own stores
	   # (tools/vm/provider/profile_post.sh): where the uverbs path's
	   # instructions go. On s390x libmlx4's own post is the
	   # s390_pci_mmio_write system call (no MIO in the guest).
	   pdir=$OUT/profile-post
	   rm -rf "$pdir"
	   mkdir -p "$pdir/guest" "$pdir/back" "$RESULTS"
	   build_profile "$pdir"
	   rdma=$("$TOP/scripts/build-rdma-core.sh")
	   build_ibv_program "$pdir/guest/ibv_post_cost_qp" "$TOP/tools/vm/upstream/ibv_post_cost.c" \
		-L"$rdma/qp-post/lib"
	   cp "$TOP/tools/vm/upstream/lib.sh" "$TOP/tools/vm/provider/profile_post.sh" "$pdir/guest/"
	   vm_boot run "${PROFILE_SIZES:+SIZES='$PROFILE_SIZES'} sh /work/profile_post.sh; rc=\$?;
		$send_back; exit \$rc" \
		--icount --smp 1 --append nokaslr --plugin "$pdir/insn_profile.so,out=$pdir/counts.txt" \
		--save-files "$pdir/back" -- "$pdir/guest"
	   profile_report "$pdir" "$pdir/guest/ibv_post_cost_qp" ;;
post-cost) need_kdir; build_helper
	   # One post over our RDMA device three ways, in guest instructions
	   # (tools/vm/provider/post_cost.sh): Debian's libmlx4, the patched
	   # one through QP_POST, and BlueFlame off.
	   pdir=$OUT/post-cost
	   rm -rf "$pdir"
	   mkdir -p "$pdir" "$RESULTS"
	   post_cost_dir "$pdir"
	   cp "$TOP/tools/vm/upstream/lib.sh" "$OUT/guest/mlx4-bf" "$pdir/"
	   vm_boot run "sh /work/post_cost.sh; rc=\$?; $send_back; exit \$rc" \
		--icount --save-files "$RESULTS" -- "$pdir" ;;
fuzz)      need_kdir; build_selftests "$KDIR"
	   ops=${FUZZ_VERBS_OPS:-1000000}
	   # The RDMA device's operations (firmware commands among them) take
	   # about 1 ms each under TCG. Twice that, and boot.
	   VM_TIMEOUT=${VM_TIMEOUT:-$((300 + ops / 500))}
	   args="-p ${FUZZ_PROCS:-4} ${FUZZ_SEED:+-s $FUZZ_SEED}"
	   vm_boot run "/work/selftests/mlx4_bf_qp_post_fuzz -n $ops $args" -- "$OUT/guest" ;;
lint)      need_kdir
	   ksrc=$(ksrc_of "$KDIR")
	   log "lint: rustfmt (kernel config), cargo fmt, clippy (workspace and module), checkpatch, import cycles, the driver's map"
	   rustfmt --check --edition 2021 --config-path "$ksrc/.rustfmt.toml" "$TOP"/drivers/mlx4_bf/*.rs
	   (cd "$TOP" && cargo fmt --all --check)
	   CARGO_TARGET_DIR=$CARGO_TARGET MLX4_BF_RDMA=$(host_rdma) \
		cargo clippy --quiet --workspace --all-targets \
		--manifest-path "$TOP/Cargo.toml" -- -D warnings
	   out=$(module_objects "$KDIR" "$OUT/module-lint" CLIPPY=1 W=1 2>&1) || { echo "$out"; exit 1; }
	   # The s390 kernel's own rustc flags (-Ctarget-feature=+backchain)
	   # warn on every Rust build: not the module's. Its paragraph and the
	   # count line after it go; any other warning stays.
	   if [ "$ARCH" = s390 ]; then
		out=$(awk -v RS= '!/`-Ctarget-feature`: `backchain`/ && !/^warning: 1 warning emitted$/' <<<"$out")
	   fi
	   [ -z "$out" ] || { echo "$out"; die "the module build warned"; }
	   perl "$ksrc/scripts/checkpatch.pl" --no-tree --quiet -f "$TOP/uapi/mlx4_bf.h" \
		"$SELFTESTS"/*.c "$SELFTESTS"/*.h "$TOP"/tools/vm/upstream/*.[ch] \
		"$TOP"/tools/vm/provider/*.[ch] "$TOP/tools/profile/markers.h"
	   # The kernel patch series as a patch, as the kernel's maintainers read it.
	   perl "$ksrc/scripts/checkpatch.pl" --no-tree --quiet "$TOP"/tools/linux/*.patch
	   # Files that import each other are one concern in two places; the
	   # driver's layers, lowest first, import only downwards
	   # (Documentation/mlx4_bf.rst, "Where things are").
	   python3 "$TOP/scripts/use-graph.py" "$TOP/drivers/mlx4_bf" mlx4_bf_main.rs \
		"abi cqe eqe ib_device icm identity kping_rules layout mad qp_context qp_size region reject ring srq_size store_block uar_alloc verbs wqe wqe_build module_parameters geometry |
		 sys rdma | stats | hw |
		 adapter | kernel_context ib | kping | driver crate"
	   python3 "$TOP/scripts/use-graph.py" "$TOP/tools/mlx4-bf/src" main.rs
	   python3 "$TOP/scripts/use-graph.py" "$TOP/tools/mlx4-model/src" lib.rs
	   python3 "$TOP/scripts/use-graph.py" "$TOP/rust/mlx4_bf_core/src" lib.rs
	   # The map of the driver names every file of it.
	   python3 "$TOP/scripts/check-doc-map.py" "$TOP/Documentation/mlx4_bf.rst" \
		"Where things are" "$TOP/drivers/mlx4_bf"
	   # No file over 500 lines outside tests, no driver function over 80.
	   python3 "$TOP/scripts/size-check.py"
	   log "lint: clean" ;;
upstream)  need_kdir; upstream ;;
provider)  need_kdir; build_selftests "$KDIR"
	   build_helper
	   provider ;;
pyverbs)   need_kdir; pyverbs ;;
selftests) need_kdir; build_selftests "$KDIR"
	   build_helper
	   selftests ;;
suites)    need_kdir; build_selftests "$KDIR"
	   build_helper
	   suites ;;
*)         die "unknown command '$cmd' (see the header of $0)" ;;
esac
