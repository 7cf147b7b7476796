"""Transformer presets: the paper's base and big models (Vaswani et al. 2017, Table 3), and
small ones for Multi30k-sized data and for tests.

Training defaults follow the paper's section 5.3 in fairseq's form: Adam with β = (0.9, 0.98),
the inverse-square-root schedule after a linear warm-up, no gradient clipping, the loss averaged
over target tokens.  Label smoothing (0.1 in the paper) is a training option
(``--label-smoothing``), like every regulariser outside the model.
"""
from __future__ import annotations

from nmtkit.models.registry import register_arch

#: Section 5.3: Adam(0.9, 0.98), warm-up 4000 steps; lr 7e-4 is the paper's peak for d_model 512
#: (d^-0.5 * warmup^-0.5), as fairseq's recipes use it.
VASWANI_TRAINING = {"optimizer": "adam", "lr": 7e-4, "lr_schedule": "inverse_sqrt", "warmup_updates": 4000,
                    "adam_betas": (0.9, 0.98), "clip_norm": 0.0, "loss_norm": "token"}
#: Wu et al. (2021)'s recipe for their tiny model on Multi30k: lr 0.005, warm-up 2000.
WU2021_TRAINING = {**VASWANI_TRAINING, "lr": 0.005, "warmup_updates": 2000}


def _shape(cfg: dict, dim: int, ffn: int, heads: int, layers: int, dropout: float) -> None:
    cfg.setdefault("embed_dim", dim)
    cfg.setdefault("ffn_dim", ffn)
    cfg.setdefault("heads", heads)
    cfg.setdefault("encoder_layers", layers)
    cfg.setdefault("decoder_layers", layers)
    cfg.setdefault("dropout", dropout)


@register_arch("transformer", "transformer_base", train_defaults=VASWANI_TRAINING)
def transformer_base(cfg: dict) -> None:
    """Vaswani et al. 2017 base: 6+6 layers, d_model 512, d_ff 2048, 8 heads, dropout 0.1, post-norm."""
    _shape(cfg, 512, 2048, 8, 6, 0.1)


@register_arch("transformer", "transformer_big", train_defaults=VASWANI_TRAINING)
def transformer_big(cfg: dict) -> None:
    """Vaswani et al. 2017 big: 6+6 layers, d_model 1024, d_ff 4096, 16 heads, dropout 0.3, post-norm."""
    _shape(cfg, 1024, 4096, 16, 6, 0.3)


@register_arch("transformer", "transformer_tiny", train_defaults=WU2021_TRAINING)
def transformer_tiny(cfg: dict) -> None:
    """Wu et al. 2021's Multi30k "transformer tiny": 4+4 layers, d_model 128, d_ff 256, 4 heads, dropout 0.3, all embeddings tied."""
    cfg.setdefault("share_all_embeddings", True)
    _shape(cfg, 128, 256, 4, 4, 0.3)


@register_arch("transformer", "transformer_m30k", train_defaults=WU2021_TRAINING)
def transformer_m30k(cfg: dict) -> None:
    """Multi30k-sized Transformer: 4+4 layers, d_model 256, d_ff 1024, 4 heads, dropout 0.3, all embeddings tied."""
    cfg.setdefault("share_all_embeddings", True)
    _shape(cfg, 256, 1024, 4, 4, 0.3)


@register_arch("transformer", "transformer_test", train_defaults=VASWANI_TRAINING)
def transformer_test(cfg: dict) -> None:
    """Tiny Transformer for tests: 2+2 layers, d_model 32, d_ff 64, 4 heads, no dropout."""
    _shape(cfg, 32, 64, 4, 2, 0.0)
