#!/bin/busybox sh
# SPDX-License-Identifier: GPL-2.0
#
# /init of the test initramfs: mounts the usual file systems, loads mlx4_bf
# (which binds the device model, 15b3:1003, by its ID table), runs
# /etc/mlx4-bf/cmd.sh and reports its exit status on the console for the host
# runner (tools/vm/vm.py).

/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/work
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug
mount -t tmpfs tmpfs /tmp
. /etc/mlx4-bf/env

echo "mlx4-bf-guest: $(uname -r), $(nproc) CPUs"
# shellcheck disable=SC2086
insmod /lib/modules/mlx4_bf.ko $MODPARAMS || echo "mlx4-bf-guest: insmod mlx4_bf.ko failed"

cd /work
if [ "$MODE" = shell ]; then
	setsid cttyhack sh
	rc=0
else
	sh /etc/mlx4-bf/cmd.sh
	rc=$?
fi
echo "mlx4-bf-guest-exit: $rc"
# Should the kernel not get through its reboot (QEMU would not exit: vm.py
# fails the run a minute later), where every task sleeps (wchan) is on the
# console first; user space still runs while the kernel shuts devices down.
(
	sleep 20
	echo "mlx4-bf-guest: still not rebooted 20 s after the exit status; tasks and their wchan:"
	for d in /proc/[0-9]*; do
		echo "mlx4-bf-guest:   ${d#/proc/} $(cat "$d/comm" 2>/dev/null) $(cat "$d/wchan" 2>/dev/null) $(cut -d' ' -f3 "$d/stat" 2>/dev/null)"
	done
) &
# -no-reboot turns the reset into QEMU exiting; x86 tinyconfig has no ACPI power-off.
reboot -f
