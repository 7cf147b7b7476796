"""The peers as their authors would set them up, written down with the source, and checked before a run.

Every comparison states, per peer, what the peer's own documentation or examples recommend, and
the script checks before it spends any time:

* **same shape** (``check_shape``): where a peer claims nmtkit's model shape, the two parameter
  counts (nmtkit's from building the model; the peer's from its documented layer layout, or, after
  training, from its own log or checkpoint) agree within 1 %; a peer that cannot build the shape
  is declared ``"closest"`` and the report gives both counts and both models' FLOPs per token;
* **same decoding** (``check_decoding``): every decoder uses beam 5, the score divided by the
  hypothesis length (length normalisation with exponent 1: nmtkit ``--lenpen 1``, fairseq
  ``--lenpen 1``, OpenNMT-py ``-length_penalty avg -alpha 1``, Marian ``--normalize 1``; Marian's
  default is 0, no normalisation, which is what the earlier translation records used) and a
  length bound of 1.5 x the source length (+10 where the toolkit has an additive term);
* **flags exist** (``check_flags``): every flag of a setup appears in the installed peer's
  ``--help`` (an option renamed between versions fails here, not an hour into training);
* **the same data** (``onmt_dropped_share``): OpenNMT-py 3.5.1's batcher skips a pair whose
  source is already in the batch being built; with its bucket of 262,144 (> the corpus) that drops
  13-19 % of the pairs of an epoch, mostly long ones. The share is measured from its own log and
  reported beside every OpenNMT-py figure.
* **the same budget**: each toolkit's own weight averaging and schedule (nmtkit ``--ema-decay``,
  fairseq ``--store-ema --ema-decay``, Marian ``--exponential-smoothing``, OpenNMT-py
  ``-average_decay``), the same wall time, the same choice of checkpoint on valid for all.
"""
from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Optional, Sequence

#: Length normalisation, beam and length bound every decoder uses (module docstring).
BEAM, LENPEN, MAX_LEN_A, MAX_LEN_B = 5, 1.0, 1.5, 10

#: Each toolkit's decoder flags for the settings above.
DECODE_FLAGS = {
    "nmtkit": ["--beam", BEAM, "--lenpen", LENPEN, "--lenpen-form", "fairseq", "--max-len-a", MAX_LEN_A, "--max-len-b", MAX_LEN_B],
    "fairseq": ["--beam", BEAM, "--lenpen", LENPEN, "--max-len-a", MAX_LEN_A, "--max-len-b", MAX_LEN_B],
    "ctranslate2": ["--beam", BEAM, "--lenpen", LENPEN, "--max-len-a", MAX_LEN_A, "--max-len-b", MAX_LEN_B],
    "opennmt": ["-beam_size", BEAM, "-length_penalty", "avg", "-alpha", LENPEN, "-max_length_ratio", MAX_LEN_A],
    "marian": ["--beam-size", BEAM, "--normalize", LENPEN, "--max-length-factor", MAX_LEN_A],
}

#: What each decoder's flags mean, for the check and the report: (beam, normalisation exponent, length factor).
DECODE_MEANING = {
    "nmtkit": ("--beam", "--lenpen", "--max-len-a"),
    "fairseq": ("--beam", "--lenpen", "--max-len-a"),
    "ctranslate2": ("--beam", "--lenpen", "--max-len-a"),
    "opennmt": ("-beam_size", "-alpha", "-max_length_ratio"),
    "marian": ("--beam-size", "--normalize", "--max-length-factor"),
}


@dataclasses.dataclass(frozen=True)
class Setup:
    """One peer's set-up for one suite, with where its settings come from."""

    peer: str
    suite: str
    shape: str  # "same" (checked within 1 %) or "closest" (counts and FLOPs reported)
    summary: str
    source: str  # the peer's own documentation or examples the settings follow
    averaging: str  # the toolkit's own weight averaging
    schedule: str


SETUPS = [
    Setup("opennmt", "train-speed", "same",
          "encoder_type rnn (unidirectional), 2 x LSTM 256, word_vec_size 256, global_attention general, input_feed 1, "
          "dropout 0.2, Adam 1e-3, max_grad_norm 5, batch 64 sentences, normalization tokens, param_init 0.1",
          "OpenNMT-py 3.5.1 docs, 'Options: train' (opts.py: encoder_type rnn/brnn, global_attention, input_feed) and "
          "docs/source/FAQ 'How do I use the RNN models?'; luong_small's shape, 7.49 M parameters both",
          "none (a speed run)", "constant"),
    Setup("marian", "train-speed", "closest",
          "--type s2s --enc-type bidirectional --enc-cell gru --dec-cell gru --dim-emb 256 --dim-rnn 256 against rnnsearch_small",
          "marian-nmt.github.io/docs 'Command-line options' and examples/training-basics (Nematus-style s2s); "
          "its conditional GRU decoder has two transitions per step, so the shapes cannot match: FLOPs per token reported",
          "none (a speed run)", "constant"),
    Setup("opennmt", "quality-per-hour", "closest",
          "encoder_type brnn, enc_layers/dec_layers 2, hidden_size 256 (128 per direction: OpenNMT-py splits one "
          "hidden_size over the directions and its attention needs annotations of the decoder's size, so nmtkit's 256 "
          "per direction in front of a 256-unit decoder cannot be built; and its bridge is a square map of the "
          "per-direction states, smaller than nmtkit's), bridge, share_embeddings and "
          "share_decoder_embeddings, dropout 0.3, Adam 2e-3, label_smoothing 0.1, average_decay 1e-4",
          "OpenNMT-py 3.5.1 docs 'Options: train' (average_decay: 'e.g. 1e-4'), FAQ 'share_embeddings' "
          "(needs a shared vocabulary: share_vocab)", "-average_decay 1e-4 (exponential moving average)",
          "constant lr (OpenNMT-py's decay starts only with -start_decay_steps, not documented for RNNs)"),
    Setup("fairseq", "quality-per-hour", "closest",
          "--arch lstm, --encoder-bidirectional, 2 layers, 256 per direction, 2 x 256 decoder, "
          "--share-all-embeddings, dropout 0.3, Adam 2e-3 reduce_lr_on_plateau, label smoothing 0.1, "
          "--store-ema --ema-decay 0.999 (fairseq's encoder_hidden_proj/encoder_cell_proj are one 512 -> 256 map "
          "shared by the layers where nmtkit's bridge maps all layers at once: 0.79 M fewer parameters)",
          "fairseq 0.12.2 docs 'Command-line Tools' (fairseq-train: --store-ema, --ema-decay) and "
          "fairseq/models/lstm.py's lstm_wiseman_iwslt_de_en (the recurrent recipe of the IWSLT example)",
          "--store-ema --ema-decay 0.999", "reduce_lr_on_plateau, --lr-shrink 0.5"),
    Setup("fairseq", "train-speed", "same",
          "--arch transformer with nmtkit's preset shape (layers, --encoder/--decoder-embed-dim, ffn-embed-dim, "
          "attention-heads), post-norm, sinusoidal positions, --share-all-embeddings, the preset's dropout, "
          "Adam (0.9, 0.98) with inverse_sqrt warm-up, no clipping, --max-tokens as nmtkit's (the same padded "
          "n x max(source, target) budget), cross entropy, float32 (fairseq's --bf16 is not a CPU path)",
          "fairseq 0.12.2 docs 'Command-line Tools' and examples/translation/README.md (the IWSLT'14 "
          "transformer recipe: Adam 0.9/0.98, inverse_sqrt, --max-tokens 4096); Wu et al. (2021)'s tiny shape",
          "none (a speed run)", "inverse_sqrt"),
    Setup("fairseq-transformer", "quality-per-hour", "same",
          "--arch transformer at transformer_tiny's shape (4+4 layers, 128/256, 4 heads), --share-all-embeddings, "
          "dropout 0.3, Adam (0.9, 0.98) lr 0.005, inverse_sqrt after 2000 warm-up updates (init lr 1e-7), "
          "label smoothing 0.1, --max-tokens 4096, --max-update 8000, --patience 10; one core, so one 4096-token batch "
          "per update (they trained on two GPUs, 2 x 4096: with --update-freq 2, one core makes about 1,650 updates in "
          "the hour, short of the 2,000 of warm-up; 3,289 without, seed 1 of 2026-11-27)",
          "Wu et al. (2021) 'Good for Misconceived Reasons' (github LividWo/Revisit-MMT): their fairseq recipe "
          "for the Multi30k transformer tiny (README, evaluate.sh)",
          "the mean of the last 10 epoch checkpoints (their evaluate.sh; a candidate chosen on valid, as nmtkit's)",
          "inverse_sqrt"),
    Setup("opennmt-transformer", "quality-per-hour", "same",
          "encoder_type/decoder_type transformer at transformer_tiny's shape (4+4 layers, 128/256, 4 heads), "
          "add_qkvbias and add_ffnbias (the paper's biased projections), share_embeddings and "
          "share_decoder_embeddings, position_encoding, param_init_glorot, dropout 0.3, attention_dropout 0; "
          "Wu et al.'s optimiser in OpenNMT-py's terms: Adam (0.9, 0.98), decay_method noam with warmup_steps 2000 "
          "and learning_rate scaled to peak at 0.005, max_grad_norm 0, label_smoothing 0.1, batch_type tokens "
          "4096, train_steps 8000; pre-norm (OpenNMT-py's only Transformer layout)",
          "OpenNMT-py 3.5.1 docs, FAQ 'How do I use the Transformer model?' (noam, param_init_glorot, token "
          "batches) and opts.py (add_qkvbias, add_ffnbias); Wu et al. (2021)'s tiny shape and schedule",
          "the mean of the last 10 checkpoints with onmt_average_models (a candidate chosen on valid, as for "
          "the other Transformers)", "noam (inverse square root after linear warm-up)"),
    Setup("marian", "quality-per-hour", "closest",
          "--type s2s (biGRU, conditional GRU), --dim-emb 256 --dim-rnn 256, --tied-embeddings-all, "
          "--layer-normalization, --dropout-rnn 0.2 --dropout-src 0.1 --dropout-trg 0.1, --label-smoothing 0.1, "
          "--exponential-smoothing, Adam 1e-3",
          "marian-nmt/marian-examples training-basics and wmt2017-uedin (Nematus-style s2s recipe)",
          "--exponential-smoothing (1e-4)", "constant lr (the examples' recurrent recipe)"),
    # the decoders of translate-speed: each reads the model its toolkit trained in quality-per-hour, with the
    # suite's beam, length normalisation and length bound (check_decoding), batch 64, the threads asked
    Setup("fairseq", "translate-speed", "same",
          "fairseq-interactive on the quality-per-hour model, BPE pieces in and out, --beam 5 --lenpen 1 (score / length), "
          "--max-len-a/--max-len-b as every decoder, --batch-size 64 --buffer-size 2000; the Transformer through "
          "fairseq's own interactive entry with a plain whitespace encoder (its --max-positions bound kept)",
          "fairseq 0.12.2 docs 'Command-line Tools' (fairseq-interactive) and examples/translation/README.md",
          "the checkpoint the run chose on valid (its EMA or last-10 average where it kept one)", "n/a"),
    Setup("ctranslate2", "translate-speed", "same",
          "CTranslate2 on the fairseq Transformer converted by ct2-fairseq-converter (untimed), Translator with "
          "compute_type int8 or float32, beam_size 5, length_penalty 1, max_decoding_length from the suite's bound "
          "(one per batch), batches of 64, intra_threads as asked (bench/ct2_translate.py)",
          "CTranslate2 docs 'Fairseq' guide (ct2-fairseq-converter) and 'Translation' / 'Quantization' (compute_type, "
          "beam_size, length_penalty); the fastest CPU engine for Transformers, the moonshot's reference",
          "the fairseq checkpoint's weights, as converted", "n/a"),
    Setup("opennmt", "translate-speed", "closest",
          "onmt_translate on the quality-per-hour model (its RNN: the closest shape; its Transformer: the same shape, "
          "checked there), -beam_size 5 -length_penalty avg -alpha 1, -max_length_ratio "
          "from the suite's bound, -batch_size 64, -gpu -1, reading and writing files (its -output /dev/stdout truncates)",
          "OpenNMT-py 3.5.1 docs 'Options: translate' (beam_size, length_penalty, alpha, max_length_ratio)",
          "its -average_decay weights as saved", "n/a"),
    Setup("marian", "translate-speed", "closest",
          "pymarian decode on the quality-per-hour model, --beam-size 5 --normalize 1, --max-length-factor from the "
          "suite's bound, --mini-batch 64 --maxi-batch 100 --maxi-batch-sort src; fast paths --gemm-type packed8 "
          "and --shortlist lex 100 50 (from eflomal links of the same pieces, untimed)",
          "marian-nmt.github.io/docs 'Command-line options' (marian-decoder) and its 'Shortlists' and packed8 notes",
          "--exponential-smoothing weights as saved", "n/a"),
    # the statistical aligners of the AER suites, run as their authors document them
    Setup("eflomal", "aer", "closest",
          "eflomal-align, its default model 3 (HMM + fertility), both directions (-f, -r) on train + dev concatenated, "
          "the dev lines' links symmetrized by nmtkit (grow-diag-final-and, intersect, union)",
          "eflomal 2.0.0 README (github robertostling/eflomal: eflomal-align, then atools-style symmetrization)",
          "n/a (no neural weights)", "its own sampler schedule (defaults)"),
    Setup("fast_align", "aer", "closest",
          "SYSTRAN's fast_align build (systran-align 3.5.0) with fast_align's recommended -d -o (favor diagonal, "
          "optimize tension) on the same train + dev text; its Python API returns the directions already combined",
          "fast_align README (github clab/fast_align: 'fast_align -i text -d -o -v') and shared/peers/fastalign_systran.py",
          "n/a (no neural weights)", "5 EM iterations (fast_align's default)"),
]


def setup(peer: str, suite: str) -> Setup:
    for s in SETUPS:
        if s.peer == peer and s.suite == suite:
            return s
    raise KeyError((peer, suite))


# -- parameter counts ----------------------------------------------------------------------------
def _lstm(inp: int, h: int, biases: int = 2) -> int:
    return 4 * h * (inp + h) + biases * 4 * h


def _gru(inp: int, h: int, biases: int = 2) -> int:
    return 3 * h * (inp + h) + biases * 3 * h


def onmt_rnn_params(v_src: int, v_tgt: int, emb: int, hidden: int, layers: int, brnn: bool, input_feed: bool = True,
                    bridge: bool = False, share_embeddings: bool = False, share_decoder_embeddings: bool = False) -> int:
    """OpenNMT-py 3.5.1 RNN encoder-decoder with LSTMs and 'general' global attention: nn.LSTM
    encoder (``hidden // 2`` per direction with brnn), StackedLSTM of LSTMCells in the decoder,
    GlobalAttention ``linear_in`` (h x h) and ``linear_out`` (2h -> h, no bias), the generator
    (h -> V with bias), the bridge (``onmt/encoders/rnn_encoder.py``: one square Linear with bias
    for h and one for c, of ``layers x`` the *per-direction* size, applied to the stacked states).
    Checked against what OpenNMT-py 3.5.1 printed: 2.40 M for shared/peers' smoke model, 4,483,368 for
    quality_per_hour's brnn config at a 7,976-word shared vocabulary (2026-11-27, a 2-step dry run)."""
    u = hidden // 2 if brnn else hidden
    dirs = 2 if brnn else 1
    enc = sum(dirs * _lstm(emb if k == 0 else u * dirs, u) for k in range(layers))
    dec = sum(_lstm((emb + (hidden if input_feed else 0)) if k == 0 else hidden, hidden) for k in range(layers))
    att = hidden * hidden + 2 * hidden * hidden
    gen = hidden * v_tgt + v_tgt
    total_h = layers * u
    br = 2 * (total_h * total_h + total_h) if bridge else 0
    embs = v_src * emb + v_tgt * emb
    if share_embeddings:
        embs = v_tgt * emb
    if share_decoder_embeddings:
        gen -= hidden * v_tgt  # the generator's weight is the target embedding (emb == hidden)
    return embs + enc + dec + att + gen + br


def fairseq_lstm_params(v: int, emb: int, enc_hidden: int, dec_hidden: int, layers: int, bidirectional: bool,
                        out_embed: int, share_all: bool = True) -> int:
    """fairseq 0.12.2 ``lstm``: nn.LSTM encoder, LSTMCell decoder with input feeding, AttentionLayer
    (input_proj h x src, output_proj (h + src) -> h, no biases), encoder_hidden_proj and
    encoder_cell_proj (src -> h with bias) when the encoder's output size differs from the decoder's,
    additional_fc when h != out_embed, the output projection (tied with share_all)."""
    dirs = 2 if bidirectional else 1
    src = enc_hidden * dirs
    enc = sum(dirs * _lstm(emb if k == 0 else src, enc_hidden) for k in range(layers))
    dec = sum(_lstm((emb + dec_hidden) if k == 0 else dec_hidden, dec_hidden) for k in range(layers))
    proj = 2 * (src * dec_hidden + dec_hidden) if src != dec_hidden else 0
    att = dec_hidden * src + (dec_hidden + src) * dec_hidden
    fc = (dec_hidden * out_embed + out_embed) if dec_hidden != out_embed else 0
    out = 0 if share_all else out_embed * v
    embs = v * emb if share_all else 2 * v * emb
    return embs + enc + dec + proj + att + fc + out


def fairseq_transformer_params(v: int, d: int, ffn: int, enc_layers: int, dec_layers: int, share_all: bool = True,
                                normalize_before: bool = False) -> int:
    """fairseq 0.12.2 ``transformer``: per layer, attention blocks of four d x d maps with biases,
    LayerNorms (2 per encoder layer, 3 per decoder layer) and the feed-forward pair; sinusoidal
    positions (no parameters); a final LayerNorm per stack only with pre-norm; the output layer
    tied to the one embedding matrix with ``--share-all-embeddings``."""
    attn = 4 * (d * d + d)
    ffn_p = d * ffn + ffn + ffn * d + d
    enc = enc_layers * (attn + ffn_p + 2 * 2 * d)
    dec = dec_layers * (2 * attn + ffn_p + 3 * 2 * d)
    final = 2 * 2 * d if normalize_before else 0
    embs = v * d if share_all else 3 * v * d
    return embs + enc + dec + final


def onmt_transformer_params(v: int, d: int, ffn: int, enc_layers: int, dec_layers: int, share: bool = True) -> int:
    """OpenNMT-py 3.5.1 Transformer with ``add_qkvbias`` and ``add_ffnbias`` (the paper's layers),
    shared embeddings and ``share_decoder_embeddings`` (``share``; else three matrices, one vocabulary
    size ``v`` for both sides): pre-norm layers, i.e. fairseq's pre-norm
    count (the same LayerNorms: one before each sublayer, and a final one per stack,
    onmt/encoders/transformer.py, onmt/decoders/transformer.py), plus the generator's bias (its
    weight is the tied embedding: onmt/model_builder.py).  Checked against what OpenNMT-py 3.5.1
    printed for quality_per_hour's Transformer config at a 6,352-word shared vocabulary: 2,144,976
    (2026-11-28, a 2-step dry run on 3,000 pairs)."""
    return fairseq_transformer_params(v, d, ffn, enc_layers, dec_layers, share_all=share, normalize_before=True) + v


def fairseq_unused_encoder_copies(d: int, ffn: int, enc_layers: int) -> int:
    """Parameters fairseq 0.12.2 counts in its log but never trains: each encoder layer keeps fused
    copies of its attention and feed-forward weights for the BetterTransformer inference path
    (``in_proj_weight``, ``out_proj_weight``, ``fc1_weight``, ``fc2_weight`` and biases, in
    fairseq/modules/transformer_layer.py); they get no gradient, and Adam skips them."""
    return enc_layers * (3 * d * d + 3 * d + d * d + d + d * ffn + ffn + ffn * d + d)


def fairseq_dict_size(dict_txt: Path, padding_factor: int = 8) -> int:
    """The vocabulary fairseq builds from a ``dict.*.txt``: its 4 specials and the listed words,
    padded to a multiple of ``padding_factor`` (fairseq-preprocess's default 8)."""
    n = 4 + sum(1 for line in dict_txt.read_text(encoding="utf-8").splitlines() if line.strip())
    return -(-n // padding_factor) * padding_factor


def nmtkit_params(arch: str, src_vocab: int, tgt_vocab: int, **overrides: object) -> int:
    """nmtkit's exact parameter count: the model built from the preset and overrides."""
    import torch

    from nmtkit.data.dictionary import Dictionary
    from nmtkit.models import registry

    def fake(n: int) -> Dictionary:
        d = Dictionary()
        while len(d) < n:
            d.add(f"w{len(d)}")
        return d

    model_name, cfg = registry.resolve_config(arch, overrides)
    with torch.device("meta"):
        model = registry.build_model(model_name, cfg, fake(src_vocab), fake(tgt_vocab))
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


class CheckFailed(SystemExit):
    """A set-up check failed: the run is refused before anything is measured."""


def check_shape(nmtkit: int, peer: int, shape: str, what: str, tol: float = 0.01) -> str:
    """A line for the report; raises for a "same" shape whose counts differ by more than ``tol``."""
    diff = abs(peer - nmtkit) / nmtkit
    line = f"{what}: nmtkit {nmtkit:,} parameters, peer {peer:,} ({peer / nmtkit - 1:+.1%})"
    if shape == "same" and diff > tol:
        raise CheckFailed(f"{line}: not the same shape (more than {tol:.0%} apart); fix the peer's config")
    return line + (" (same shape)" if shape == "same" else " (closest shape the peer can build)")


def check_decoding(commands: dict[str, Sequence[object]]) -> None:
    """Every decoder command (toolkit -> argv) carries the same beam, length normalisation and
    length factor (module docstring)."""
    want = (str(BEAM), LENPEN, MAX_LEN_A)
    for tk, argv in commands.items():
        argv = [str(a) for a in argv]
        got = []
        for flag in DECODE_MEANING[tk]:
            if flag not in argv:
                raise CheckFailed(f"{tk}: the decoder command lacks {flag} (every decoder: beam {BEAM}, "
                                  f"length normalisation {LENPEN}, max length {MAX_LEN_A} x source)")
            got.append(argv[argv.index(flag) + 1])
        if (got[0], float(got[1]), float(got[2])) != want:
            raise CheckFailed(f"{tk}: decodes with {dict(zip(DECODE_MEANING[tk], got))}; every decoder must use "
                              f"beam {BEAM}, length normalisation {LENPEN}, max length {MAX_LEN_A} x source")


def check_flags(tool: Path, argv: Sequence[object], help_args: Sequence[str] = ("--help",), help_text: Optional[str] = None) -> None:
    """Every ``-flag`` of ``argv`` appears in ``tool --help`` (``help_text`` for tests)."""
    if help_text is None:
        r = subprocess.run([str(tool), *help_args], capture_output=True, text=True, timeout=300)
        help_text = r.stdout + r.stderr
    import re

    def listed(flag: str) -> bool:  # the whole flag, not a prefix of a longer one
        return re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", help_text) is not None

    missing = [str(a) for a in argv if isinstance(a, str) and a.startswith("-") and len(a) > 1 and not a[1:2].isdigit()
               and not listed(str(a).split("=")[0])]
    if missing:
        raise CheckFailed(f"{tool}: {', '.join(missing)} not in its --help (renamed or missing in this version)")


def check_fairseq_args(python: Path, argv: Sequence[object], parser: str = "training") -> None:
    """fairseq lists a model's, criterion's and optimizer's options in no ``--help``: its own
    parser (``fairseq.options``, in the peer's interpreter) parses ``argv`` instead, and an option
    it does not know (renamed or missing in this version) fails here."""
    code = ("import sys\nfrom fairseq import options\n"
            f"p = options.get_{parser}_parser()\n"
            "options.parse_args_and_arch(p, sys.argv[1:])\n")
    r = subprocess.run([str(python), "-c", code, *map(str, argv)], capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]
        raise CheckFailed(f"fairseq ({python}) does not take these options: {tail[0]}")


def onmt_dropped_share(onmt_tokens_per_batch: float, corpus_tokens_per_pair: float, batch_size: int) -> float:
    """The share of target tokens OpenNMT-py's sentence batches lack against the corpus's: the
    pairs its batcher skipped (mostly long ones) from its own log's mean target tokens per batch."""
    return 1 - onmt_tokens_per_batch / (corpus_tokens_per_pair * batch_size)


def report_lines(suite: str) -> list[str]:
    """The set-ups of a suite as report lines (what each peer runs, and why)."""
    return [f"- {s.peer} ({s.shape} shape): {s.summary}. Source: {s.source}. Averaging: {s.averaging}; schedule: {s.schedule}."
            for s in SETUPS if s.suite == suite]
