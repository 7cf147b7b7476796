#!/usr/bin/env bash
# Hansards alignment recipe: normalize -> eflomal links -> preprocess -> train en->fr and fr->en
# side by side (one core each) -> align the 100 gold pairs, both directions symmetrized, from the
# attention and from the attention posterior (--posterior) -> AER.
#
#   bash examples/hansards/run.sh                 # attention models, 2 hours of training each
#   GUIDED=1 bash examples/hansards/run.sh        # guided by eflomal's links (--guided-alignment-weight 1)
#   GUIDED=1 HEAD=1 bash examples/hansards/run.sh # ... with an alignment head that sees the word it aligns
#   HOURS=0.5 bash examples/hansards/run.sh       # a shorter budget; the same command again resumes
#
# Data: $NMTKIT_DATA/align (default ../shared/data). eflomal: $PEERS/eflomal (shared/peers/setup.sh),
# needed only with GUIDED=1. Results in $WORK (default hansards-work/): data/, bin-*/, ckpt-*/,
# test.*.align and aer.txt. The choice of model (rnnsearch_small: biGRU 256, additive attention,
# BPE 16k, pairs up to 80 tokens; it learned to align faster than luong_small with a bidirectional
# encoder in a probe) is measured in bench/RESULTS.md
# ("AER: Canadian Hansards"), where bench/aer_hansards.py runs these same steps.
set -euo pipefail
HOURS=${HOURS:-2}
GUIDED=${GUIDED:-0}
HEAD=${HEAD:-0}
ARCH=${ARCH:-rnnsearch_small}
TRAIN_ARGS=${TRAIN_ARGS:-}
THREADS=${THREADS:-1}
MAX_TRAIN=${MAX_TRAIN:-0}  # first N training pairs only (0: all 310,661), for a quick trial
DATA_ROOT=${NMTKIT_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/data}
PEERS=${PEERS:-/work/peers}
WORK=${WORK:-hansards-work}
D=$WORK/data
TAG=$([ "$GUIDED" = 1 ] && echo -guided || true)
[ "$HEAD" = 1 ] && [ "$GUIDED" != 1 ] && { echo "HEAD=1 needs GUIDED=1 (the head learns only from the guided loss)" >&2; exit 1; }
HTAG=$([ "$HEAD" = 1 ] && echo -head || true)
mkdir -p "$WORK"

[ -f "$D/test.gold" ] || python "$(dirname "$0")/prepare.py" --data "$DATA_ROOT/align" --out "$D" --workers 2 --max-train "$MAX_TRAIN"

align_args=()
if [ "$GUIDED" = 1 ]; then
    if [ ! -f "$WORK/train.eflomal.fr-en.align" ]; then
        "$PEERS/eflomal/bin/eflomal-align" --overwrite -s "$D/train.en" -t "$D/train.fr" \
            -f "$WORK/train.eflomal.fwd" -r "$WORK/train.eflomal.rev"
        nmtkit-symmetrize "$WORK/train.eflomal.fwd" "$WORK/train.eflomal.rev" --method grow-diag-final-and \
            -o "$WORK/train.eflomal.en-fr.align" --flipped-output "$WORK/train.eflomal.fr-en.align"
    fi
fi

for dir in en-fr fr-en; do
    s=${dir%-*}; t=${dir#*-}
    [ "$GUIDED" = 1 ] && align_args=(--alignfile "$WORK/train.eflomal.$dir")
    [ -f "$WORK/bin-$dir$TAG/meta.json" ] || nmtkit-preprocess -s "$s" -t "$t" --trainpref "$D/train" \
        --validpref "$D/valid" --testpref "$D/test" --bpe subword-nmt --bpe-merges 16000 --max-len 80 \
        --workers 1 "${align_args[@]}" --destdir "$WORK/bin-$dir$TAG" &
done
wait

guide=()
[ "$GUIDED" = 1 ] && guide=(--guided-alignment-weight 1)
[ "$HEAD" = 1 ] && guide+=(--alignment-head)
for dir in en-fr fr-en; do  # one core each; an interrupted run resumes checkpoint_last.pt
    # shellcheck disable=SC2086
    nmtkit-train "$WORK/bin-$dir$TAG" --arch "$ARCH" $TRAIN_ARGS "${guide[@]}" --batch-size 64 --max-epoch 0 \
        --threads "$THREADS" --stop-time-hours "$HOURS" --no-epoch-checkpoints --log-interval 100 \
        --save-dir "$WORK/ckpt-$dir$TAG$HTAG" > "$WORK/train-$dir$TAG$HTAG.log" 2>&1 &
done
wait

# links from the attention, then from the attention posterior given each word (--posterior)
for reading in attention posterior; do
    flag=(); [ $reading = posterior ] && flag=(--posterior)
    for sym in intersect grow-diag-final-and soft-grow-diag-final-and; do
        nmtkit-align --path "$WORK/ckpt-en-fr$TAG$HTAG/checkpoint_last.pt" --reverse-path "$WORK/ckpt-fr-en$TAG$HTAG/checkpoint_last.pt" \
            "${flag[@]}" --symmetrize $sym --source "$D/test.en" --target "$D/test.fr" --gold "$D/test.gold" \
            -o "$WORK/test$TAG$HTAG.$reading.$sym.align" 2>&1 | tee "$WORK/aer$TAG$HTAG.$reading.$sym.txt"
    done
done
