#!/usr/bin/env bash
# Fetches kubectl from Debian's kubernetes-client package, the one the
# benchmark's kubectl baseline runs (hack/bench), into the tools cache next to
# kube-apiserver and etcd. It is not installed with apt: the package would
# conflict with other kubectl packages (Google Cloud SDK's, for one), and the
# baseline must run Debian's whatever else is on the PATH.
#
#   hack/kubectl.sh          download and extract it when missing; a second run does nothing
#   hack/kubectl.sh --path   print where the binary is (or would be)
#
# The directory is <tools cache>/kubernetes-client-<version>, where the tools
# cache is the parent of `hack/tools.sh --dir` and the version is apt's
# candidate, so that a Debian update lands in a new directory instead of
# reusing a stale binary. Needs apt's package lists (`apt-get update`), no root.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

version=$(apt-cache policy kubernetes-client | awk '$1 == "Candidate:" { print $2 }')
if [[ -z $version || $version == "(none)" ]]; then
	echo "hack/kubectl.sh: apt knows no kubernetes-client package: run 'apt-get update' (Debian bookworm or later)" >&2
	exit 1
fi
dir=$(dirname "$("$root/hack/tools.sh" --dir)")/kubernetes-client-$version
bin=$dir/kubectl

if [[ ${1:-} == --path ]]; then
	echo "$bin"
	exit 0
fi

# works reports whether the binary exists and runs; a half-written one is
# fetched again rather than trusted.
works() {
	[[ -x $1 ]] && "$1" version --client >/dev/null 2>&1
}

if works "$bin"; then
	echo "kubectl of kubernetes-client $version up to date in $dir; nothing to do"
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "==> kubectl: downloading kubernetes-client $version"
# The sandbox user is whoever runs this, so that apt does not try to drop
# to _apt, which may not write into the temporary directory.
(cd "$tmp" && apt-get download -qq -o APT::Sandbox::User="$(id -un)" "kubernetes-client=$version")
dpkg-deb -x "$tmp"/kubernetes-client_*.deb "$tmp/root"
mkdir -p "$dir"
install -m 0755 "$tmp/root/usr/bin/kubectl" "$bin.partial"
mv "$bin.partial" "$bin"
echo "==> kubectl ready: $bin ($("$bin" version --client --short 2>/dev/null || "$bin" version --client))"
