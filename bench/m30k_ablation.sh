#!/usr/bin/env bash
# A cut-down Luong et al. (2015) Table 1 on Multi30k en-de: base, +reverse, +dropout, +global
# attention (location), +input feeding, local-p (general) + feeding; 2x256 LSTMs, tied embeddings,
# Adam 2e-3 + plateau, 8 epochs each (capped at 5.1 min wall), side by side; then beam-5 test2016.
#   bash bench/m30k_ablation.sh DATA RAW_TEST_SOURCE OUTDIR
set -euo pipefail
D=$1; TEST=$2; O=$3; mkdir -p "$O"
COMMON="--arch luong_small --embed-dim 256 --hidden-size 256 --layers 2 --share-all-embeddings --lr 0.002 --lr-schedule plateau --label-smoothing 0.1 --batch-size 64 --max-epoch 8 --stop-time-hours 0.085 --eval-bleu --eval-bleu-beam 1 --best-checkpoint-metric bleu --threads 2 --amp none --no-progress --no-epoch-checkpoints"
run() { n=$1; shift; nmtkit-train "$D" --save-dir "$O/$n" $COMMON "$@" > "$O/$n.log" 2>&1
        nmtkit-translate --path "$O/$n/checkpoint_best.pt" --beam 5 --batch-size 128 --amp none < "$TEST" > "$O/$n.hyp" 2>/dev/null; }
run 1_base --attention none --no-input-feeding --no-source-reversal --dropout 0 &
run 2_reverse --attention none --no-input-feeding --source-reversal --dropout 0 &
run 3_dropout --attention none --no-input-feeding --source-reversal --dropout 0.3 &
run 4_global_location --attention global --score location --no-input-feeding --source-reversal --dropout 0.3 &
run 5_feed --attention global --score location --input-feeding --source-reversal --dropout 0.3 &
run 6_localp_general_feed --attention local-p --score general --input-feeding --source-reversal --dropout 0.3 &
wait
