# SPDX-License-Identifier: GPL-2.0
#
# mlx4-bf: the mlx4 BlueFlame send path as a Rust-for-Linux module.
#
#   make run        build what is missing, boot the test kernel, load the
#                   module and show what it did
#   make test       toolchain versions, host unit tests, then the selftests
#                   in the guest
#   make ci         what CI runs: the host tests, then make test of x86_64
#                   and s390x at the same time
#   make upstream   mainline mlx4_core and mlx4_ib against the model's
#                   strict firmware, one boot (KTAP)
#   make provider   our RDMA device, mlx4_bf0, under unmodified rdma-core
#                   and perftest, one boot (KTAP)
#   make pyverbs    x86_64: rdma-core's own tests (pyverbs) over mainline
#                   mlx4_ib and over mlx4_bf0, one boot, side by side
#
# Everything runs inside the toolchain root (scripts/setup-root.sh).
#
# Also: make module | compile-fail | kernel | setup | setup-check | versions | vm-run CMD='...' [EXTRA=dir] |
# vm-shell | qemu | rdma | debs | clean. ARCH=s390 selects the s390x test bed (cross-built
# kernel and module, the s390x QEMU, the adapter behind zPCI); KCONFIG=debug
# selects the debug kernel; KDIR=<built tree>
# builds the module against another Rust-enabled kernel. When invoked by
# Kbuild (make -C $KDIR M=$PWD), the Kbuild file is used instead of this one.

KCONFIG ?= base
export KCONFIG

RUN := scripts/mlx4-bf.sh

.PHONY: compile-fail run test ci upstream provider pyverbs post-cost bench profile profile-post pingpong fuzz lint host-test versions setup setup-check kernel qemu rdma debs module vm-run vm-shell clean

run:
	@$(RUN) run

test:
	@$(RUN) test

ci:
	@$(RUN) ci

upstream:
	@$(RUN) upstream

provider:
	@$(RUN) provider

pyverbs:
	@$(RUN) pyverbs

bench:
	@$(RUN) bench

profile:
	@$(RUN) profile

post-cost:
	@$(RUN) post-cost

profile-post:
	@$(RUN) profile-post

pingpong:
	@$(RUN) pingpong

fuzz:
	@$(RUN) fuzz

lint:
	@$(RUN) lint

compile-fail:
	@$(RUN) compile-fail

host-test:
	@$(RUN) host-test

versions:
	@$(RUN) versions

setup:
	@$(RUN) setup

# A throw-away root from scratch, whatever the cache holds (the recipe's check).
setup-check:
	@scripts/setup-check.sh

kernel:
	@$(RUN) kernel

qemu:
	@$(RUN) qemu

rdma:
	@$(RUN) rdma

debs:
	@$(RUN) debs $(SET)

module:
	@$(RUN) module

vm-run:
	@test -n "$(CMD)" || { echo "usage: make vm-run CMD='...' [EXTRA=dir]" >&2; exit 2; }
	@$(RUN) vm-run "$(CMD)" $(EXTRA)

vm-shell:
	@$(RUN) vm-shell $(EXTRA)

clean:
	rm -rf build target
	find drivers -name '*.o' -o -name '*.ko' -o -name '*.mod*' -o -name '.*.cmd' | xargs -r rm -f
	rm -f Module.symvers modules.order .*.cmd
