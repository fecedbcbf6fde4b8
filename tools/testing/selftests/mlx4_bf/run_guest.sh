#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs every selftest program next to this script and reports KTAP: one
# top-level result per program with the program's own output nested (indented
# by four spaces, as KTAP v1 nests subtests). Exit statuses follow kselftest:
# 0 pass, 4 skip, anything else (a timeout too) fail. The per-program timeout
# comes from ./settings.

cd "$(dirname "$0")" || exit 1
limit=$(sed -n 's/^timeout=//p' settings)
progs=$(ls ./*_test ./*_test.sh 2>/dev/null)
echo "KTAP version 1"
echo "1..$(echo $progs | wc -w)"
n=0
failed=0
for prog in $progs; do
	n=$((n + 1))
	name=${prog#./}
	{ timeout "${limit:-300}" "$prog" 2>&1; echo $? >/tmp/rc; } | sed 's/^/    /'
	rc=$(cat /tmp/rc)
	case $rc in
	0) echo "ok $n $name" ;;
	4) echo "ok $n $name # SKIP" ;;
	*) echo "not ok $n $name # exit=$rc"; failed=1 ;;
	esac
done
exit $failed
