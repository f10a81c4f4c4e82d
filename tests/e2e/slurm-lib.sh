# The tests against a real Slurm (t-slurm*.sh, and bench/'s Slurm runs): a single-node Slurm 22.05
# cluster with fake GPUs, started by hand (no systemd), its state under $TMP/slurm. Source it after
# lib.sh, then call slurm_up before the first drover command (which starts the daemon).
#
# A machine runs one cluster (/etc/slurm/slurm.conf, the ports 6817/6818), so a test holds an
# exclusive lock on /tmp/drover-slurm.lock from slurm_up to its end: ctest's RESOURCE_LOCK covers
# tests run by ctest, the lock covers everything else (two people, or a benchmark, at once). The
# lock is held by a small process of its own, not by a descriptor of the test's shell, so that no
# daemon started here (munged lingers, the drover daemon may) inherits the lock and keeps it.
#
# Needs root and the Debian packages slurm-wlm and munge; without them the test is skipped.
# Facts about Slurm 22.05 this relies on: ../shared/testbeds/README.md ("slurm/").

SLURM_LOCK=/tmp/drover-slurm.lock
# The state directory of the last cluster started here: a test killed with -9 never ran its
# teardown, and the pid files there name the daemons it left behind.
SLURM_LAST=/tmp/drover-slurm.last

# slurm_up [GPUS] [CPUS]: starts the cluster: one node with GPUS fake GPUs (default 4, at most 8)
# and CPUS CPUs (default 8; may exceed the machine's, config_overrides), and waits until the node
# is idle. Exports SLURM_TMP (its state) and SHARED ($TMP/shared, the shared-dir), and appends
# `shared-dir` and `slurm-poll = 500ms` to $DROVER_HOME/drover.conf. Chains its teardown
# (slurm_down) before the EXIT trap already set (lib.sh's cleanup, or a test's own).
slurm_up() {
    local gpus=${1:-4} cpus=${2:-8} cmd i prev
    [ "$(id -u)" = 0 ] || skip "needs root (runs slurmctld and slurmd)"
    for cmd in slurmctld slurmd munged munge sbatch squeue scontrol scancel sinfo; do
        command -v "$cmd" >/dev/null || skip "no $cmd (apt-get install slurm-wlm munge)"
    done
    [ "$gpus" -ge 1 ] && [ "$gpus" -le 8 ] || fail "slurm_up: GPUS must be 1 to 8, not $gpus"
    export SLURM_TMP=$TMP/slurm SHARED=$TMP/shared
    prev=$(trap -p EXIT)
    prev=${prev#trap -- }
    eval "SLURM_PREV_TRAP=${prev% EXIT}"
    trap slurm_exit EXIT
    slurm_lock
    slurm_stop_leftovers
    if slurm_port_open 6817 || slurm_port_open 6818; then
        fail "a Slurm daemon this fixture did not start listens on 6817/6818: stop it (e.g. ../shared/testbeds/slurm/down.sh)"
    fi
    echo "$SLURM_TMP" > "$SLURM_LAST"
    mkdir -p "$SLURM_TMP/state" "$SLURM_TMP/spool" "$SHARED" /etc/slurm /run/munge "$DROVER_HOME"
    # gres.conf's File= must name character devices: with plain files a job gets an empty
    # CUDA_VISIBLE_DEVICES.
    for ((i = 0; i < gpus; i++)); do mknod "$SLURM_TMP/nvidia$i" c 195 "$i"; done
    slurm_munge_up
    slurm_write_conf "$gpus" "$cpus"
    slurmctld -c </dev/null >/dev/null 2>&1 || fail "slurmctld did not start: $(tail -5 "$SLURM_TMP/slurmctld.log" 2>&1)"
    slurmd </dev/null >/dev/null 2>&1 || fail "slurmd did not start: $(tail -5 "$SLURM_TMP/slurmd.log" 2>&1)"
    wait_until 30 slurm_node_ready
    printf 'shared-dir = %s\nslurm-poll = 500ms\n' "$SHARED" >> "$DROVER_HOME/drover.conf"
}

# slurm_lock: takes the exclusive lock on $SLURM_LOCK, waiting up to 30 minutes for whoever holds
# it (a benchmark may: bench/slurm.sh); under ctest, the test's TIMEOUT comes first. A python
# process holds it until slurm_unlock, or until this shell is gone.
slurm_lock() {
    local ready=$TMP/slurm-lock.ready deadline=$((SECONDS + 1800)) said=
    python3 -c '
import fcntl, os, sys, time
lock, ready, owner = sys.argv[1], sys.argv[2], int(sys.argv[3])
f = open(lock, "a")
fcntl.flock(f, fcntl.LOCK_EX)
open(ready, "w").write("locked\n")
def alive(pid):
    try:
        return open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
while alive(owner):
    time.sleep(0.5)
' "$SLURM_LOCK" "$ready" "$$" </dev/null >/dev/null 2>&1 &
    SLURM_LOCK_PID=$!
    until [ -s "$ready" ]; do
        proc_gone "$SLURM_LOCK_PID" && fail "could not lock $SLURM_LOCK"
        [ "$SECONDS" -lt "$deadline" ] || fail "$SLURM_LOCK still held by another Slurm test after 1800s"
        if [ -z "$said" ] && [ "$SECONDS" -ge $((deadline - 1795)) ]; then
            echo "slurm-lib: waiting for $SLURM_LOCK (another Slurm test or benchmark holds it)" >&2
            said=1
        fi
        sleep 0.1
    done
}

slurm_unlock() {
    [ -n "${SLURM_LOCK_PID:-}" ] || return 0
    kill "$SLURM_LOCK_PID" 2>/dev/null || true
    wait "$SLURM_LOCK_PID" 2>/dev/null || true
    SLURM_LOCK_PID=
}

# The EXIT trap: the cluster goes first, then the trap slurm_up found, with the test's status.
# errexit is off here: with it on, `(exit 1)` would end the trap before the rest of it ran.
slurm_exit() {
    local rc=$?
    set +e
    slurm_down
    slurm_unlock
    (exit "$rc")
    eval "${SLURM_PREV_TRAP:-exit $rc}"
}

slurm_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# slurm_pid NAME [DIR]: the pid of the daemon NAME (slurmctld, slurmd) of the cluster whose state
# is in DIR (default $SLURM_TMP), if it still runs.
slurm_pid() {
    local pid
    pid=$(cat "${2:-$SLURM_TMP}/$1.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && ! proc_gone "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] &&
        echo "$pid"
}

# slurm_kill PID…: SIGTERM, then waits (up to 30 s; SIGKILL after 20 s) until each is gone or a
# zombie (PID 1 may never reap them).
slurm_kill() {
    local pid i left
    [ $# -gt 0 ] || return 0
    kill "$@" 2>/dev/null || true
    for ((i = 0; i < 600; i++)); do
        left=
        for pid in "$@"; do proc_gone "$pid" || left=1; done
        [ -z "$left" ] && return 0
        [ "$i" = 400 ] && kill -9 "$@" 2>/dev/null
        sleep 0.05
    done
    echo "slurm-lib: $* still running" >&2
}

# Daemons a test killed with -9 left running: its jobs are cancelled, they are stopped.
slurm_stop_leftovers() {
    local dir pids=() pid
    dir=$(cat "$SLURM_LAST" 2>/dev/null) || return 0
    pid=$(slurm_pid slurmctld "$dir") && {
        timeout 20 scancel --user=root 2>/dev/null || true
        pids+=("$pid")
    }
    pid=$(slurm_pid slurmd "$dir") && pids+=("$pid")
    slurm_kill "${pids[@]}"
    rm -f "$SLURM_LAST"
}

slurm_munge_up() {
    [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key /run/munge
    chmod 400 /etc/munge/munge.key
    # munged is shared by every cluster of this machine and harmless: it stays when a test ends.
    munge -n >/dev/null 2>&1 || su -s /bin/sh munge -c munged </dev/null >/dev/null 2>&1 ||
        fail "munged did not start"
    wait_until 10 slurm_munge_works
}
slurm_munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

slurm_write_conf() {
    local gpus=$1 cpus=$2 node mem
    node=$(hostname -s)
    mem=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
    # MinJobAge: finished jobs stay visible to squeue/scontrol for 5 minutes (the tests read their
    # end states). KillWait=5 and OverTimeLimit=0: a job past its limit is killed soon after.
    # sched_interval=1: a job starts about a second after sbatch.
    cat > /etc/slurm/slurm.conf <<CONF
# Written by drover's tests/e2e/slurm-lib.sh for one test; state in $SLURM_TMP.
ClusterName=drovertest
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
StateSaveLocation=$SLURM_TMP/state
SlurmdSpoolDir=$SLURM_TMP/spool
SlurmctldPidFile=$SLURM_TMP/slurmctld.pid
SlurmdPidFile=$SLURM_TMP/slurmd.pid
SlurmctldLogFile=$SLURM_TMP/slurmctld.log
SlurmdLogFile=$SLURM_TMP/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
MessageTimeout=10
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$SLURM_TMP/jobcomp.txt
MinJobAge=300
OverTimeLimit=0
KillWait=5
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:$gpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    cat > /etc/slurm/gres.conf <<CONF
AutoDetect=off
Name=gpu File=$SLURM_TMP/nvidia[0-$((gpus - 1))]
CONF
}

# The controller answers and the node is up and responding (no '*': not responding; no drain).
slurm_node_ready() {
    local state
    state=$(sinfo -h -N -o '%T' 2>/dev/null) || return 1
    [[ $state =~ ^(idle|mixed|allocated)$ ]]
}

# slurm_down: cancels every job, then stops slurmd and slurmctld (munged stays). A controller the
# test left stopped is started first, so that the jobs can be cancelled rather than orphaned.
slurm_down() {
    local pids=() pid
    [ -n "${SLURM_TMP:-}" ] && [ -d "$SLURM_TMP" ] || return 0
    if ! slurm_pid slurmctld >/dev/null && slurm_pid slurmd >/dev/null; then
        slurmctld </dev/null >/dev/null 2>&1 || true
        for _ in $(seq 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.1; done
    fi
    if slurm_pid slurmctld >/dev/null; then
        timeout 20 scancel --user=root 2>/dev/null || true
        for _ in $(seq 300); do   # KillWait=5: a job that ignores SIGTERM is gone after ≈5 s
            slurm_no_active_jobs && break
            sleep 0.1
        done
    fi
    pid=$(slurm_pid slurmd) && pids+=("$pid")
    pid=$(slurm_pid slurmctld) && pids+=("$pid")
    slurm_kill "${pids[@]}"
    rm -f "$SLURM_LAST"
}

# slurm_ctld_stop: stops the controller (slurmd and its running jobs go on); slurm_ctld_start
# starts it again from its saved state (no -c: the jobs it knew survive) and waits until it
# answers and the node responds.
slurm_ctld_stop() {
    local pid
    pid=$(slurm_pid slurmctld) || fail "slurm_ctld_stop: slurmctld does not run"
    slurm_kill "$pid"
}

slurm_ctld_start() {
    slurm_pid slurmctld >/dev/null && fail "slurm_ctld_start: slurmctld runs already"
    slurmctld </dev/null >/dev/null 2>&1 || fail "slurmctld did not start: $(tail -5 "$SLURM_TMP/slurmctld.log")"
    wait_until 60 slurm_node_ready
}

# slurm_jobs: one line per job Slurm knows, finished ones too: ID|STATE|NAME.
slurm_jobs() { squeue -h --states=all -o '%i|%T|%j'; }

# slurm_active_jobs: the ids of the jobs pending, running or completing; fails if squeue does.
slurm_active_jobs() { squeue -h --states=PENDING,RUNNING,COMPLETING,CONFIGURING -o '%i' 2>/dev/null; }
slurm_no_active_jobs() {
    local jobs
    jobs=$(slurm_active_jobs) && [ -z "$jobs" ]
}

# slurm_wait_idle [TIMEOUT_S]: waits (default 60 s) until no job is pending, running or completing.
slurm_wait_idle() { wait_until "${1:-60}" slurm_no_active_jobs; }

# slurm_job_state JOBID: the job's state as scontrol shows it (COMPLETED, CANCELLED, …).
slurm_job_state() { scontrol show job "$1" 2>/dev/null | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2; }

# --- drover's side -------------------------------------------------------------------------------
# task_ends ID WANT [TIMEOUT_S]: waits (default 90 s) until drover's task ID has ended, then fails
# the test, showing the task, unless it ended WANT (succeeded, failed, timed_out, …).
task_ended() {
    case $(state_of "$1") in succeeded | failed | timed_out | cancelled | upstream_failed) ;; *) return 1 ;; esac
}
task_ends() {
    local got
    wait_until "${3:-90}" task_ended "$1"
    got=$(state_of "$1")
    [ "$got" = "$2" ] || fail "task $1 ended $got, expected $2: $("$DROVER" show "$1" 2>&1)"
}

# slurm_job_of ID: the Slurm job id drover shows for task ID's latest attempt ("null" if none).
slurm_job_of() { field_of "$1" '["slurm_job"]'; }
