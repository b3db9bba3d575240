#!/usr/bin/env bash
# hack/demo.sh: `make demo` and `make chaos`. Starts the local OpenStack
# services when they are not running (and stops them again at the end),
# builds the demo, and runs it against bin/reconciler (see
# hack/demo/main.go for what it does).
# Arguments are passed to the demo (e.g. --scenario replace, --timeout 10m;
# an unknown scenario is a usage error that names the scenarios). The demo
# hosts the plans repository on a real Gitea (`make tools` builds it);
# --forge github runs it on a plain Git server with the GitHub stand-in
# instead.
set -euo pipefail
cd "$(dirname "$0")/.."

started=0
stop_openstack() {
	if ((started)); then
		echo "==> stopping the local OpenStack the demo started (hack/openstack-down.sh)"
		hack/openstack-down.sh >/dev/null
	fi
}
trap stop_openstack EXIT
if ! curl -fsS -o /dev/null --max-time 3 "http://$(hack/openstack-up.sh --address):5050/v3" 2>/dev/null; then
	echo "==> starting the local OpenStack services (hack/openstack-up.sh; the first time installs Debian packages, about 7 minutes)"
	started=1
	hack/openstack-up.sh
else
	echo "==> the local OpenStack services are running"
fi
# Static and path-free, as make build and make image compile: one
# configuration of the compiler for every program (see the Makefile).
CGO_ENABLED=0 go build -trimpath -o bin/demo ./hack/demo
bin/demo --reconciler bin/reconciler "$@"
