#!/usr/bin/env bash
# make demo: a daemon in a temporary state directory runs a small pipeline
#   prepare -> 4 trainings that share GPUs by memory -> evaluate
# on a fake 2 x 16G GPU inventory (or the real GPUs when nvidia-smi sees some).
set -euo pipefail
DROVER=$(readlink -f "${1:-build/drover}")
export DROVER_HOME=$(mktemp -d /tmp/drover-demo.XXXXXX)
export NO_COLOR=${NO_COLOR:-}
if ! nvidia-smi -L >/dev/null 2>&1; then
    export DROVER_FAKE_GPUS=2x16G
    echo "No GPU here: using a fake inventory of 2 x 16G GPUs (DROVER_FAKE_GPUS=2x16G)."
fi
echo "State directory: $DROVER_HOME"
echo

work=$DROVER_HOME/work
mkdir -p "$work"
cd "$work"

prep=$("$DROVER" submit --name prepare -- sh -c \
    'echo "preparing data"; sleep 1; seq 1 1000 > data.txt; echo "wrote $(wc -l < data.txt) rows"')
trains=()
for lr in 0.1 0.03 0.01 0.003; do
    trains+=("$("$DROVER" submit --name "train-lr$lr" --gpus 1 --gpu-mem 6G --after "$prep" \
        --retries 1 --backoff 1 -- sh -c '
        # A stand-in for a training script: checkpoints each epoch, resumes from it.
        ckpt=$DROVER_CHECKPOINT_DIR/epoch; start=$(cat "$ckpt" 2>/dev/null || echo 0)
        for e in $(seq $((start + 1)) 4); do
            sleep 0.5
            echo "epoch $e lr='"$lr"' gpu=$CUDA_VISIBLE_DEVICES loss=$(awk -v e=$e "BEGIN{printf \"%.3f\", 1/(e+'"$lr"'*10)}")"
            echo "$e" > "$ckpt"
        done')")
done
deps=$(IFS=,; echo "${trains[*]}")
eval_id=$("$DROVER" submit --name evaluate --after "$deps" -- sh -c \
    'echo "evaluating 4 models"; sleep 0.5; echo "best: lr=0.03"')

echo "Submitted: prepare=$prep, trainings=${trains[*]}, evaluate=$eval_id"
echo "Each training asks for 1 GPU with --gpu-mem 6G, so two share each 16G GPU."
echo
shown_gpus=0
while :; do
    state=$("$DROVER" show "$eval_id" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
    running=$("$DROVER" ls --state running --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
    if [ "$shown_gpus" = 0 ] && [ "$running" -ge 4 ]; then
        echo "== drover gpus (four trainings packed onto two GPUs)"
        "$DROVER" gpus
        echo
        shown_gpus=1
    fi
    case $state in succeeded|failed|upstream_failed|cancelled|timed_out) break ;; esac
    sleep 0.5
done
echo "== drover ls"
"$DROVER" ls
echo
echo "== drover logs ${trains[1]}"
"$DROVER" logs "${trains[1]}"
echo
echo "== drover logs $eval_id"
"$DROVER" logs "$eval_id"
"$DROVER" shutdown
cat <<TEXT

The pipeline ran: $state. Where to look next:
  export DROVER_HOME=$DROVER_HOME    # then: drover ls, drover show $eval_id, drover logs ID
  $DROVER_HOME/runs/ID/ATTEMPT/      # each attempt's stdout, stderr and exit status
  docs/CLI.md                        # every command and its --json schema
  docs/ARCHITECTURE.md               # how core/, the daemon, the store and exec/ fit
  docs/API.md                        # the HTTP API and the web dashboard: put
                                     # 'http = 127.0.0.1:8420' in \$DROVER_HOME/drover.conf,
                                     # restart (drover shutdown), then: drover dashboard
(The daemon was stopped; any drover command with this DROVER_HOME starts it again.)
TEXT
