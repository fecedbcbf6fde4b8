#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Module lifetime, seen through the driver's RDMA device (mlx4_bf<N>,
# /sys/class/infiniband): loading the module probes the adapter (the ID
# table matches it) and registers the device; rmmod takes it away, even
# with its uverbs file open (the driver disassociates the file's contexts:
# rmmod does not wait for them); insmod/rmmod cycles and unbind/bind bring
# it back each time; a num_uars or bf_reg_size that disagrees with the
# device fails the probe: no RDMA device. After every insmod there is no
# /dev/mlx4_bf* node: the driver has no device of its own beside the RDMA
# one (issue 45).

KO=${MLX4_BF_KO:-/lib/modules/mlx4_bf.ko}
# Parameters the module was loaded with, to load it the same way again.
PARAMS=${MLX4_BF_PARAMS:-}
DRV=/sys/bus/pci/drivers/mlx4_bf
n=0
fail=0
# Each insmod that left a /dev/mlx4_bf* node, for the last result.
NODES=

result() { # ok? name
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n $2"; else echo "not ok $n $2"; fail=1; fi
}

# The name of the RDMA device mlx4_bf<N>, if one is registered.
ibdev() {
	for d in /sys/class/infiniband/mlx4_bf*; do
		[ -e "$d" ] && { echo "${d##*/}"; return 0; }
	done
	return 1
}

# Waits (10 s at most) until an mlx4_bf<N> is registered. (Its counter is
# not i: sh has no local variables, and the insmod cycles count with i.)
wait_ibdev() {
	t=0
	while [ $t -lt 50 ]; do
		ibdev >/dev/null && return 0
		sleep 0.2
		t=$((t + 1))
	done
	return 1
}

# The uverbs file of RDMA device $1 (/dev/infiniband/uverbsN).
uverbs_of() {
	for u in /sys/class/infiniband_verbs/uverbs*; do
		[ "$(cat "$u/ibdev" 2>/dev/null)" = "$1" ] &&
			{ echo "/dev/infiniband/${u##*/}"; return 0; }
	done
	return 1
}

# Waits (10 s at most) until port 1 of an mlx4_bf<N> is ACTIVE: the next
# program's QPs need its LID.
wait_active() {
	t=0
	while [ $t -lt 50 ]; do
		grep -qs ACTIVE /sys/class/infiniband/mlx4_bf*/ports/1/state && return 0
		sleep 0.2
		t=$((t + 1))
	done
	return 1
}

# After an insmod: no misc device node (noted, for the last result).
no_node() { # what
	for node in /dev/mlx4_bf*; do
		[ -e "$node" ] && NODES="$NODES $1: $node;"
	done
}

# insmod with the suite's parameters (and $1, if given).
load() {
	# shellcheck disable=SC2086
	insmod "$KO" $PARAMS ${1:-}
}

echo "TAP version 13"
DEV=$(ibdev)
if [ -z "$DEV" ] || [ ! -f "$KO" ]; then
	echo "1..0 # SKIP no RDMA device mlx4_bf<N>, or no $KO"
	exit 4
fi
BDF=
for d in "$DRV"/*:*; do [ -e "$d" ] && BDF=${d##*/}; done
echo "1..6"

# The module as /init or run_guest.sh loaded it.
no_node "the suite's insmod"
[ -n "$BDF" ] && [ "$(basename "$(readlink /sys/class/infiniband/"$DEV"/device)")" = "$BDF" ]
result $? rdma_device_registered_on_the_bound_function

# rmmod with the device's uverbs file open: the module goes, and the device.
UVERBS=$(uverbs_of "$DEV")
if [ -c "$UVERBS" ] && exec 3<"$UVERBS"; then
	timeout 60 rmmod mlx4_bf && ! ibdev >/dev/null && [ ! -e /sys/module/mlx4_bf ]
	rc=$?
	exec 3<&-
else
	echo "# no uverbs file of $DEV to open"
	rc=1
fi
result $rc rmmod_with_the_uverbs_file_open_takes_the_rdma_device_away

ok=0
for i in 1 2 3 4 5; do
	if load && wait_ibdev; then
		no_node "insmod cycle $i"
		rmmod mlx4_bf && ! ibdev >/dev/null || ok=1
	else
		echo "# cycle $i: no RDMA device after insmod"
		ok=1
	fi
done
load && wait_ibdev || ok=1
no_node "insmod after the cycles"
result $ok insmod_rmmod_cycles_register_and_remove_the_rdma_device

# Unbind takes the device away, bind brings it back (the same function).
ok=0
echo "$BDF" >"$DRV/unbind" && ! ibdev >/dev/null || ok=1
echo "$BDF" >"$DRV/bind" && wait_ibdev || ok=1
result $ok unbind_removes_and_bind_brings_back_the_rdma_device

# Overrides the device does not have (it has more than 2 UARs and 512-byte
# registers): the probe fails and no RDMA device appears; probe runs inside
# insmod. Loading as before binds the adapter again.
ok=0
for bad in num_uars=2 bf_reg_size=128; do
	rmmod mlx4_bf && load $bad || ok=1
	if ibdev >/dev/null; then echo "# $bad: $(ibdev) registered"; ok=1; fi
	no_node "insmod $bad"
done
rmmod mlx4_bf && load && wait_ibdev && wait_active || ok=1
no_node "the last insmod"
result $ok parameters_the_device_does_not_have_fail_the_probe

# No /dev/mlx4_bf* after any insmod of this test: the RDMA device is the
# driver's only user interface.
[ -z "$NODES" ] || echo "# device nodes:$NODES"
[ -z "$NODES" ]
result $? no_misc_device_node_after_insmod
exit $fail
