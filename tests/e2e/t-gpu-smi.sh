#!/usr/bin/env bash
# Without NVML but with nvidia-smi on the PATH: the inventory and the figures come from its CSV
# (a fake nvidia-smi here, printing what the test writes).
. "$(dirname "$0")/lib.sh"
unset DROVER_FAKE_GPUS LD_LIBRARY_PATH
mkdir -p "$TMP/bin" "$DROVER_HOME"
cat > "$TMP/bin/nvidia-smi" <<SH
#!/bin/sh
case "\$1" in
--query-gpu=index,name,uuid,memory.total) echo "0, Fake T4, GPU-smi-0, 15360";;
--query-gpu=uuid,*) cat "$TMP/gpus.csv";;
--query-compute-apps=*) cat "$TMP/apps.csv";;
*) exit 2;;
esac
SH
chmod +x "$TMP/bin/nvidia-smi"
export PATH=$TMP/bin:$PATH
echo "GPU-smi-0, 2048, 15360, 42, 7, 55, 31.25" > "$TMP/gpus.csv"
echo "GPU-smi-0, 999999, 2048" > "$TMP/apps.csv"
echo "sample = 200ms" > "$DROVER_HOME/drover.conf"
snap() { "$DROVER" gpus --json | python3 -c "import json,sys; d=json.load(sys.stdin); $1"; }
sampled() { [ "$(snap 'print(d["sampled_at"] is not None)')" = True ]; }
offline() { [ "$(snap 'print(d["gpus"][0]["offline"])')" = True ]; }

t "figures from nvidia-smi"
wait_until 10 sampled
expect_eq "$(snap 'g=d["gpus"][0]; print(d["source"], g["name"], g["mem_used"], g["util"], g["temp_c"], g["power_w"])')" \
    "nvidia-smi Fake T4 2147483648 42 55 31.25" "the GPU as nvidia-smi shows it"
expect_eq "$(snap 'print(d["gpus"][0]["processes"])')" "[{'pid': 999999, 'mem': 2147483648, 'task': None}]" "its processes"

t "a GPU nvidia-smi stops listing is taken out of service"
offline && fail "GPU 0 is offline while nvidia-smi lists it"
: > "$TMP/gpus.csv"
wait_until 10 offline
echo "GPU-smi-0, 2048, 15360, 42, 7, 55, 31.25" > "$TMP/gpus.csv"
"$DROVER" undrain
offline && fail "GPU 0 is still offline after undrain"

done_testing
