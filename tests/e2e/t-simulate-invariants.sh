#!/usr/bin/env bash
# drover simulate on slices of real traces: every schedule it writes is checked by an independent
# checker (check_schedule.py: each job once, start >= submit, exact durations, GPU counts, no GPU,
# CPU or memory over-committed at any instant, GPU types, fractions), for each policy and time
# limit; the same run twice gives the same schedule; and the checker itself catches corruption.
# Needs no daemon. The traces are cut at run time, never copied into the repository.
set -uo pipefail

: "${DROVER:?DROVER must point at the drover binary}"
DROVER=$(readlink -f "$DROVER")
TESTDIR=${TESTDIR:-$(cd "$(dirname "$0")" && pwd)}
REPO=$(cd "$TESTDIR/../.." && pwd)
. "$TESTDIR/skip.sh"
TRACES=${DROVER_TRACES:-$REPO/../shared/traces}
ITP=$TRACES/itp-2021
ALI=$TRACES/alibaba-gpu-2023
if [ ! -f "$ITP/cluster02.csv" ] || [ ! -f "$ALI/openb_node_list_gpu_node.csv" ]; then
    skip "no traces at $TRACES (set DROVER_TRACES to the shared traces directory)"
fi
# The interpreter itself, not a version manager's shim (which can cost 0.3 s a call).
PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$PY" ] || PY=python3
CHECK=("$PY" "$TESTDIR/check_schedule.py")
TMP=$(mktemp -d "${TMPDIR:-/tmp}/drover-siminv.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export NO_COLOR=1

CHECKS=0
FAILED=0
ok() { CHECKS=$((CHECKS + 1)); echo "ok   $*"; }
bad() { CHECKS=$((CHECKS + 1)); FAILED=$((FAILED + 1)); echo "FAIL $*"; }

ROWS=1500
# ---- the slices -------------------------------------------------------------------------------
for c in 02 08; do head -n $((ROWS + 1)) "$ITP/cluster$c.csv" > "$TMP/itp$c.csv"; done
head -n $((ROWS + 1)) "$ALI/openb_pod_list_gpushare100.csv" > "$TMP/ali-share.csv"
head -n $((ROWS + 1)) "$ALI/openb_pod_list_default.csv" > "$TMP/ali-default.csv"
# A few nodes, so tasks wait: the first two 8-GPU nodes, two 2-GPU P100s, a 4-GPU T4 and a
# 4-GPU V100M16 (28 GPUs of four models).
awk -F, 'NR == 1 { print; next }
         $4 == 8 && n8 < 2 { print; n8++; next }
         $5 == "P100" && np < 2 { print; np++; next }
         $5 == "T4" && $4 == 4 && nt < 1 { print; nt++; next }
         $5 == "V100M16" && $4 == 4 && nv < 1 { print; nv++; next }' \
    "$ALI/openb_node_list_gpu_node.csv" > "$TMP/nodes.csv"
# The real tasks name no GPU type: give some of them one, to exercise placement by model.
awk -F, 'BEGIN { OFS = "," }
         NR > 1 && $4 > 0 { k = NR % 4
                            if (k == 0) $6 = "G3|V100M32"; else if (k == 1) $6 = "T4|P100"
                            else if (k == 2) $6 = "V100M16" }
         { print }' "$TMP/ali-default.csv" > "$TMP/ali-typed.csv"

[ "$(wc -l < "$TMP/nodes.csv")" -eq 7 ] || bad "the cut-down node list has $(($(wc -l < "$TMP/nodes.csv") - 1)) nodes, expected 6"

# json_field FILE PY_EXPR: a value from a --json output.
json_field() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# sim NAME EXPECT TRACE FORMAT MACHINE [OPTIONS...]: runs drover simulate with --schedule-out
# and --json, then checks the schedule. MACHINE is "--cluster NxG" or "--nodes FILE"; EXPECT is
# how many jobs must be skipped as unfit, or "json" to take drover's own count.
sim() {
    local name=$1 expect=$2 trace=$3 format=$4 machine=$5
    shift 5
    local out="$TMP/$name" whole=() rc=0 unfit
    # --whole-gpus, and the fifo policy (a shell loop: whole GPUs, see src/sim/sim.h), give a job
    # that asks for a fraction of a GPU whole GPUs.
    for o in "$@"; do case $o in --whole-gpus | fifo) whole=(--whole-gpus) ;; esac; done
    # shellcheck disable=SC2086  # MACHINE is two words
    "$DROVER" simulate --trace "$trace" --format "$format" $machine "$@" \
        --schedule-out "$out.csv" --json > "$out.json" 2> "$out.err" || rc=$?
    if [ "$rc" -ne 0 ]; then
        bad "$name: drover simulate exited $rc: $(head -c 300 "$out.err")"
        return
    fi
    unfit=$(json_field "$out.json" 'd["skipped"]["unfit"]') || { bad "$name: bad --json output"; return; }
    if [ "$expect" != json ] && [ "$unfit" != "$expect" ]; then
        bad "$name: drover skipped $unfit jobs as unfit, the slice has $expect too large"
        return
    fi
    local report
    # shellcheck disable=SC2086
    if report=$("${CHECK[@]}" --trace "$trace" --format "$format" $machine ${whole[@]+"${whole[@]}"} \
                 --schedule "$out.csv" --expect-skipped "$unfit" 2>&1); then
        ok "$name ($(printf '%s' "$report" | sed -n 's/^ok: [^:]*: //p'))"
    else
        bad "$name: the schedule breaks an invariant (drover simulate --trace $trace --format $format $machine $*):"
        printf '%s\n' "$report" | sed 's/^/       /'
    fi
}

# ---- ITP on 3 nodes of 8 GPUs: queues, and jobs of 9 to 24 GPUs span nodes --------------------
for c in 02 08; do
    too_big=$(awk -F, 'NR > 1 && $4 > 24 { n++ } END { print n + 0 }' "$TMP/itp$c.csv")
    for policy in fifo backfill drover; do
        for limits in none exact x2; do
            sim "itp$c-$policy-$limits" "$too_big" "$TMP/itp$c.csv" itp "--cluster 3x8" \
                --policy "$policy" --limits "$limits"
        done
    done
done
spans=$(awk -F, 'NR > 1 && $5 ~ /;/ { n++ } END { print n + 0 }' "$TMP/itp02-drover-none.csv")
if [ "$spans" -gt 0 ]; then ok "itp02: $spans jobs span nodes"; else bad "itp02: no job spans nodes: the slice tests too little"; fi

# ---- Alibaba on 6 nodes: GPU sharing by fraction, or whole GPUs; CPU and memory; GPU types ------
for t in share default; do
    for policy in fifo backfill drover; do
        sim "ali-$t-$policy-packed" json "$TMP/ali-$t.csv" alibaba2023 "--nodes $TMP/nodes.csv" \
            --policy "$policy" --limits exact
        sim "ali-$t-$policy-whole" json "$TMP/ali-$t.csv" alibaba2023 "--nodes $TMP/nodes.csv" \
            --policy "$policy" --limits exact --whole-gpus
    done
done
sim "ali-typed-drover" json "$TMP/ali-typed.csv" alibaba2023 "--nodes $TMP/nodes.csv" --policy drover
sim "ali-typed-backfill-whole" json "$TMP/ali-typed.csv" alibaba2023 "--nodes $TMP/nodes.csv" \
    --policy backfill --limits x2 --whole-gpus
shared=$(grep -c '@' "$TMP/ali-share-drover-packed.csv")
if [ "$shared" -gt 0 ]; then ok "ali-share: $shared jobs share GPUs by fraction"; else bad "ali-share: no job shares a GPU"; fi

# ---- las (preemption): one row per run segment --------------------------------------------------
# check_segments TRACE NODES GPUS COST_MS SCHEDULE JSON: ITP, whole GPUs. Each job that fits
# (<= NODES x GPUS GPUs) has rows in time order, none overlapping, the first at or after its
# submit; its segments' lengths sum to its duration plus COST_MS per preemption (rows - 1); each
# row holds its GPU count on one node, or whole nodes; no GPU is used by two rows at any instant
# (ends before starts at equal times); --json's preemption total is the rows beyond the first.
check_segments() {
    "$PY" - "$@" <<'PY'
import collections, json, sys
trace, nnodes, ngpus, cost, sched, js = sys.argv[1:7]
nnodes, ngpus, cost = int(nnodes), int(ngpus), int(cost)
ms = lambda s: round(float(s) * 1000)
jobs = {}
for line in open(trace).read().splitlines()[1:]:
    f = line.split(",")
    jobs[f[0]] = (ms(f[1]), ms(f[2]), int(f[3]))
rows = collections.OrderedDict()
for line in open(sched).read().splitlines()[1:]:
    f = line.split(",")
    rows.setdefault(f[0], []).append(f)
errs = []
events = []
extra = 0
for jid, (submit, dur, gpus) in jobs.items():
    if gpus > nnodes * ngpus:
        if jid in rows:
            errs.append("%s: too large, yet scheduled" % jid)
        continue
    segs = rows.pop(jid, None)
    if not segs:
        errs.append("%s: missing" % jid)
        continue
    extra += len(segs) - 1
    total, last = 0, submit
    for f in segs:
        start, end = ms(f[2]), ms(f[3])
        if ms(f[1]) != submit:
            errs.append("%s: submit %s" % (jid, f[1]))
        if start < last or end < start:
            errs.append("%s: segment %s-%s overlaps or is out of order" % (jid, f[2], f[3]))
        last = end
        total += end - start
        nodes = [int(n) for n in f[4].split(";")]
        idx = [int(g) for g in f[5].split(";")] if f[5] else []
        if len(nodes) > 1:
            if idx != list(range(ngpus)) or len(set(nodes)) != len(nodes) or len(nodes) * ngpus < gpus:
                errs.append("%s: bad span %s %s" % (jid, f[4], f[5]))
        elif len(idx) != gpus or len(set(idx)) != gpus:
            errs.append("%s: %d GPUs listed, wants %d" % (jid, len(idx), gpus))
        for n in nodes:
            if not 0 <= n < nnodes or any(not 0 <= g < ngpus for g in idx):
                errs.append("%s: no node %d or GPU %s" % (jid, n, f[5]))
            for g in idx:
                events.append((end, 0, (n, g), jid))
                events.append((start, 1, (n, g), jid))
    if total != dur + cost * (len(segs) - 1):
        errs.append("%s: ran %d ms in %d segments, wants %d + %d x %d" %
                    (jid, total, len(segs), dur, cost, len(segs) - 1))
for jid in rows:
    errs.append("%s: unknown job" % jid)
holder = {}
for t, kind, gpu, jid in sorted(events):
    if kind == 0:
        holder.pop(gpu, None)
    elif gpu in holder:
        errs.append("GPU %s: %s and %s at %d ms" % (gpu, holder[gpu], jid, t))
    else:
        holder[gpu] = jid
p = json.load(open(js)).get("preemptions", {}).get("total")
if p != extra:
    errs.append("--json says %s preemptions, the schedule has %d" % (p, extra))
for e in errs[:20]:
    print(e)
if errs:
    sys.exit(1)
print("%d jobs, %d preemptions" % (len(jobs), extra))
PY
}
for c in 02 08; do
    for cost in 0 60 300; do
        name="itp$c-las-cost$cost"
        arg=${cost}s; [ "$cost" = 0 ] && arg=0
        if ! "$DROVER" simulate --trace "$TMP/itp$c.csv" --format itp --cluster 3x8 --policy las \
                --preempt-cost "$arg" --schedule-out "$TMP/$name.csv" --json > "$TMP/$name.json" 2> "$TMP/$name.err"; then
            bad "$name: drover simulate failed: $(head -c 300 "$TMP/$name.err")"
            continue
        fi
        if report=$(check_segments "$TMP/itp$c.csv" 3 8 $((cost * 1000)) "$TMP/$name.csv" "$TMP/$name.json" 2>&1); then
            ok "$name ($report)"
        else
            bad "$name: the schedule breaks an invariant:"
            printf '%s\n' "$report" | sed 's/^/       /'
        fi
    done
done
pre=$(json_field "$TMP/itp02-las-cost60.json" 'd["preemptions"]["total"]')
if [ "$pre" -gt 0 ]; then ok "itp02 las: $pre preemptions"; else bad "itp02 las: no preemption: the slice tests too little"; fi
# The checker catches an over-commit and a lost segment.
"$PY" - "$TMP/itp02-las-cost60.csv" "$TMP/bad-las-share.csv" "$TMP/bad-las-drop.csv" <<'PY'
import collections, sys
lines = open(sys.argv[1]).read().splitlines()
head, rows = lines[0], [l.split(",") for l in lines[1:]]
count = collections.Counter(r[0] for r in rows)
i = next(k for k, r in enumerate(rows) if count[r[0]] > 1)
drop = rows[:i] + rows[i + 1:]
open(sys.argv[3], "w").write("\n".join([head] + [",".join(r) for r in drop]) + "\n")
single = [r for r in rows if r[5].isdigit() and float(r[3]) > float(r[2])]
for a in single:
    b = next((b for b in single if (b[4], b[5]) != (a[4], a[5]) and float(a[2]) < float(b[3]) and float(b[2]) < float(a[3])), None)
    if b:
        b[4], b[5] = a[4], a[5]
        break
open(sys.argv[2], "w").write("\n".join([head] + [",".join(r) for r in rows]) + "\n")
PY
for mode in share drop; do
    if check_segments "$TMP/itp02.csv" 3 8 60000 "$TMP/bad-las-$mode.csv" "$TMP/itp02-las-cost60.json" > "$TMP/bad-las-$mode.out" 2>&1; then
        bad "negative las $mode: the segment checker passed a corrupt schedule"
    else
        ok "negative las $mode: the segment checker catches it ($(head -1 "$TMP/bad-las-$mode.out"))"
    fi
done

# ---- determinism: the same run twice, the same schedule and results ---------------------------
strip_timing() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("scheduler",None); print(json.dumps(d,sort_keys=True))' "$1"; }
same() {
    local name=$1 a=$2 b=$3
    shift 3
    for run in "$a" "$b"; do
        "$DROVER" simulate "$@" --schedule-out "$TMP/$run.csv" --json > "$TMP/$run.json" 2>/dev/null ||
            { bad "$name: drover simulate failed"; return; }
    done
    if ! cmp -s "$TMP/$a.csv" "$TMP/$b.csv"; then
        bad "$name: two runs wrote different schedules"
    elif [ "$(strip_timing "$TMP/$a.json")" != "$(strip_timing "$TMP/$b.json")" ]; then
        bad "$name: two runs printed different results"
    else
        ok "$name: two runs, identical schedule and results"
    fi
}
same "determinism itp08 drover x2" det-itp-1 det-itp-2 --trace "$TMP/itp08.csv" --format itp \
    --cluster 3x8 --policy drover --limits x2
same "determinism alibaba share backfill" det-ali-1 det-ali-2 --trace "$TMP/ali-share.csv" \
    --format alibaba2023 --nodes "$TMP/nodes.csv" --policy backfill --limits exact

# ---- the checker catches what it should --------------------------------------------------------
# corrupt MODE IN OUT: prints the job(s) it broke. early: one queued job starts 100 s before its
# submit (end moved too, keeping the duration); share: a single-GPU job moved onto the GPU of
# another whole job running at the same time; drop: one job removed.
corrupt() {
    "$PY" - "$@" <<'PY'
import sys
mode, src, dst = sys.argv[1:4]
lines = open(src).read().splitlines()
head, rows = lines[0], [l.split(",") for l in lines[1:]]
ms = lambda s: round(float(s) * 1000)
sec = lambda v: "%d" % (v // 1000) if v % 1000 == 0 else ("%.3f" % (v / 1000)).rstrip("0")
single = lambda r: r[5].isdigit()   # exactly one whole GPU
if mode == "early":
    i = next(k for k in range(len(rows) // 2, len(rows)) if ms(rows[k][2]) > ms(rows[k][1]) + 1000)
    r = rows[i]
    shift = ms(r[2]) - ms(r[1]) + 100000
    r[2], r[3] = sec(ms(r[2]) - shift), sec(ms(r[3]) - shift)
    print(r[0])
elif mode == "share":
    cand = [r for r in rows if single(r) and ms(r[3]) > ms(r[2])]
    done = False
    for x in range(len(cand)):
        a = cand[x]
        for b in cand[x + 1:x + 200]:
            if (a[4], a[5]) != (b[4], b[5]) and ms(a[2]) < ms(b[3]) and ms(b[2]) < ms(a[3]):
                b[4], b[5] = a[4], a[5]
                print(a[0], b[0])
                done = True
                break
        if done:
            break
    assert done, "no two overlapping single-GPU jobs"
elif mode == "drop":
    print(rows.pop(len(rows) // 3)[0])
open(dst, "w").write("\n".join([head] + [",".join(r) for r in rows]) + "\n")
PY
}
negative() {
    local mode=$1 want=$2 src=$3
    shift 3
    local ids rc=0 report
    ids=$(corrupt "$mode" "$src" "$TMP/bad-$mode.csv") || { bad "negative $mode: could not corrupt $src"; return; }
    report=$("${CHECK[@]}" "$@" --schedule "$TMP/bad-$mode.csv" 2>&1) || rc=$?
    if [ "$rc" -ne 1 ]; then
        bad "negative $mode: the checker exited $rc on a corrupt schedule (job $ids): $report"
        return
    fi
    for id in $ids; do
        printf '%s\n' "$report" | grep -F -- "$id" | grep -q -- "$want" ||
            { bad "negative $mode: the checker did not name job $id with '$want': $report"; return; }
    done
    ok "negative $mode: the checker exits 1 and names job(s) $ids"
}
too_big=$(awk -F, 'NR > 1 && $4 > 24 { n++ } END { print n + 0 }' "$TMP/itp02.csv")
itp_args=(--trace "$TMP/itp02.csv" --format itp --cluster 3x8 --expect-skipped "$too_big")
negative early "before its submit" "$TMP/itp02-backfill-none.csv" "${itp_args[@]}"
negative share "whole at" "$TMP/itp02-fifo-exact.csv" "${itp_args[@]}"
negative drop "missing" "$TMP/itp02-drover-none.csv" "${itp_args[@]}"

echo "$CHECKS checks, $FAILED failed"
[ "$FAILED" -eq 0 ]
