#!/usr/bin/env bash
# hack/openstack-up.sh: run real OpenStack services (Keystone, Neutron,
# Placement, Glance, Nova with the fake virt driver, RabbitMQ) from Debian's
# packages on 10.128.0.1, for ferry's OpenStack tests.
#
# It installs the packages when missing, writes the configuration into a
# state directory, creates the SQLite databases, bootstraps Keystone with
# endpoints for identity, compute, network, image and placement, starts each
# service, waits until each answers, and writes a clouds.yaml for the admin.
# Every step is skipped when already done, so a second run with everything
# up returns in seconds. hack/openstack-down.sh stops what it started.
#
#   hack/openstack-up.sh           bring everything up (idempotent)
#   hack/openstack-up.sh --install install the Debian packages only (.ci/run
#                                  does it in the background while Go builds)
#   hack/openstack-up.sh --dir     print the state directory
#   hack/openstack-up.sh --clouds  print the path of the admin clouds.yaml
#   hack/openstack-up.sh --address print the address the APIs listen on
#   hack/openstack-up.sh --range   print the range made this machine's
#
# The APIs listen on 10.128.0.1, not on loopback, so that pods on the test
# environment's real nodes (each node in a network namespace of its own,
# internal/testing/testenv/realnodes.go) reach the cloud as a cluster in a
# data centre does. 10.128.0.0/10 is made an address range of this machine
# (`ip route add local 10.128.0.0/10 dev lo`, as 127.0.0.0/8 is): the
# services bind 10.128.0.1 and the floating IPs of the tests' external
# networks (10.<128..191>.<n>.0/24, not 10.128.0.0/24) are this machine's addresses, where a
# test's API server listens as a cluster's endpoint does; real nodes route
# the range through their network's host address. hack/openstack-down.sh
# removes the route. RabbitMQ stays on 127.0.0.1: only Nova talks to it.
#
# FERRY_OPENSTACK_DIR overrides the state directory. Services run as the
# invoking user (root on CI).
set -euo pipefail

STATE=${FERRY_OPENSTACK_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/ferry/openstack}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=/usr/bin/python3 # the services' Python, not another one on the PATH
RANGE=10.128.0.0/10 ADDR=10.128.0.1

case "${1:-}" in
--dir) echo "$STATE"; exit 0 ;;
--clouds) echo "$STATE/clouds.yaml"; exit 0 ;;
--address) echo "$ADDR"; exit 0 ;;
--range) echo "$RANGE"; exit 0 ;;
"" | --install) ;;
*) echo "usage: $0 [--dir|--clouds|--address|--range|--install]" >&2; exit 2 ;;
esac

PACKAGES=(keystone python3-openstackclient neutron-server placement-api
	nova-api nova-conductor nova-scheduler nova-compute nova-compute-ironic glance-api
	rabbitmq-server curl)

start_time=$SECONDS
log() { printf '==> [%3ss] %s\n' "$((SECONDS - start_time))" "$*"; }
die() { printf 'openstack-up: %s\n' "$*" >&2; exit 1; }

sudo=()
if [[ $(id -u) != 0 ]]; then sudo=(sudo); fi

install_packages() {
	local missing=()
	for p in "${PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	if ((${#missing[@]} == 0)); then return; fi
	# The packages' postinst scripts would start system-wide services on the
	# ports used below; Debian's policy-rc.d convention stops them. Machines
	# built from container images have one already; otherwise one is put in
	# place for the install only.
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\n# hack/openstack-up.sh: no service starts during its install\nexit 101\n' |
			"${sudo[@]}" tee /usr/sbin/policy-rc.d >/dev/null
		"${sudo[@]}" chmod 755 /usr/sbin/policy-rc.d
		trap '"${sudo[@]}" rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	log "installing ${#missing[@]} Debian packages: ${missing[*]}"
	"${sudo[@]}" apt-get update -qq
	# Without recommends: they would bring a kernel, QEMU, libvirt and
	# libguestfs that the fake driver never uses.
	local apt=(apt-get install -y -qq --no-install-recommends "${missing[@]}")
	local new
	new=$(apt-get -s "${apt[@]:1}" 2>/dev/null | grep -c '^Inst ') || true
	log "$new packages to install with their dependencies (about 5 minutes on a fresh machine, up to 13 when its cores are busy); log: $STATE/log/apt.log"
	# apt-get writes its machine-readable progress to stdout with its other
	# output; apt_progress shows the progress on the terminal (fd 3) and
	# keeps the rest for the log.
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" "${apt[@]}" -o APT::Status-Fd=1 2>&1 |
		apt_progress 3>&1 >"$STATE/log/apt.log" ||
		{ tail -20 "$STATE/log/apt.log" >&2; die "apt-get install failed (log: $STATE/log/apt.log)"; }
}

# apt_progress reads apt-get's output with its status lines ("dlstatus:" and
# "pmstatus:", each with a percentage), and shows on fd 3 how the download
# and then the install get on: at each new tenth, and every 15 seconds
# otherwise, so that a long step (a slow postinst) still shows. Other lines
# go to stdout.
apt_progress() {
	local line partial='' rc kind pct what phase='' cur='' shown=0 last=$SECONDS
	while :; do
		rc=0
		IFS= read -r -t 15 line || rc=$?
		if ((rc > 128)); then # a timeout, perhaps within a line
			partial+=$line
			[[ -z $phase ]] || { log "$phase: $cur" >&3; last=$SECONDS; }
			continue
		fi
		line=$partial$line partial=''
		if ((rc != 0)); then # the end
			[[ -z $line ]] || printf '%s\n' "$line"
			break
		fi
		case $line in
		dlstatus:* | pmstatus:*) ;;
		*) printf '%s\n' "$line"; continue ;;
		esac
		IFS=: read -r kind _ pct what <<<"$line"
		pct=${pct%%.*}
		case $kind in
		dlstatus) kind=downloading what=${what/Retrieving /} ;;
		pmstatus) kind=installing ;;
		esac
		what=${what%% (*} # no architecture, no time left
		case $what in
		Preparing\ to\ configure* | Configuring* | Installed*) what="configuring ${what##* }" ;;
		Preparing* | Unpacking* | Installing*) what="unpacking ${what##* }" ;;
		*) what=${what,} ;;
		esac
		cur="$pct% ($what)"
		if [[ $kind != "$phase" ]] || ((pct / 10 > shown / 10 || SECONDS - last >= 15)); then
			phase=$kind shown=$pct last=$SECONDS
			log "$phase: $cur" >&3
		fi
	done
	[[ -z $phase ]] || log "$phase: done" >&3
}

# render copies a template from hack/openstack with the state directory and
# password filled in.
render() {
	sed -e "s#@STATE@#$STATE#g" -e "s#@PASSWORD@#$PASSWORD#g" -e "s#@ADDR@#$ADDR#g" "$HERE/openstack/$1" >"$STATE/etc/$1"
}

# wal turns on SQLite's write-ahead log; without it the services answer 500
# "database is locked" under concurrent requests.
wal() { "$PY" -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA journal_mode=WAL')" "$1"; }

# once runs a setup step unless its marker exists, and leaves the marker.
once() {
	local name=$1; shift
	[[ -e $STATE/done/$name ]] && return
	log "setup: $name"
	"$@" >>"$STATE/log/setup.log" 2>&1 || { tail -20 "$STATE/log/setup.log" >&2; die "setup step $name failed (log: $STATE/log/setup.log)"; }
	touch "$STATE/done/$name"
}

# A pidfile holds the PID and the start time of the process; a PID that
# was recycled for another process does not match.
running() {
	local pidfile=$STATE/run/$1.pid pid started
	[[ -f $pidfile ]] || return 1
	read -r pid started <"$pidfile"
	[[ $(ps -o lstart= -p "$pid" 2>/dev/null | tr -s ' ') == "$started" ]]
}

# start runs a service in its own session, so that hack/openstack-down.sh can
# stop it with all its children (by process group), and records its PID.
start() {
	local name=$1; shift
	if running "$name"; then return; fi
	log "start $name"
	setsid "$@" >>"$STATE/log/$name.log" 2>&1 </dev/null &
	echo "$! $(ps -o lstart= -p $! | tr -s ' ')" >"$STATE/run/$name.pid"
}

# wait_for polls until a command succeeds, showing what it waits for.
wait_for() {
	local what=$1 timeout=$2; shift 2
	local deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS > deadline)); then die "$what did not answer within ${timeout}s; see $STATE/log/"; fi
		sleep 1
	done
	log "$what answers"
}

http_up() { curl -s -o /dev/null --max-time 5 "$1"; }
tcp_up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# local_range makes RANGE addresses of this machine (see the top).
local_range() {
	# (Not `ip route | grep -q`: under pipefail, grep's early exit fails
	# the pipeline when the route is there.)
	if [[ -z $(ip route show table local exact "$RANGE" dev lo) ]]; then
		log "ip route add local $RANGE dev lo (the APIs' address and the tests' floating IPs)"
		"${sudo[@]}" ip route add local "$RANGE" dev lo table local
	fi
}

mkdir -p "$STATE"/{etc,log,run,done,keystone,neutron/lock,placement,glance/images,glance/staging,glance/tasks,nova/lock,nova/instances,rabbit}
install_packages
if [[ ${1:-} == --install ]]; then
	log "the OpenStack packages are installed"
	exit 0
fi
if [[ ! -s $STATE/admin-password ]]; then
	(umask 077 && "$PY" -c 'import secrets; print(secrets.token_urlsafe(18))' >"$STATE/admin-password")
fi
PASSWORD=$(cat "$STATE/admin-password")
# A state directory bootstrapped on another address (loopback, before)
# has that address in its Keystone catalog: start again from scratch.
if [[ -e $STATE/done/keystone-bootstrap && $(cat "$STATE/address" 2>/dev/null) != "$ADDR" ]]; then
	die "$STATE was set up for another address than $ADDR: run hack/openstack-down.sh --purge, then this again"
fi
echo "$ADDR" >"$STATE/address"
local_range
for f in keystone.conf neutron.conf ml2_conf.ini placement.conf glance-api.conf nova.conf; do render "$f"; done

export OS_AUTH_URL=http://$ADDR:5050/v3 OS_USERNAME=admin OS_PASSWORD=$PASSWORD OS_PROJECT_NAME=admin \
	OS_USER_DOMAIN_ID=default OS_PROJECT_DOMAIN_ID=default OS_IDENTITY_API_VERSION=3 OS_REGION_NAME=RegionOne

# RabbitMQ, for Nova. epmd is started here in the foreground so that it is
# ours to stop; otherwise RabbitMQ daemonises one outside our process group.
# RabbitMQ runs as the invoking user from its own binary: Debian's wrapper
# would switch to the rabbitmq user, who cannot enter a state directory
# under a private home.
start epmd env ERL_EPMD_ADDRESS=127.0.0.1 epmd -address 127.0.0.1
start rabbitmq env HOME="$STATE/rabbit" RABBITMQ_MNESIA_BASE="$STATE/rabbit/mnesia" RABBITMQ_LOG_BASE="$STATE/rabbit/log" \
	RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODENAME=rabbit@localhost ERL_EPMD_ADDRESS=127.0.0.1 \
	/usr/lib/rabbitmq/bin/rabbitmq-server

# Keystone.
K=(keystone-manage --config-file "$STATE/etc/keystone.conf")
once keystone-db "${K[@]}" db_sync
keystone_keys() {
	"${K[@]}" fernet_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)"
	"${K[@]}" credential_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)"
}
once keystone-keys keystone_keys
once keystone-bootstrap "${K[@]}" bootstrap --bootstrap-password "$PASSWORD" \
	--bootstrap-admin-url "http://$ADDR:5050/v3/" --bootstrap-public-url "http://$ADDR:5050/v3/" \
	--bootstrap-internal-url "http://$ADDR:5050/v3/" --bootstrap-region-id RegionOne
once keystone-wal wal "$STATE/keystone/keystone.db"
start keystone env OS_KEYSTONE_CONFIG_FILES="$STATE/etc/keystone.conf" keystone-wsgi-public --host "$ADDR" --port 5050
wait_for Keystone 60 http_up "http://$ADDR:5050/v3"

endpoints() {
	local name type url
	while read -r name type url; do
		openstack service create --name "$name" "$type"
		for iface in public internal admin; do
			openstack endpoint create --region RegionOne "$type" "$iface" "$url"
		done
	done <<-EOF
		neutron network http://$ADDR:9696
		placement placement http://$ADDR:8778
		nova compute http://$ADDR:8774/v2.1
		glance image http://$ADDR:9292
	EOF
}
once keystone-endpoints endpoints

# Neutron: its alembic migrations fail on SQLite, so the schema is created
# from the models and stamped; one fake Open vSwitch agent row for the
# compute host lets ML2 bind ports (agent_down_time is huge in the config).
neutron_schema() {
	"$PY" -c "from neutron.db.migration.models import head; import sqlalchemy as sa; head.get_metadata().create_all(sa.create_engine('sqlite:///$STATE/neutron/neutron.db'))"
	wal "$STATE/neutron/neutron.db"
	neutron-db-manage --config-file "$STATE/etc/neutron.conf" --config-file "$STATE/etc/ml2_conf.ini" stamp heads
}
neutron_agent() {
	"$PY" - "$STATE/neutron/neutron.db" <<-'PY'
		import datetime, json, sqlite3, sys, uuid
		c = sqlite3.connect(sys.argv[1])
		now = datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M:%S')
		conf = {"bridge_mappings": {"public": "br-ex"}, "tunnel_types": ["vxlan"], "integration_bridge": "br-int",
		        "ovs_hybrid_plug": False, "datapath_type": "system",
		        "ovs_capabilities": {"datapath_types": ["system"], "iface_types": ["internal", "vxlan"]}}
		c.execute("insert into agents (id,agent_type,binary,topic,host,availability_zone,admin_state_up,created_at,"
		          "started_at,heartbeat_timestamp,description,configurations,resource_versions,load,resources_synced) "
		          "values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
		          (str(uuid.uuid4()), 'Open vSwitch agent', 'neutron-openvswitch-agent', 'N/A', 'fakehost', None, 1,
		           now, now, now, None, json.dumps(conf), '{}', 0, 1))
		c.commit()
	PY
}
once neutron-db neutron_schema
once neutron-agent neutron_agent
start neutron neutron-server --config-file "$STATE/etc/neutron.conf" --config-file "$STATE/etc/ml2_conf.ini"

# Placement.
placement_db() {
	OS_PLACEMENT_CONFIG_DIR="$STATE/etc" placement-manage --config-file "$STATE/etc/placement.conf" db sync
	wal "$STATE/placement/placement.db"
}
once placement-db placement_db
start placement env OS_PLACEMENT_CONFIG_DIR="$STATE/etc" placement-api --host "$ADDR" --port 8778

# Glance.
glance_db() {
	glance-manage --config-file "$STATE/etc/glance-api.conf" db_sync
	wal "$STATE/glance/glance.db"
}
once glance-db glance_db
start glance glance-api --config-file "$STATE/etc/glance-api.conf"

# Nova, once RabbitMQ answers.
wait_for RabbitMQ 90 tcp_up 5672
N=(nova-manage --config-file "$STATE/etc/nova.conf")
nova_db() {
	"${N[@]}" api_db sync
	"${N[@]}" cell_v2 map_cell0 --database_connection "sqlite:///$STATE/nova/nova_cell0.db?timeout=60"
	"${N[@]}" db sync
	"${N[@]}" cell_v2 create_cell --name cell1
	for d in nova_api nova nova_cell0; do wal "$STATE/nova/$d.db"; done
}
once nova-db nova_db
for s in nova-conductor nova-scheduler nova-compute nova-api; do
	start "$s" "$s" --config-file "$STATE/etc/nova.conf"
done

wait_for Neutron 90 http_up "http://$ADDR:9696/"
wait_for Placement 60 http_up "http://$ADDR:8778/"
wait_for Glance 60 http_up "http://$ADDR:9292/"
wait_for "Nova API" 120 http_up "http://$ADDR:8774/"
compute_registered() { openstack compute service list --service nova-compute -f value -c State | grep -q up; }
wait_for "nova-compute" 120 compute_registered
once nova-discover "${N[@]}" cell_v2 discover_hosts --verbose
hypervisor_up() { openstack hypervisor list -f value | grep -q fakehost; }
wait_for "the fake hypervisor" 60 hypervisor_up

umask 077
cat >"$STATE/clouds.yaml" <<EOF
# Written by hack/openstack-up.sh: the admin of the local test cloud.
clouds:
  ferry-admin:
    auth:
      auth_url: http://$ADDR:5050/v3
      username: admin
      password: $PASSWORD
      project_name: admin
      user_domain_id: default
      project_domain_id: default
    region_name: RegionOne
    identity_api_version: 3
EOF
log "OpenStack is up; clouds.yaml (cloud ferry-admin): $STATE/clouds.yaml"
