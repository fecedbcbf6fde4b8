#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Module lifetime: rmmod is refused while a context is open and succeeds after
# the last close; insmod/rmmod cycles leave the adapter bound again (the ID
# table matches it, so loading the module probes it). A num_uars or
# bf_reg_size that disagrees with the device fails the probe: no device node.

KO=${MLX4_BF_KO:-/lib/modules/mlx4_bf.ko}
# Parameters the module was loaded with, to load it the same way again.
PARAMS=${MLX4_BF_PARAMS:-}
DEV=/dev/mlx4_bf0
n=0
fail=0

result() { # ok? name
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n $2"; else echo "not ok $n $2"; fail=1; fi
}

wait_dev() {
	for _ in 1 2 3 4 5 6 7 8 9 10; do [ -e "$DEV" ] && return 0; sleep 0.2; done
	return 1
}

echo "TAP version 13"
if [ ! -e "$DEV" ] || [ ! -f "$KO" ]; then
	echo "1..0 # SKIP $DEV or $KO missing"
	exit 4
fi
echo "1..4"

exec 3<"$DEV"
rmmod mlx4_bf 2>/dev/null
result $((! $?)) rmmod_refused_while_a_context_is_open
exec 3<&-

rmmod mlx4_bf && [ ! -e "$DEV" ]
result $? rmmod_succeeds_after_the_last_close

ok=0
for i in 1 2 3 4 5; do
	# shellcheck disable=SC2086
	insmod "$KO" $PARAMS && wait_dev && exec 3<"$DEV" && exec 3<&- && rmmod mlx4_bf || ok=1
done
# shellcheck disable=SC2086
insmod "$KO" $PARAMS && wait_dev || ok=1
result $ok insmod_rmmod_cycles_rebind_the_adapter

# Overrides the device does not have (it has more than 2 UARs and 512-byte
# registers): the probe fails and no device node appears; probe runs inside
# insmod. Loading as before binds the adapter again.
ok=0
for bad in num_uars=2 bf_reg_size=128; do
	# shellcheck disable=SC2086
	rmmod mlx4_bf && insmod "$KO" $PARAMS $bad || ok=1
	if [ -e "$DEV" ]; then echo "# $bad: $DEV exists"; ok=1; fi
done
# shellcheck disable=SC2086
rmmod mlx4_bf && insmod "$KO" $PARAMS && wait_dev || ok=1
result $ok parameters_the_device_does_not_have_fail_the_probe
exit $fail
