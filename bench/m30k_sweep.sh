#!/usr/bin/env bash
# The sweep that chose luong_m30k: six configurations on Multi30k en-de valid BLEU (beam 5 during
# training), side by side on one GPU (or one at a time on a CPU).  DATA: the recipe's data dir
# (nmtkit-preprocess ... --bpe-merges 8000 --joined-dictionary, see examples/multi30k/run.sh).
#   bash bench/m30k_sweep.sh DATA OUTDIR
set -euo pipefail
D=$1; O=$2; mkdir -p "$O"
COMMON="--arch luong_small --encoder-bidirectional --share-all-embeddings --label-smoothing 0.1 --batch-size 64 --eval-bleu --best-checkpoint-metric bleu --lr-schedule plateau --threads 2 --amp none --no-progress --no-epoch-checkpoints"
run() { name=$1; shift; nmtkit-train "$D" --save-dir "$O/$name" "$@" > "$O/$name.log" 2>&1; }
run c1 $COMMON --input-feeding --dropout 0.3 --max-epoch 16 &
run c2 $COMMON --no-input-feeding --dropout 0.3 --max-epoch 24 &
run c3 $COMMON --input-feeding --dropout 0.4 --max-epoch 16 &
run c4 $COMMON --input-feeding --dropout 0.3 --lr 0.002 --max-epoch 16 &
run c5 $COMMON --input-feeding --dropout 0.3 --layers 1 --max-epoch 20 &
run c6 --arch rnnsearch_small --share-all-embeddings --label-smoothing 0.1 --batch-size 64 --eval-bleu --best-checkpoint-metric bleu --lr-schedule plateau --threads 2 --amp none --no-progress --no-epoch-checkpoints --dropout 0.3 --max-epoch 16 &
wait
