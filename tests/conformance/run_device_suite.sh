#!/bin/bash
# run.sh DEVICE [JOBS] — in a folder made by tests/conformance/device_bundle.sh.
#
# Runs every case on DEVICE in JOBS processes (default: the CPUs), each a
# share of the cases in one context.  A case that kills its process or runs
# past the time limit, the cases its process did not reach, and every failed
# case are run again alone: a failed launch can leave a GPU context unusable
# for what follows, so only a case that also fails alone is a failure.
# Writes results.txt (PASS/FAIL/CRASH lines, sorted) and prints the totals;
# with expected.xfail in the folder (the column's list, device_bundle.sh
# copies it), a case that fails unlisted or passes listed fails the run, as
# tbc-conformance's lists do: exit status 1.
set -uo pipefail
dev=${1:?usage: run.sh DEVICE [JOBS]}
jobs=${2:-$(nproc)}
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
limit=${TBC_SHARD_SECONDS:-300}
rm -rf shards && mkdir shards
ls cases >shards/all
split -n r/"$jobs" -d shards/all shards/list.
for l in shards/list.*; do
	(xargs -a "$l" -I{} echo cases/{} | xargs timeout "$limit" ./tbc-device-suite --device "$dev" \
		>"$l.out" 2>"$l.err") &
done
wait
head -1 shards/list.*.out | grep -m1 '^device' || { cat shards/list.*.err | head -5; exit 2; }
cat shards/list.*.out | grep -E '^(PASS|FAIL) ' >shards/first
# Cases to run alone: failed, or never reported.
{
	awk '$1 == "FAIL" {print $2}' shards/first
	comm -23 <(sort shards/all) <(awk '{print $2}' shards/first | sort)
} | sort -u >shards/again
: >shards/alone
while read -r c; do
	r=$(timeout 120 ./tbc-device-suite --device "$dev" "cases/$c" 2>&1 | grep -E '^(PASS|FAIL) ')
	[ -n "$r" ] || r="CRASH $c (no result alone: killed, or past 120 s)"
	echo "$r" >>shards/alone
done <shards/again
{
	awk 'FILENAME == ARGV[1] {skip[$1] = 1; next} !($2 in skip)' shards/again shards/first
	cat shards/alone
	[ -f compile_failures.txt ] && cat compile_failures.txt
} | sort -k2 >results.txt
awk '{n[$1]++} END {for (k in n) printf "%s %d\n", k, n[k]}' results.txt | sort
echo "again alone: $(wc -l <shards/again) (of them passed alone: $(grep -c '^PASS' shards/alone))"
[ -f expected.xfail ] || exit 0
listed=$(grep -v '^#' expected.xfail | awk 'NF {print $1}' | sort)
failed=$(awk '$1 != "PASS" {print $2}' results.txt | sort)
here=$(sort shards/all)
unexpected=$(comm -13 <(echo "$listed") <(echo "$failed"))
passing=$(comm -12 <(echo "$listed") <(echo "$here") | comm -23 - <(echo "$failed"))
[ -z "$unexpected" ] && [ -z "$passing" ] && { echo "as expected.xfail says"; exit 0; }
[ -n "$unexpected" ] && echo "failed, not in expected.xfail:" $unexpected
[ -n "$passing" ] && echo "passed, but in expected.xfail (remove them):" $passing
exit 1
