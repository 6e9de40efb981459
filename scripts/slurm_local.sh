#!/usr/bin/env bash
# A single-node SLURM on this machine, for trying the `slurm` preset and for the tests marked `slurm`.
#
#   scripts/slurm_local.sh up [--no-accounting]   # install if absent, configure, start; idempotent
#   scripts/slurm_local.sh status                  # the daemons and the node; exit 0 when jobs can run
#   scripts/slurm_local.sh down                    # stop the daemons (packages and config stay)
#
# Debian/Ubuntu, as root (apt-get installs slurm-wlm, munge and, for accounting, mariadb-server and
# slurmdbd). The node gets this host's cores and memory (`slurmd -C`). Process tracking is
# proctrack/linuxproc and TaskPlugin=task/none, so no cgroup set-up or systemd is needed (containers,
# CI machines). Accounting (slurmdbd on a local MariaDB) is on by default, as on real clusters: with
# it, `sacct` shows finished, cancelled and requeued jobs to submitit. --no-accounting (or
# SLURM_LOCAL_ACCOUNTING=0) brings up a cluster without it, to try the harness's own fallback.
set -euo pipefail

CLUSTER=posenc
CONF_DIR=/etc/slurm
STATE=/var/lib/posenc-slurm          # spool, state, logs
HOST=$(hostname -s)
ACCOUNTING=${SLURM_LOCAL_ACCOUNTING:-1}

say() { echo "slurm_local: $*" >&2; }
die() { say "error: $*"; exit 1; }

# Daemons are found and stopped by their pid files, never by name.
pidfile() {
    case $1 in
        munged) echo /run/munge/munged.pid ;;
        mariadbd) echo /run/mysqld/mariadb.pid ;;
        *) echo "$STATE/$1.pid" ;;
    esac
}
running() {
    local f pid
    f=$(pidfile "$1")
    [[ -s $f ]] && pid=$(cat "$f") && [[ -d /proc/$pid ]] && grep -q "$1" "/proc/$pid/comm" 2>/dev/null
}
stop() {  # SIGTERM to the daemon $1, then wait up to 10 s for it to go
    running "$1" || return 0
    kill "$(cat "$(pidfile "$1")")" 2>/dev/null || true
    for _ in $(seq 100); do running "$1" || return 0; sleep 0.1; done
    say "warning: $1 did not stop within 10 s"
}

install_packages() {
    local want=(slurm-wlm munge)
    [[ $ACCOUNTING == 1 ]] && want+=(slurmdbd mariadb-server)
    local missing=()
    for pkg in "${want[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [[ ${#missing[@]} == 0 ]] && return
    command -v apt-get >/dev/null || die "no apt-get: install ${missing[*]} with your distribution's tools"
    say "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # policy-rc.d: the packages' own start scripts must not start daemons with their stock configs.
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    rm -f /usr/sbin/policy-rc.d
}

start_munge() {
    if [[ ! -s /etc/munge/munge.key ]]; then
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    fi
    chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    running munged || runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 50); do munge -n </dev/null | unmunge >/dev/null 2>&1 && return; sleep 0.1; done
    die "munged does not answer (see /var/log/munge/munged.log)"
}

# The node line from slurmd's own view of the hardware (CPUs, sockets, cores, threads, memory).
node_line() {
    slurmd -C | head -1 | sed -e "s/^NodeName=[^ ]*/NodeName=$HOST NodeAddr=127.0.0.1/"
}

write_config() {
    local accounting_lines
    if [[ $ACCOUNTING == 1 ]]; then
        accounting_lines="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30"
    else
        accounting_lines="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none"
    fi
    install -d -m 0755 "$CONF_DIR" "$STATE" "$STATE/ctld" "$STATE/d"
    local new
    new=$(cat <<EOF
# Written by posenc's scripts/slurm_local.sh: a single-node cluster on this machine.
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
# No cgroups: works in containers and on CI machines without systemd.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
# As on most clusters: SIGTERM at the time limit, SIGKILL KillWait seconds later.
KillWait=30
# Finished jobs stay visible to squeue/scontrol for this long (what a cluster without accounting has).
MinJobAge=300
JobRequeue=1
MpiDefault=none
$accounting_lines
$(node_line)
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
)
    printf '%s\n' "$new" >"$CONF_DIR/slurm.conf"
}

# Whether the running daemons were started with the configuration now on disk.
config_current() { cmp -s "$CONF_DIR/slurm.conf" "$STATE/slurm.conf.started"; }

start_accounting() {
    if ! running mariadbd && ! running mysqld; then
        install -d -o mysql -g mysql /run/mysqld
        [[ -d /var/lib/mysql/mysql ]] || mariadb-install-db --user=mysql >/dev/null
        (setsid mariadbd --user=mysql --bind-address=127.0.0.1 --pid-file=/run/mysqld/mariadb.pid \
            >"$STATE/mariadb.log" 2>&1 &)
        for _ in $(seq 100); do mariadb -e 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done
    fi
    mariadb -e 'select 1' >/dev/null 2>&1 || die "MariaDB does not answer (see $STATE/mariadb.log)"
    mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
                CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
                GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
    cat >"$CONF_DIR/slurmdbd.conf" <<EOF
# Written by posenc's scripts/slurm_local.sh.
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
    chmod 0600 "$CONF_DIR/slurmdbd.conf"
    running slurmdbd || slurmdbd
    for _ in $(seq 100); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.2; done
    sacctmgr -n list cluster >/dev/null 2>&1 || die "slurmdbd does not answer (see $STATE/slurmdbd.log)"
    sacctmgr -n list cluster format=cluster -P | grep -qx "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
}

node_ready() { sinfo -h -n "$HOST" -o '%t' 2>/dev/null | grep -Eq '^(idle|mix|alloc|comp)'; }

up() {
    [[ $(id -u) == 0 ]] || die "run as root (it installs packages and starts system daemons)"
    local started=$SECONDS
    install_packages
    start_munge
    write_config
    if [[ $ACCOUNTING == 1 ]]; then
        start_accounting
    else
        stop slurmdbd
    fi
    if { running slurmctld || running slurmd; } && ! config_current; then
        say "configuration changed: restarting slurmctld and slurmd"
        stop_slurm
    fi
    if ! running slurmctld; then
        slurmctld
        cp "$CONF_DIR/slurm.conf" "$STATE/slurm.conf.started"
    fi
    for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done
    running slurmd || slurmd
    for _ in $(seq 150); do node_ready && break; sleep 0.2; done
    if ! node_ready; then  # e.g. left down by an earlier run: bring it back
        scontrol update nodename="$HOST" state=resume 2>/dev/null || true
        for _ in $(seq 50); do node_ready && break; sleep 0.2; done
    fi
    node_ready || die "node $HOST is not up: $(sinfo -h -n "$HOST" -o '%t %E'); see $STATE/slurmd.log"
    say "up in $((SECONDS - started)) s: $(sinfo -h -o '%P %D node(s) %c CPUs %m MB %t') (accounting: $(
        [[ $ACCOUNTING == 1 ]] && echo on || echo off))"
}

stop_slurm() {
    stop slurmd
    stop slurmctld
}

down() {
    stop_slurm
    stop slurmdbd
    stop mariadbd
    stop munged
    say "down"
}

status() {
    local d ok=0
    for d in munged slurmdbd slurmctld slurmd; do
        if running "$d"; then echo "$d: running"; else echo "$d: not running"; fi
    done
    if command -v sinfo >/dev/null && sinfo -h >/dev/null 2>&1; then
        sinfo -o '%P %a %D %t %c %m'
        node_ready || ok=1
    else
        echo "no SLURM controller answers"; ok=1
    fi
    if command -v sacct >/dev/null && sacct -n -X -S now >/dev/null 2>&1; then echo "accounting: on"
    else echo "accounting: off"; fi
    return $ok
}

case "${1:-}" in
    up) [[ ${2:-} == --no-accounting ]] && ACCOUNTING=0; up ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 up [--no-accounting] | down | status" >&2; exit 2 ;;
esac
