"""Named architectures (presets): the papers' configurations and CPU-sized ones.

Each preset fills only options the user left unset (``cfg.setdefault``); the first line of
its docstring is what ``nmtkit-train --list-archs`` prints.

Luong et al. (2015) models are 4 layers x 1000 LSTM cells with 1000-dim embeddings, uniform
init in [-0.1, 0.1], dropout 0.2 where dropout is used and window D = 10 for local attention.
Bahdanau et al. (2015) initialise differently (appendix B.1: orthogonal recurrent matrices,
N(0, 0.01^2) weights, N(0, 0.001^2) alignment model, zero biases): ``init="bahdanau"``.
Table 1 rows are cumulative (Base; +reverse; +dropout; +global attention (location); +feed
input; local-p (general) + feed input), so every attentional row keeps reversal and dropout.
The Table 4 presets (attention architectures, all with input feeding) use the same setting.
"""
from __future__ import annotations

from nmtkit.models.registry import register_arch


# -- shared settings -----------------------------------------------------------------------
#: Luong et al.'s training (section 4.1): plain SGD from lr 1.0, halved every epoch after
#: epoch 5 (8 with dropout), gradient norm clipped at 5, the loss summed over each sentence
#: and averaged over the batch.  Applied by nmtkit-train to the options the user leaves unset.
LUONG_TRAINING = {"optimizer": "sgd", "lr": 1.0, "lr_schedule": "halving", "halve_after": 5,
                  "clip_norm": 5.0, "loss_norm": "sentence"}
LUONG_TRAINING_DROPOUT = {**LUONG_TRAINING, "halve_after": 8}

def _luong_paper(cfg: dict) -> None:
    """Luong et al.'s 4 x 1000 stacked LSTM, 1000-dim embeddings, U(-0.1, 0.1) init."""
    cfg.setdefault("embed_dim", 1000)
    cfg.setdefault("hidden_size", 1000)
    cfg.setdefault("layers", 4)
    cfg.setdefault("init_scale", 0.1)
    cfg.setdefault("window", 10)


def _luong_attentional(cfg: dict, attention: str, score: str, feed: bool = True) -> None:
    """Table 1 attentional rows and Table 4: reverse + dropout 0.2 + the given attention."""
    cfg.setdefault("source_reversal", True)
    cfg.setdefault("dropout", 0.2)
    cfg.setdefault("attention", attention)
    cfg.setdefault("score", score)
    cfg.setdefault("input_feeding", feed)
    _luong_paper(cfg)


def _no_attention(cfg: dict, reverse: bool, dropout: float) -> None:
    cfg.setdefault("attention", "none")
    cfg.setdefault("input_feeding", False)
    cfg.setdefault("source_reversal", reverse)
    cfg.setdefault("dropout", dropout)
    _luong_paper(cfg)


# -- Luong et al. 2015 --------------------------------------------------------------------------
@register_arch("luong", "luong_wmt_en_de", train_defaults=LUONG_TRAINING_DROPOUT)
def luong_wmt_en_de(cfg: dict) -> None:
    """Luong et al. 2015 best WMT'14 En-De single model: 4x1000 LSTM, reversed source, local-p (general), input feeding, dropout 0.2.
    Every attentional WMT model of the paper reverses the source (sections 4.1-4.2)."""
    _luong_attentional(cfg, "local-p", "general")


@register_arch("luong", "luong_t1_base", train_defaults=LUONG_TRAINING)
def luong_t1_base(cfg: dict) -> None:
    """Luong et al. 2015 Table 1 'Base': 4x1000 LSTM encoder-decoder, no attention, no reversal, no dropout."""
    _no_attention(cfg, reverse=False, dropout=0.0)


@register_arch("luong", "luong_t1_base_reverse", train_defaults=LUONG_TRAINING)
def luong_t1_base_reverse(cfg: dict) -> None:
    """Luong et al. 2015 Table 1 'Base + reverse': no attention, source reversed."""
    _no_attention(cfg, reverse=True, dropout=0.0)


@register_arch("luong", "luong_t1_base_reverse_dropout", train_defaults=LUONG_TRAINING_DROPOUT)
def luong_t1_base_reverse_dropout(cfg: dict) -> None:
    """Luong et al. 2015 Table 1 'Base + reverse + dropout': no attention, reversed, dropout 0.2."""
    _no_attention(cfg, reverse=True, dropout=0.2)


@register_arch("luong", "luong_t1_global_location", train_defaults=LUONG_TRAINING_DROPOUT)
def luong_t1_global_location(cfg: dict) -> None:
    """Luong et al. 2015 Table 1 '+ global attention (location)': reverse, dropout 0.2, no input feeding."""
    _luong_attentional(cfg, "global", "location", feed=False)


@register_arch("luong", "luong_t1_global_location_feed", train_defaults=LUONG_TRAINING_DROPOUT)
def luong_t1_global_location_feed(cfg: dict) -> None:
    """Luong et al. 2015 Table 1 '+ feed input': global attention (location), input feeding, reverse, dropout 0.2."""
    _luong_attentional(cfg, "global", "location")


@register_arch("luong", "luong_t1_local_p_general_feed", train_defaults=LUONG_TRAINING_DROPOUT)
def luong_t1_local_p_general_feed(cfg: dict) -> None:
    """Luong et al. 2015 Table 1 'local-p attention (general) + feed input': reverse, dropout 0.2."""
    _luong_attentional(cfg, "local-p", "general")


def _register_table4() -> None:
    rows = [
        ("global", "location"), ("global", "dot"), ("global", "general"),
        ("local-m", "dot"), ("local-m", "general"),
        ("local-p", "dot"), ("local-p", "general"),
    ]
    for attention, score in rows:
        name = f"luong_t4_{attention.replace('-', '_')}_{score}"

        def preset(cfg: dict, attention: str = attention, score: str = score) -> None:
            _luong_attentional(cfg, attention, score)

        preset.__name__ = name
        preset.__doc__ = (
            f"Luong et al. 2015 Table 4 row '{attention} ({score})': 4x1000 LSTM, "
            "input feeding, reverse, dropout 0.2."
        )
        register_arch("luong", name, train_defaults=LUONG_TRAINING_DROPOUT)(preset)


_register_table4()


# -- Bahdanau et al. 2015 -----------------------------------------------------------------------
#: Bahdanau et al. (2015) train with Adadelta (rho 0.95, eps 1e-6), minibatches of 80 and
#: clip the gradient norm at 1, the loss summed over each sentence (appendix B.2).
BAHDANAU_TRAINING = {"optimizer": "adadelta", "clip_norm": 1.0, "loss_norm": "sentence"}


@register_arch("rnnsearch", "rnnsearch_50", train_defaults=BAHDANAU_TRAINING)
def rnnsearch_50(cfg: dict) -> None:
    """Bahdanau et al. 2015 RNNsearch-50: biGRU 1000 per direction, 620-dim embeddings, maxout 500, appendix B.1 init."""
    cfg.setdefault("embed_dim", 620)
    cfg.setdefault("hidden_size", 1000)
    cfg.setdefault("attention_dim", 1000)
    cfg.setdefault("maxout_size", 500)
    cfg.setdefault("layers", 1)
    cfg.setdefault("dropout", 0.0)
    cfg.setdefault("init", "bahdanau")


@register_arch("rnnencdec", "rnnencdec_50", train_defaults=BAHDANAU_TRAINING)
def rnnencdec_50(cfg: dict) -> None:
    """Bahdanau et al. 2015 RNNencdec-50: GRU 1000, 620-dim embeddings, s_0 = tanh(W_s c), maxout 500 deep output, appendix B.1 init."""
    cfg.setdefault("cell", "gru")
    cfg.setdefault("embed_dim", 620)
    cfg.setdefault("hidden_size", 1000)
    cfg.setdefault("layers", 1)
    cfg.setdefault("feed_context", True)
    cfg.setdefault("bahdanau_decoder", True)
    cfg.setdefault("maxout_size", 500)
    cfg.setdefault("dropout", 0.0)
    cfg.setdefault("init", "bahdanau")


# -- CPU-sized (Multi30k-scale data) ----------------------------------------------------------------
#: Why the CPU-sized and tiny presets use torch's default initialisation (init_scale 0) rather
#: than Luong et al.'s U(-0.1, 0.1): with Adam and small embeddings, U(-0.1, 0.1) embeddings
#: (std 0.06 instead of N(0, 1)) make the first epochs crawl (on a reverse-copy task luong_tiny
#: barely learned in 3 epochs with U(-0.1, 0.1) and solved it with torch's defaults).
#: Luong et al.'s presets keep U(-0.1, 0.1) (--init-scale 0.1); Bahdanau et al.'s use their own scheme (--init bahdanau).
CPU_PRESET_INIT = 0.0


@register_arch("luong", "luong_small")
def luong_small(cfg: dict) -> None:
    """CPU-sized Luong model: 2x256 LSTM, 256-dim embeddings, global (general) attention, input feeding, dropout 0.2."""
    cfg.setdefault("embed_dim", 256)
    cfg.setdefault("hidden_size", 256)
    cfg.setdefault("layers", 2)
    cfg.setdefault("dropout", 0.2)
    cfg.setdefault("attention", "global")
    cfg.setdefault("score", "general")
    cfg.setdefault("input_feeding", True)
    cfg.setdefault("init_scale", CPU_PRESET_INIT)


@register_arch("luong", "luong_medium")
def luong_medium(cfg: dict) -> None:
    """CPU-sized Luong model: 2x512 LSTM, 512-dim embeddings, global (general) attention, input feeding, dropout 0.3."""
    cfg.setdefault("embed_dim", 512)
    cfg.setdefault("hidden_size", 512)
    cfg.setdefault("dropout", 0.3)
    luong_small(cfg)


#: What the Multi30k recipe (examples/multi30k) trains with: chosen on Multi30k valid BLEU in a
#: sweep of input feeding, dropout 0.3/0.4, lr 1e-3/2e-3, 1/2 layers and rnnsearch_small (bench/RESULTS.md).
M30K_TRAINING = {"optimizer": "adam", "lr": 0.002, "lr_schedule": "plateau"}


@register_arch("luong", "luong_m30k", train_defaults=M30K_TRAINING)
def luong_m30k(cfg: dict) -> None:
    """Multi30k-sized Luong model: biLSTM encoder + bridge, 2x256 LSTM decoder, global (general) attention, input feeding, all embeddings tied, dropout 0.3."""
    cfg.setdefault("encoder_bidirectional", True)
    cfg.setdefault("share_all_embeddings", True)
    cfg.setdefault("dropout", 0.3)
    luong_small(cfg)


@register_arch("rnnsearch", "rnnsearch_small")
def rnnsearch_small(cfg: dict) -> None:
    """CPU-sized RNNsearch: biGRU 256 per direction, 256-dim embeddings, maxout 256, dropout 0.2."""
    cfg.setdefault("embed_dim", 256)
    cfg.setdefault("hidden_size", 256)
    cfg.setdefault("attention_dim", 256)
    cfg.setdefault("maxout_size", 256)
    cfg.setdefault("layers", 1)
    cfg.setdefault("dropout", 0.2)
    cfg.setdefault("init_scale", CPU_PRESET_INIT)


@register_arch("rnnencdec", "rnnencdec_small")
def rnnencdec_small(cfg: dict) -> None:
    """CPU-sized attention-free baseline: 2x256 LSTM, 256-dim embeddings, reversed source, dropout 0.2."""
    cfg.setdefault("cell", "lstm")
    cfg.setdefault("embed_dim", 256)
    cfg.setdefault("hidden_size", 256)
    cfg.setdefault("layers", 2)
    cfg.setdefault("source_reversal", True)
    cfg.setdefault("dropout", 0.2)
    cfg.setdefault("init_scale", CPU_PRESET_INIT)


# -- tiny (tests and the demo: < 1M parameters with a 200-word vocabulary) ---------------------------
@register_arch("luong", "luong_tiny")
def luong_tiny(cfg: dict) -> None:
    """Tiny Luong model for tests and demos: 2x96 LSTM, 64-dim embeddings, global (general), input feeding."""
    cfg.setdefault("embed_dim", 64)
    cfg.setdefault("hidden_size", 96)
    cfg.setdefault("layers", 2)
    cfg.setdefault("dropout", 0.1)
    cfg.setdefault("attention", "global")
    cfg.setdefault("score", "general")
    cfg.setdefault("input_feeding", True)
    cfg.setdefault("init_scale", CPU_PRESET_INIT)


@register_arch("rnnsearch", "rnnsearch_tiny")
def rnnsearch_tiny(cfg: dict) -> None:
    """Tiny RNNsearch for tests and demos: biGRU 96 per direction, 64-dim embeddings, maxout 64."""
    cfg.setdefault("embed_dim", 64)
    cfg.setdefault("hidden_size", 96)
    cfg.setdefault("attention_dim", 96)
    cfg.setdefault("maxout_size", 64)
    cfg.setdefault("layers", 1)
    cfg.setdefault("dropout", 0.1)
    cfg.setdefault("init_scale", CPU_PRESET_INIT)


@register_arch("rnnencdec", "rnnencdec_tiny")
def rnnencdec_tiny(cfg: dict) -> None:
    """Tiny attention-free baseline for tests and demos: 2x96 LSTM, 64-dim embeddings, reversed source."""
    cfg.setdefault("cell", "lstm")
    cfg.setdefault("embed_dim", 64)
    cfg.setdefault("hidden_size", 96)
    cfg.setdefault("layers", 2)
    cfg.setdefault("source_reversal", True)
    cfg.setdefault("dropout", 0.1)
    cfg.setdefault("init_scale", CPU_PRESET_INIT)
