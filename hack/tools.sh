#!/usr/bin/env bash
# Builds the binaries that the test environment runs, kube-apiserver and etcd,
# from the versions pinned in hack/tools/*/go.mod, into a cache directory
# outside the repository (binaries are never committed).
#
#   hack/tools.sh            build what is missing; a second run does nothing
#   hack/tools.sh --dir      print the directory the binaries live in
#
# The directory is $FERRY_TOOLS_DIR when set, otherwise
# ${XDG_CACHE_HOME:-$HOME/.cache}/ferry/tools/kube-apiserver-<v>_etcd-<v>, so a
# version bump builds into a new directory instead of reusing a stale binary.
# internal/testenv computes the same default.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
apiserver_mod=$root/hack/tools/kube-apiserver
etcd_mod=$root/hack/tools/etcd

# required_version prints the version a tools module requires of a module.
required_version() {
	awk -v m="$2" '($1 == "require" && $2 == m) { print $3 } ($1 == m) { print $2 }' "$1/go.mod" | head -n 1
}

k8s_version=$(required_version "$apiserver_mod" k8s.io/kubernetes)
etcd_version=$(required_version "$etcd_mod" go.etcd.io/etcd/server/v3)
dir=${FERRY_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ferry/tools/kube-apiserver-${k8s_version}_etcd-${etcd_version}}

if [[ ${1:-} == --dir ]]; then
	echo "$dir"
	exit 0
fi

# works reports whether a binary exists and runs; a half-written or foreign
# binary is rebuilt rather than trusted.
works() {
	[[ -x $1 ]] && "$1" --version >/dev/null 2>&1
}

# build compiles one main package with `go build -v` and turns its package list
# into a progress line every 100 packages; compiler errors are passed through.
build() {
	local name=$1 moddir=$2 pkg=$3 ldflags=$4 hint=${5:-}
	local out=$dir/$name start=$SECONDS total n=0 line
	echo "==> $name: downloading modules for $pkg"
	(cd "$moddir" && go mod download)
	total=$(cd "$moddir" && go list -deps "$pkg" | wc -l)
	echo "==> $name: compiling up to $total packages${hint:+ ($hint)}"
	mkdir -p "$dir"
	(cd "$moddir" && go build -v -buildvcs=false -trimpath -ldflags "$ldflags" -o "$out.partial" "$pkg" 2>&1) |
		while IFS= read -r line; do
			if [[ $line == '#'* || $line == *' '* ]]; then
				echo "$line" # a compiler message, not a package name
			elif ((++n % 100 == 0)); then
				echo "    $name: $n/$total packages compiled, $((SECONDS - start))s"
			fi
		done
	mv "$out.partial" "$out"
	echo "==> $name: built in $((SECONDS - start))s: $("$out" --version 2>&1 | head -n 1)"
}

if works "$dir/kube-apiserver" && works "$dir/etcd"; then
	echo "tools up to date in $dir (kube-apiserver $k8s_version, etcd $etcd_version); nothing to do"
	exit 0
fi

works "$dir/etcd" || build etcd "$etcd_mod" go.etcd.io/etcd/server/v3 "-s -w"
works "$dir/kube-apiserver" || build kube-apiserver "$apiserver_mod" k8s.io/kubernetes/cmd/kube-apiserver \
	"-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"$k8s_version")" \
	"a cold build takes 3 to 8 minutes on 2 cores"
echo "tools ready in $dir"
