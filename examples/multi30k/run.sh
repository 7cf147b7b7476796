#!/usr/bin/env bash
# Multi30k recipe: preprocess -> train transformer_tiny (or luong_m30k) -> average -> translate test2016 -> score.
#
#   bash examples/multi30k/run.sh                      # English->German, seed 1, 2 hours of training
#   TGT=fr bash examples/multi30k/run.sh               # English->French, the same recipe
#   SEED=2 bash examples/multi30k/run.sh               # a second model (for an ensemble, see below)
#   ENSEMBLE="1 2" bash examples/multi30k/run.sh       # after both seeds: translate with both
#   AMP=bf16 bash examples/multi30k/run.sh             # train in bf16 mixed precision (CPU with native bf16)
#   ARCH=luong_m30k bash examples/multi30k/run.sh      # the recurrent model (Luong et al. 2015) instead of the Transformer
#   SPLIT=valid RUN=tiny16k ARCH=transformer_tiny MAX_UPDATE=16000 bash examples/multi30k/run.sh
#                                                      # a variant scored on valid only (how a setting is chosen)
#   LOWERCASE=1 bash examples/multi30k/run.sh          # lowercased text (data-lc/), scored case-insensitively
#
# Every step skips work already done: a finished training (marked by SEED_DIR/.trained) is not
# repeated, an interrupted one resumes from checkpoint_last.pt (with the rest of its --stop-time-hours
# budget), and the average, translations and scores are redone whenever training ran.  Data: $NMTKIT_DATA/multi30k (raw text,
# default ../shared/data).  Results: $WORK (default m30k-en-de/): data/, seed1/ (checkpoints,
# learning_curve.png, train_log.jsonl), test2016.*.hyp and scores.txt.
set -euo pipefail
SRC=${SRC:-en}
TGT=${TGT:-de}
SEED=${SEED:-1}
LOWERCASE=${LOWERCASE:-0}  # 1: train on lowercased text, the form of the multi30k task1/tok files that MMT papers train on
LC=$([ "$LOWERCASE" = 1 ] && echo -lc || true)
RUN=${RUN:-seed$SEED$LC}   # the model's folder and label in $WORK (a variant of the same seed needs its own)
SPLIT=${SPLIT:-test2016}   # the set translated and scored: valid to choose between variants, test2016 once chosen
HOURS=${HOURS:-2}          # wall-clock training budget of one model
THREADS=${THREADS:-1}      # one core per model: two seeds train side by side on 2 cores
AMP=${AMP:-auto}           # training precision (--amp): bf16 on a CPU with AVX512_BF16/AMX (docs/guide/training.md)
ARCH=${ARCH:-transformer_tiny}  # a Transformer preset (transformer_tiny, transformer_m30k) or luong_m30k; the default
                                # scores highest of the recipe's models (bench/RESULTS.md, "Recipe quality"); among
                                # the Transformer set-ups it was chosen on valid ("Recipe set-ups compared on valid")
# Transformers: Wu et al. (2021)'s recipe, chosen on valid against 16,000 single batches (bench/RESULTS.md,
# "Recipe set-ups compared on valid"): 8000 updates of 2 x 4096 tokens, the last 10 epochs averaged
case "$ARCH" in transformer*) DEFAULT_AVG=10 ;; *) DEFAULT_AVG=3 ;; esac
MAX_UPDATE=${MAX_UPDATE:-8000}  # Transformers: Wu et al.'s 8000 updates (the wall-clock budget stops it earlier)
UPDATE_FREQ=${UPDATE_FREQ:-2}   # Transformers: batches per update (Wu et al. trained on 2 GPUs of 4096 tokens each)
AVG=${AVG:-$DEFAULT_AVG}   # average the last N epoch checkpoints
case "$ARCH" in transformer*) DEFAULT_MEMBER=avg ;; *) DEFAULT_MEMBER=best ;; esac
ENSEMBLE_OF=${ENSEMBLE_OF:-$DEFAULT_MEMBER}  # each seed's checkpoint in ENSEMBLE: best (valid loss) or avg (the Transformer's: its average is the better on valid)
TRAIN_ARGS=${TRAIN_ARGS:-} # more nmtkit-train options, e.g. TRAIN_ARGS=--encoder-self-attention (a variant to compare on valid)
DATA_ROOT=${NMTKIT_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/data}
RAW=$DATA_ROOT/multi30k
WORK=${WORK:-m30k-$SRC-$TGT}
DATA=$WORK/data
PRE_ARGS=() SCORE_ARGS=()
if [ "$LOWERCASE" = 1 ]; then  # its own data directory; the output is lowercase, so BLEU and chrF ignore case
    DATA=$WORK/data-lc PRE_ARGS=(--lowercase) SCORE_ARGS=(--lowercase)
fi
CK=$WORK/$RUN
mkdir -p "$WORK"

if [ ! -f "$DATA/meta.json" ]; then
    nmtkit-preprocess -s "$SRC" -t "$TGT" --trainpref "$RAW/train" --validpref "$RAW/valid" --testpref "$RAW/test2016" \
        --destdir "$DATA" --tokenizer moses --bpe subword-nmt --bpe-merges 8000 --joined-dictionary --workers 2 "${PRE_ARGS[@]}"
fi

translate_and_score() {  # $1: label, $2: checkpoint path(s) joined by ':'
    local hyp="$WORK/$SPLIT.$1.hyp.$TGT"
    if [ ! -s "$hyp" ]; then
        nmtkit-translate --path "$2" --beam 5 --batch-size 64 --threads "$THREADS" < "$RAW/$SPLIT.$SRC" > "$hyp"
    fi
    mkdir -p "$WORK/scores"
    { printf '%s\t' "$SPLIT.$1"; nmtkit-score --sys "$hyp" --ref "$RAW/$SPLIT.$TGT" --metrics bleu,chrf "${SCORE_ARGS[@]}" | tr '\n' '\t'; echo; } \
        > "$WORK/scores/$SPLIT.$1.txt"
    cat "$WORK"/scores/*.txt > "$WORK/scores.txt"
}

if [ -n "${ENSEMBLE:-}" ]; then
    paths=$(for s in $ENSEMBLE; do printf '%s:' "$WORK/seed$s$LC/checkpoint_$ENSEMBLE_OF.pt"; done)
    translate_and_score "ensemble-$(echo $ENSEMBLE | tr ' ' '+')$LC" "${paths%:}"
    exit 0
fi

# Adam 2e-3, the plateau schedule and the model come from the luong_m30k preset.  The lr halves
# when the valid loss stops falling, the weights are an exponential moving average (0.999), and
# training runs for the whole budget (no early stop); checkpoint_best.pt has the lowest valid loss.
# Chosen on valid (bench/quality_per_hour.py's docstring): the valid-BLEU plateau with early
# stopping halved the lr on noise and stopped a 1-hour run at 41 minutes.  Greedy valid BLEU is
# logged every epoch for the learning curve.
# The Transformer presets bring Wu et al. (2021)'s optimiser (Adam 0.9/0.98, lr 0.005, inverse
# square root after 2000 warm-up updates); their updates of 2 x 4096 tokens (UPDATE_FREQ), label smoothing 0.1 and
# 8000 updates are given here, within the same wall-clock budget; no greedy valid BLEU per epoch
# (it would cost the short run about a tenth of its time).
if [ ! -f "$CK/.trained" ]; then
    case "$ARCH" in
    transformer*)
        nmtkit-train "$DATA" --arch "$ARCH" --save-dir "$CK" --seed "$SEED" --threads "$THREADS" --amp "$AMP" \
            --max-tokens 4096 --label-smoothing 0.1 --max-update "$MAX_UPDATE" --max-epoch 1000 --stop-time-hours "$HOURS" \
            --update-freq "$UPDATE_FREQ" --keep-last "$AVG" $TRAIN_ARGS ;;
    *)
        nmtkit-train "$DATA" --arch "$ARCH" --save-dir "$CK" --seed "$SEED" --threads "$THREADS" --amp "$AMP" \
            --batch-size 64 --label-smoothing 0.1 --max-epoch 100 --ema-decay 0.999 --stop-time-hours "$HOURS" \
            --eval-bleu --eval-bleu-beam 1 --best-checkpoint-metric loss --keep-last "$AVG" $TRAIN_ARGS ;;
    esac
    touch "$CK/.trained"
    rm -f "$CK/checkpoint_avg.pt" "$WORK"/*."$RUN"-*.hyp.$TGT "$WORK"/*.ensemble-*.hyp.$TGT
fi

if [ ! -f "$CK/checkpoint_avg.pt" ]; then
    # a short budget may end before AVG epochs: average the epoch checkpoints there are (none: nmtkit-average says so)
    have=$(find "$CK" -maxdepth 1 -regex '.*/checkpoint[0-9]+\.pt' | wc -l)
    if [ "$have" -gt 0 ] && [ "$have" -lt "$AVG" ]; then
        echo "run.sh: $CK has $have epoch checkpoint(s), fewer than AVG=$AVG: averaging those" >&2
    fi
    nmtkit-average --last "$(( have > 0 && have < AVG ? have : AVG ))" --save-dir "$CK" -o "$CK/checkpoint_avg.pt"
fi
translate_and_score "$RUN-best" "$CK/checkpoint_best.pt"
translate_and_score "$RUN-avg$AVG" "$CK/checkpoint_avg.pt"
cat "$WORK/scores.txt"
