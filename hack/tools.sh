#!/usr/bin/env bash
# Builds the programs that the test environment runs, from the versions
# pinned in hack/tools/*/go.mod, into cache directories outside the
# repository (binaries are never committed):
#
#   - kube-apiserver and etcd (hack/tools/kube-apiserver, hack/tools/etcd),
#     and from the same Kubernetes module kube-scheduler,
#     kube-controller-manager, the kubelet and kube-proxy, for clusters
#     whose pods run in containers (containerd and runc from Debian, a
#     kubelet per node in a network namespace of its own), kubemark,
#     whose hollow kubelets stand in where hundreds of nodes are needed (the
#     bench), and kubectl, with which the tests install deploy/ as
#     docs/install.md says (`kubectl apply -k`: Debian's 1.20 client embeds
#     a kustomize too old for the overlays);
#   - the Cluster API managers (core, kubeadm bootstrap, KubeadmControlPlane)
#     and the CAPO manager (hack/tools/capi);
#   - Gitea, the forge the tests and the demo host the plans repository on
#     (pinned below: it builds only as the main module of its own source,
#     whose replace lines must hold, so no tools module can require it);
#   - promtool (hack/tools/prometheus), which checks deploy/monitoring's
#     alerting rules and runs their unit tests, and promql-names, from the
#     same module, which lists the metrics an expression selects;
#   - golangci-lint (hack/tools/golangci-lint), which make verify runs with
#     the repository's .golangci.yml.
#
#   hack/tools.sh                  build what is missing; a second run does nothing
#   hack/tools.sh GROUP...         build what is missing of these groups only:
#                                  kube (etcd and the Kubernetes programs),
#                                  managers, gitea, promtool (and promql-names),
#                                  golangci-lint (make lint: golangci-lint;
#                                  make test-openstack, demo and chaos: kube
#                                  managers gitea)
#   hack/tools.sh download         only download the modules every build needs
#                                  (.ci/run, in the background while apt works)
#   hack/tools.sh check-shared     fail when a module whose packages both the
#                                  Kubernetes programs and ferry's programs
#                                  compile is required at two versions (make verify)
#   hack/tools.sh --dir            print the directory of kube-apiserver and etcd
#   hack/tools.sh --managers-dir   print the directory of the CAPI and CAPO managers
#   hack/tools.sh --gitea-dir      print the directory of gitea (the binary and,
#                                  under src/, the templates it reads at run time)
#   hack/tools.sh --promtool-dir   print the directory of promtool and promql-names
#   hack/tools.sh --golangci-lint-dir  print the directory of golangci-lint
#
# The directories are $FERRY_TOOLS_DIR, $FERRY_MANAGERS_DIR, $FERRY_GITEA_DIR,
# $FERRY_PROMTOOL_DIR and $FERRY_GOLANGCI_LINT_DIR when set, otherwise
# ${XDG_CACHE_HOME:-$HOME/.cache}/ferry/tools/ followed by
# kube-apiserver-<v>_etcd-<v>, capi-<v>_capo-<v>, gitea-<v>, prometheus-<v>
# and golangci-lint-<v>, so that a version bump
# builds into a new directory instead of reusing a stale binary.
# internal/testing/testenv computes the same defaults. Two runs at once take turns
# (flock): neither sees the other's half-written binary.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
apiserver_mod=$root/hack/tools/kube-apiserver
etcd_mod=$root/hack/tools/etcd
capi_mod=$root/hack/tools/capi
prometheus_mod=$root/hack/tools/prometheus
golangci_lint_mod=$root/hack/tools/golangci-lint

# required_version prints the version a tools module requires of a module.
required_version() {
	awk -v m="$2" '($1 == "require" && $2 == m) { print $3 } ($1 == m) { print $2 }' "$1/go.mod" | head -n 1
}

k8s_version=$(required_version "$apiserver_mod" k8s.io/kubernetes)
etcd_version=$(required_version "$etcd_mod" go.etcd.io/etcd/server/v3)
capi_version=$(required_version "$capi_mod" sigs.k8s.io/cluster-api)
capo_version=$(required_version "$capi_mod" sigs.k8s.io/cluster-api-provider-openstack)
prometheus_version=$(required_version "$prometheus_mod" github.com/prometheus/prometheus)
golangci_lint_version=$(required_version "$golangci_lint_mod" github.com/golangci/golangci-lint/v2)
# Gitea v1.24.0 downloads and builds from the module proxy here; v1.27
# (module gitea.dev) does not: some of its dependencies are refused.
gitea_version=v1.24.0
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ferry/tools
# The Kubernetes programs' and the managers' directories also name their
# go.sum: a change of the versions they are built from (the alignment
# below) need not change Kubernetes' or CAPI's.
kube_sum=$(sha256sum "$apiserver_mod/go.sum" | cut -c1-8)
dir=${FERRY_TOOLS_DIR:-$cache/kube-apiserver-${k8s_version}_etcd-${etcd_version}_${kube_sum}}
managers_sum=$(sha256sum "$capi_mod/go.sum" | cut -c1-8)
managers_dir=${FERRY_MANAGERS_DIR:-$cache/capi-${capi_version}_capo-${capo_version}_${managers_sum}}
gitea_dir=${FERRY_GITEA_DIR:-$cache/gitea-${gitea_version}}
promtool_dir=${FERRY_PROMTOOL_DIR:-$cache/prometheus-${prometheus_version}}
golangci_lint_dir=${FERRY_GOLANGCI_LINT_DIR:-$cache/golangci-lint-${golangci_lint_version}}
# promql-names is ferry's own: built as the hash of its source, so that a
# change to it is rebuilt.
names_version=$(sha256sum "$prometheus_mod/promql-names/main.go" | cut -c1-12)

case ${1:-} in
--dir)
	echo "$dir"
	exit 0
	;;
--managers-dir)
	echo "$managers_dir"
	exit 0
	;;
--gitea-dir)
	echo "$gitea_dir"
	exit 0
	;;
--promtool-dir)
	echo "$promtool_dir"
	exit 0
	;;
--golangci-lint-dir)
	echo "$golangci_lint_dir"
	exit 0
	;;
esac

usage="usage: hack/tools.sh [GROUP... | download | check-shared | --dir | --managers-dir | --gitea-dir | --promtool-dir | --golangci-lint-dir]
groups: kube (etcd and the Kubernetes programs), managers, gitea, promtool (and promql-names), golangci-lint; none: all of them"
only=
groups=()
case ${1:-} in
download | check-shared) only=$1 ;;
'') groups=(kube managers gitea promtool golangci-lint) ;;
*)
	for g; do
		case $g in
		kube | managers | gitea | promtool | golangci-lint) groups+=("$g") ;;
		*)
			echo "$usage" >&2
			exit 2
			;;
		esac
	done
	;;
esac

# wanted reports whether group is among those asked for.
wanted() {
	local g
	for g in "${groups[@]}"; do
		[[ $g == "$1" ]] && return 0
	done
	return 1
}

# Every program is built as ferry's are (the Makefile's GO_BUILD:
# CGO_ENABLED=0 -trimpath), Gitea excepted (SQLite needs cgo): one
# configuration of the compiler, so that a package two programs share at
# the same version is compiled once. The Kubernetes programs and ferry's
# programs share the Kubernetes libraries (k8s.io/api, apimachinery,
# client-go, …) and what those import: hack/tools/kube-apiserver
# requires ferry's versions of them (replacing the staging modules ferry
# uses with ferry's release), which `hack/tools.sh check-shared` (make
# verify) holds it to.
export CGO_ENABLED=0

# The checksum database answers 404 for this module of CAPO's graph.
export GONOSUMDB=${GONOSUMDB:+$GONOSUMDB,}sigs.k8s.io/cluster-api/test

# works reports whether a binary exists and runs; a half-written or foreign
# binary is rebuilt rather than trusted.
works() {
	[[ -x $1 ]] && "$1" --version >/dev/null 2>&1
}

# kube_works is works for a program of kube_programs: kubectl has no
# --version, but `kubectl version --client`.
kube_works() {
	if [[ $(basename "$1") == kubectl ]]; then
		[[ -x $1 ]] && "$1" version --client >/dev/null 2>&1
	else
		works "$1"
	fi
}

# manager_works is works for a controller manager, which has no --version
# (CAPI's) and exits 2 on --help: it must list its webhook flags.
manager_works() {
	local usage
	[[ -x $1 ]] || return 1
	usage=$("$1" --help 2>&1 || true)
	[[ $usage == *--webhook-port* ]]
}

# build compiles main packages of one module with `go build -v` into out,
# a file for one package or a directory (ending in /) for several, and
# turns the package list into a progress line every 100 packages; compiler
# errors are passed through. One go build for several programs compiles
# what they share once and links each while it compiles the others. It
# writes to a file or directory of its own and renames into place, so that
# an interrupted build leaves nothing that looks finished.
build() {
	local out=$1 moddir=$2 ldflags=$3 hint=$4 tags=$5
	shift 5
	local name start=$SECONDS total n=0 line partial pkg
	if [[ $out == */ ]]; then
		name=$(for pkg; do basename "$pkg"; done | paste -sd, - | sed "s/,/, /g")
	else
		name=$(basename "$out")
	fi
	# go list downloads the modules whose packages the build needs, and
	# only those: `go mod download` would fetch every module the go.mod
	# lists (Prometheus's: 1.7 GB, of which promtool needs 0.9). make
	# verify's go mod tidy needs them all, and download fetches them.
	echo "==> $name: downloading the modules of $*"
	total=$(cd "$moddir" && go list -tags "$tags" -deps "$@" | wc -l)
	echo "==> $name: compiling up to $total packages${hint:+ ($hint)}"
	mkdir -p "$(dirname "$out.")"
	if [[ $out == */ ]]; then
		partial=$(mktemp -d "$out.partial.XXXXXX")/
	else
		partial=$(mktemp "$out.XXXXXX.partial")
	fi
	# shellcheck disable=SC2064 # expand now: the trap must remove this build's output
	trap "rm -rf '$partial'" EXIT
	(cd "$moddir" && go build -v -buildvcs=false -trimpath -tags "$tags" -ldflags "$ldflags" -o "$partial" "$@" 2>&1) |
		while IFS= read -r line; do
			if [[ $line == '#'* || $line == *' '* ]]; then
				echo "$line" # a compiler message, not a package name
			elif ((++n % 100 == 0)); then
				echo "    $name: $n/$total packages compiled, $((SECONDS - start))s"
			fi
		done
	if [[ $out == */ ]]; then
		mv "$partial"* "$out"
		rmdir "$partial"
	else
		mv "$partial" "$out"
	fi
	trap - EXIT
	echo "==> $name: built in $((SECONDS - start))s"
}

# download fetches the module graph of ferry, every tools module and
# Gitea, all at once (3.4 GB from an empty module cache, 3 minutes here).
# .ci/run starts it first thing, so that the downloads overlap apt's and
# make verify's; each build's own `go mod download` then finds its
# modules there, or waits for them (the module cache locks a module while
# it is downloaded). The builds below do not start it themselves: beside
# a cold build on two cores it made the whole no shorter (30m53s against
# 29m05s without). It fails only when a download does.
download() {
	local m pids=() failed=0 pid
	for m in "$root" "$etcd_mod" "$apiserver_mod" "$capi_mod" "$prometheus_mod" "$golangci_lint_mod"; do
		(cd "$m" && go mod download) &
		pids+=($!)
	done
	(cd "$(gitea_source)" && go mod download) &
	pids+=($!)
	for pid in "${pids[@]}"; do
		wait "$pid" || failed=1
	done
	return "$failed"
}

# gitea_source downloads Gitea's source into the module cache and prints
# its directory there.
gitea_source() {
	local src
	src=$(go mod download -json "code.gitea.io/gitea@$gitea_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -d $src ]] || {
		echo "gitea: go mod download gave no source directory" >&2
		return 1
	}
	echo "$src"
}

managers=(
	"cluster-api-manager sigs.k8s.io/cluster-api"
	"kubeadm-bootstrap-manager sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	"kubeadm-control-plane-manager sigs.k8s.io/cluster-api/controlplane/kubeadm"
	"capo-manager sigs.k8s.io/cluster-api-provider-openstack"
)

# The Kubernetes programs built from hack/tools/kube-apiserver besides the
# API server; they share most of its packages, so each takes seconds to a
# minute after it.
kube_programs=(kube-scheduler kube-controller-manager kubelet kube-proxy kubemark kubectl)

# up_to_date reports whether every group asked for works.
up_to_date() {
	local m
	if wanted kube; then
		works "$dir/kube-apiserver" && works "$dir/etcd" || return 1
		for m in "${kube_programs[@]}"; do
			kube_works "$dir/$m" || return 1
		done
	fi
	if wanted managers; then
		for m in "${managers[@]}"; do
			manager_works "$managers_dir/${m%% *}" || return 1
		done
	fi
	if wanted gitea; then gitea_works || return 1; fi
	if wanted promtool; then works "$promtool_dir/promtool" && names_works || return 1; fi
	if wanted golangci-lint; then works "$golangci_lint_dir/golangci-lint" || return 1; fi
	return 0
}

names_works() {
	[[ -x $promtool_dir/promql-names ]] && [[ $("$promtool_dir/promql-names" --version 2>/dev/null) == "$names_version" ]]
}

gitea_works() {
	works "$gitea_dir/gitea" && [[ -d $gitea_dir/src/templates ]]
}

# build_gitea copies Gitea's source out of the module cache into
# $gitea_dir/src (Gitea reads its templates and static files from there at
# run time: without the bindata tag they are not in the binary) and builds
# it there as the main module, with SQLite, which needs cgo.
build_gitea() {
	local src start=$SECONDS
	echo "==> gitea: downloading the source of code.gitea.io/gitea@$gitea_version"
	src=$(gitea_source)
	rm -rf "$gitea_dir/src"
	mkdir -p "$gitea_dir"
	cp -r "$src" "$gitea_dir/src"
	chmod -R u+w "$gitea_dir/src"
	echo "==> gitea: source in $gitea_dir/src ($((SECONDS - start))s)"
	CGO_ENABLED=1 build "$gitea_dir/gitea" "$gitea_dir/src" \
		"-s -w -X main.Version=${gitea_version#v}" "a cold build takes about 5 minutes on 2 cores" \
		"sqlite sqlite_unlock_notify libsqlite3" code.gitea.io/gitea
}

# build_golangci_lint builds golangci-lint. main.date set: otherwise it
# reports the version of the main module, this tools module's (devel).
build_golangci_lint() {
	build "$golangci_lint_dir/golangci-lint" "$golangci_lint_mod" \
		"-s -w -X main.version=${golangci_lint_version#v} -X main.commit=none -X main.date=none" "a cold build takes about 6 minutes on 2 idle cores, up to 16 when they are busy" "" \
		github.com/golangci/golangci-lint/v2/cmd/golangci-lint
}

# lock makes a second run wait for the first.
lock() {
	mkdir -p "$cache"
	exec 9>"$cache/.lock"
	if ! flock -n 9; then
		echo "==> another hack/tools.sh is building; waiting for it"
		flock 9
	fi
}

# check_shared compares the versions of the modules whose packages both
# the Kubernetes programs and ferry's programs compile: a package at two
# versions is compiled twice, and so is every package that imports it (a
# replaced module counts at its replacement's version). hack/tools/capi
# is not held to it: the CAPO manager built with ferry's gophercloud
# (v2.15 for its v2.4) left the rollback-replace demo's servers undeleted
# past its timeout.
check_shared() {
	local fmt='{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}'
	local ours theirs differ
	ours=$(cd "$root" && go list -deps -f "$fmt" ./cmd/... ./hack/... | grep -v "^github.com/ferry-dev/ferry" | sort -u)
	theirs=$(cd "$apiserver_mod" && go list -deps -f "$fmt" k8s.io/kubernetes/cmd/kube-apiserver "${kube_programs[@]/#/k8s.io/kubernetes/cmd/}" | sort -u)
	differ=$(join <(echo "$theirs") <(echo "$ours") | awk '$2 != $3')
	if [[ -n $differ ]]; then
		echo "hack/tools/kube-apiserver and ferry require these modules, whose packages both build, at different versions (module, the tools module's, ferry's):" >&2
		echo "$differ" >&2
		echo "each is compiled twice; give hack/tools/kube-apiserver ferry's version: go mod edit -require=MODULE@VERSION (or -replace for a staging module), then go mod tidy" >&2
		return 1
	fi
	echo "hack/tools/kube-apiserver and ferry's programs share $(join <(echo "$theirs") <(echo "$ours") | wc -l) modules, at the same versions"
}

if [[ $only == check-shared ]]; then
	check_shared
	exit
fi

if [[ $only == download ]]; then
	download
	exit
fi

# The Docker provider's CRDs (the old clusters of the replace scenario) come
# from this module of the graph, which no build downloads.
if wanted managers; then
	(cd "$capi_mod" && go mod download sigs.k8s.io/cluster-api/test)
fi

if up_to_date; then
	echo "tools up to date (${groups[*]}); nothing to do"
	exit 0
fi

lock

if wanted kube; then
	works "$dir/etcd" || build "$dir/etcd" "$etcd_mod" "-s -w" "" "" go.etcd.io/etcd/server/v3
	k8s_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"$k8s_version")"
	kube_missing=()
	works "$dir/kube-apiserver" || kube_missing+=(k8s.io/kubernetes/cmd/kube-apiserver)
	for m in "${kube_programs[@]}"; do
		kube_works "$dir/$m" || kube_missing+=("k8s.io/kubernetes/cmd/$m")
	done
	((${#kube_missing[@]} == 0)) || build "$dir/" "$apiserver_mod" "$k8s_ldflags" "a cold build takes about 12 minutes on 2 cores" "" "${kube_missing[@]}"
fi
if wanted managers; then
	hint="the first takes 2 to 5 minutes cold, the others seconds"
	for m in "${managers[@]}"; do
		name=${m%% *} pkg=${m#* }
		ldflags="-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=$capi_version"
		[[ $pkg == *provider-openstack* ]] && ldflags="-s -w -X sigs.k8s.io/cluster-api-provider-openstack/version.gitVersion=$capo_version"
		manager_works "$managers_dir/$name" || build "$managers_dir/$name" "$capi_mod" "$ldflags" "$hint" "" "$pkg"
		hint=
	done
fi
if wanted gitea; then
	gitea_works || build_gitea
fi
if wanted promtool; then
	# remove_all_sd leaves out the service discoveries (AWS, Azure, GCE, …),
	# which `promtool check rules` and `test rules` do not use and which are
	# most of a full build's time.
	works "$promtool_dir/promtool" || build "$promtool_dir/promtool" "$prometheus_mod" \
		"-s -w -X github.com/prometheus/common/version.Version=$prometheus_version" "a cold build takes about 4 minutes on 2 cores" remove_all_sd \
		github.com/prometheus/prometheus/cmd/promtool
	names_works || build "$promtool_dir/promql-names" "$prometheus_mod" "-s -w -X main.version=$names_version" "" "" ./promql-names
fi
if wanted golangci-lint; then
	works "$golangci_lint_dir/golangci-lint" || build_golangci_lint
fi
echo "tools ready (${groups[*]})"
