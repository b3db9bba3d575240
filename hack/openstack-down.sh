#!/usr/bin/env bash
# hack/openstack-down.sh: stop the OpenStack services hack/openstack-up.sh
# started, and nothing else. Each was started in its own session and its PID
# recorded under <state>/run; the whole process group of each recorded PID is
# stopped (TERM, then KILL after 10 seconds). A group is signalled only while
# its leader is the process that was started (same PID and start time), or,
# once the leader has exited, while members of its group remain; a recycled
# PID is never signalled. Then the local route that made 10.128.0.0/10 this
# machine's goes (hack/openstack-up.sh --range). The state directory is
# kept; --purge removes it.
set -euo pipefail

STATE=$("$(dirname "${BASH_SOURCE[0]}")/openstack-up.sh" --dir)
purge=false
case "${1:-}" in
--purge) purge=true ;;
"") ;;
*) echo "usage: $0 [--purge]" >&2; exit 2 ;;
esac

# ours PIDFILE: the recorded process group still holds what we started.
ours() {
	local pid started now
	read -r pid started <"$1"
	now=$(ps -o lstart= -p "$pid" 2>/dev/null | tr -s ' ')
	if [[ -n $now ]]; then
		[[ $now == "$started" && $(ps -o pgid= -p "$pid" | tr -d ' ') == "$pid" ]]
	else
		pgrep -g "$pid" >/dev/null
	fi
}

stopped=0
shopt -s nullglob
for pidfile in "$STATE"/run/*.pid; do
	name=$(basename "$pidfile" .pid)
	read -r pid _ <"$pidfile"
	if ours "$pidfile"; then
		echo "==> stop $name (process group $pid)"
		kill -TERM -- "-$pid" 2>/dev/null || true
		stopped=$((stopped + 1))
	fi
done
deadline=$((SECONDS + 10))
for pidfile in "$STATE"/run/*.pid; do
	read -r pid _ <"$pidfile"
	while ours "$pidfile" && ((SECONDS < deadline)); do sleep 0.2; done
	if ours "$pidfile"; then
		echo "==> $(basename "$pidfile" .pid) did not stop: KILL"
		kill -KILL -- "-$pid" 2>/dev/null || true
	fi
	rm -f "$pidfile"
done
echo "==> stopped $stopped service(s)"
range=$("$(dirname "${BASH_SOURCE[0]}")/openstack-up.sh" --range)
if [[ -n $(ip route show table local exact "$range" dev lo) ]]; then
	sudo=()
	if [[ $(id -u) != 0 ]]; then sudo=(sudo); fi
	"${sudo[@]}" ip route del local "$range" dev lo table local
	echo "==> removed the local route of $range"
fi
if $purge; then
	rm -rf "$STATE"
	echo "==> removed $STATE"
fi
