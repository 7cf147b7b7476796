#!/usr/bin/env bash
# The whole GPU-machine call of bench/gpu_speed.py (bench/README.md, "GPU"), for the device tool:
#   bash bench/gpu_run.sh COMMIT
# It needs, carried beside the working tree: .whl (sacremoses, subword-nmt and mock as cp312
# wheels) and .gpu (Multi30k en-de preprocessed as by examples/multi30k/run.sh, in .gpu/m30k,
# with test2016.en).  It installs the wheels, runs the GPU tests, then `gpu_speed.py measure`,
# writing at most 8 files to $OUT (the device tool's limit); `gpu_speed.py report` reads them here.
# PEER=onmt: OpenNMT-py instead (bench/gpu_onmt.py): its wheels carried in .whl-onmt (`python
# bench/gpu_onmt.py bundle --out .whl-onmt` here), stand-ins for the modules it imports but never
# uses, then `gpu_onmt.py measure` (its rows: gpu_onmt_rows.jsonl in $OUT).
set -uo pipefail
commit=${1:?usage: gpu_run.sh COMMIT}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
if [ "${PEER:-}" = onmt ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-onmt/*.whl || exit 1
    python3 bench/gpu_onmt.py stubs --dir /tmp/onmt-stubs || exit 1
    export PYTHONPATH=$PYTHONPATH:/tmp/onmt-stubs  # last: a module the machine has wins over its stand-in
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$OUT/onmt.log"
    timeout "${MEASURE_TIMEOUT:-480}" python3 bench/gpu_onmt.py measure --data .gpu/m30k --out-dir "$OUT" --commit "$commit" "${@:2}" \
        2>&1 | tee -a "$OUT/onmt.log" | tail -30
    rm -rf "$OUT"/*/  # what comes back: the rows, the test hypotheses (BPE pieces) and the log
    exit 0
fi
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; python3 -c "import torch; print(torch.__version__)"; } \
    2>&1 | tee "$OUT/measure.log"
timeout 240 python3 -m pytest -q -p no:cacheprovider ${TESTS:-tests/models/test_loop_graphs.py tests/generate/test_static_search.py tests/project/test_gpu.py} 2>&1 \
    | tee -a "$OUT/measure.log" | tail -25
timeout "${MEASURE_TIMEOUT:-480}" python3 bench/gpu_speed.py measure --data .gpu/m30k --test .gpu/test2016.en \
    --out-dir "$OUT" --commit "$commit" "${@:2}" 2>&1 | tee -a "$OUT/measure.log" | grep -v '^ *|' | tail -40
