#!/usr/bin/env bash
# A real single-host Slurm 22.05 cluster with accounting, for nasctl's tests.
#
#   scripts/slurm-local.sh up      install (apt) if needed, configure, start; idempotent
#   scripts/slurm-local.sh status  exit 0 when the cluster answers sinfo and sacct
#   scripts/slurm-local.sh ready   status, then resume nodes Slurm drained or set down on its
#                                  own (a step that could not report its end while slurmctld
#                                  was away: "Kill task failed") and wait until both are usable
#   scripts/slurm-local.sh down    stop the daemons this script started (by their pid files)
#   scripts/slurm-local.sh stop D.. stop some of them (munged slurmdbd slurmctld slurmd-node1
#                                  slurmd-node2), as a fault; `up` starts them again, also
#                                  beside jobs that kept running
#
# Layout: munged, slurmdbd (accounting in `slurm_acct_db` on the MariaDB already
# running at 127.0.0.1:3306, user `slurm`), slurmctld, and two slurmd daemons
# (node1 on port 17001, node2 on port 17002, both NodeAddr 127.0.0.1) so that
# jobs with several replicas can start. State, logs and pid files live under
# $NASCTL_SLURM_STATE (default /var/lib/nasctl-slurm). Needs root and Debian 12.
set -euo pipefail

STATE=${NASCTL_SLURM_STATE:-/var/lib/nasctl-slurm}
CLUSTER=nasctl
DB_HOST=127.0.0.1
DB_PORT=3306
CONF=/etc/slurm/slurm.conf
DBD_CONF=/etc/slurm/slurmdbd.conf
# every installed CPU: plain `nproc` follows OMP_NUM_THREADS, and a slurm.conf written
# under OMP_NUM_THREADS=1 beside slurmd daemons that registered more CPUs leaves the
# nodes INVAL and drained
CPUS=$(nproc --all)
DAEMONS="munged slurmdbd slurmctld slurmd-node1 slurmd-node2"

log() { echo "slurm-local: $*" >&2; }
die() { log "$*"; exit 1; }

running() {  # running NAME: its pid file names a live process
  local pidfile="$STATE/run/$1.pid"
  [[ -s $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local secs=$1 what=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || die "$what did not come up within ${secs}s (see $STATE/log/)"
    sleep 0.5
  done
}

install() {
  if command -v slurmctld >/dev/null && command -v slurmdbd >/dev/null && command -v munged >/dev/null \
     && command -v mysql >/dev/null; then
    return
  fi
  log "installing slurm-wlm slurmdbd munge (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq slurm-wlm slurmdbd munge mariadb-client >/dev/null
}

configure() {
  mkdir -p "$STATE"/{run,log,spool/ctld,spool/node1,spool/node2} /etc/slurm
  grep -qE '^127\.0\.0\.1[[:space:]].*\bnode1\b' /etc/hosts || echo "127.0.0.1 node1 node2" >>/etc/hosts
  if [[ ! -s /etc/munge/munge.key ]]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /run/munge /var/lib/munge /var/log/munge

  # written to a temporary file and moved in only when it differs: a partial restart
  # (one daemon stopped as a fault) must not change what the running daemons read
  cat >"$CONF.new" <<CONF
# written by nasctl scripts/slurm-local.sh
ClusterName=$CLUSTER
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=17001
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=500
KillWait=5
MinJobAge=300
InactiveLimit=0
Waittime=0
SlurmctldTimeout=30
SlurmdTimeout=60
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=16819
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=node1 NodeAddr=127.0.0.1 NodeHostname=$(hostname) Port=17001 CPUs=$CPUS RealMemory=8000 State=UNKNOWN
NodeName=node2 NodeAddr=127.0.0.1 NodeHostname=$(hostname) Port=17002 CPUs=$CPUS RealMemory=8000 State=UNKNOWN
PartitionName=debug Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP
CONF
  if cmp -s "$CONF.new" "$CONF"; then rm -f "$CONF.new"; else mv "$CONF.new" "$CONF"; fi

  cat >"$DBD_CONF" <<CONF
# written by nasctl scripts/slurm-local.sh
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=16819
SlurmUser=root
PidFile=$STATE/run/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=$DB_HOST
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
CONF
  chmod 600 "$DBD_CONF"

  mysql -uroot -h"$DB_HOST" -P"$DB_PORT" <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
CREATE USER IF NOT EXISTS 'slurm'@'%' IDENTIFIED BY 'slurm';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'%';
SQL
}

nodes_ready() {  # both nodes usable; a node that answers but is drained or down is resumed
  local n st usable=0
  while read -r n st; do
    case $st in
      idle|mixed|allocated|completing) usable=$((usable + 1)) ;;
      drained|draining|down|inval|fail|failing) scontrol update NodeName="$n" State=RESUME >/dev/null 2>&1 || true ;;
    esac
  done < <(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u)
  [[ $usable -eq 2 ]]
}

healthy() {
  for d in $DAEMONS; do running "$d" || return 1; done
  [[ $(sinfo -h -o '%T' 2>/dev/null | grep -cE '^(idle|mixed|allocated|completing)') -ge 1 ]] || return 1
  sacct -n -X -S now >/dev/null 2>&1
}

up() {
  [[ $(id -u) -eq 0 ]] || die "run as root (it installs packages and starts the Slurm daemons)"
  (exec 3<>/dev/tcp/$DB_HOST/$DB_PORT) 2>/dev/null || die "MariaDB is not reachable at $DB_HOST:$DB_PORT; start it first"
  if healthy; then log "already up"; return; fi
  local t0=$SECONDS
  install
  configure
  if ! running munged; then
    # munged drops no privileges itself: run it as its own user, pid file in its own run dir
    rm -f /run/munge/munged.pid
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
    wait_for 10 munged test -s /run/munge/munged.pid
    cp /run/munge/munged.pid "$STATE/run/munged.pid"
  fi
  wait_for 10 munged munge -n
  if ! running slurmdbd; then
    slurmdbd
    wait_for 30 slurmdbd sacctmgr -n list cluster
  fi
  sacctmgr -n list cluster format=cluster | grep -qw "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
  running slurmctld || slurmctld
  wait_for 30 slurmctld scontrol ping
  running slurmd-node1 || slurmd -N node1
  running slurmd-node2 || slurmd -N node2
  wait_for 90 "the two slurmd nodes" nodes_ready
  wait_for 30 "accounting (sacct)" sacct -n -X -S now
  log "up in $((SECONDS - t0))s: $(sinfo -h -N -o '%N:%T' | tr '\n' ' ')"
}

stop() {  # stop DAEMON...: by pid file, SIGTERM then SIGKILL after 10 s
  local d pid
  for d in "$@"; do
    case " $DAEMONS " in *" $d "*) ;; *) die "unknown daemon $d (one of: $DAEMONS)" ;; esac
    if running "$d"; then
      pid=$(cat "$STATE/run/$d.pid")
      kill "$pid"
      for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
      log "stopped $d ($pid)"
    fi
    rm -f "$STATE/run/$d.pid"
  done
}

down() {
  stop slurmd-node2 slurmd-node1 slurmctld slurmdbd munged
}

status() {
  if healthy; then
    sinfo -N -o '%N %T %c %m'
    exit 0
  fi
  log "not running (start it with scripts/slurm-local.sh up)"
  exit 1
}

ready() {
  healthy || die "not running (start it with scripts/slurm-local.sh up)"
  wait_for 60 "the two slurmd nodes" nodes_ready
  sinfo -N -o '%N %T %c %m'
}

case ${1:-} in
  up) up ;;
  ready) ready ;;
  down) down ;;
  stop) shift; stop "$@" ;;
  status) status ;;
  *) echo "usage: $0 up|down|status|ready|stop DAEMON..." >&2; exit 2 ;;
esac
