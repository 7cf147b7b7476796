"""Kept for old imports: checkpoints live in :mod:`nmtkit.checkpoint`, which training and
generation both stand on (generation must not import training)."""
from nmtkit.checkpoint import (  # noqa: F401
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    ZIP_MAGIC,
    build_model_from_checkpoint,
    load_checkpoint,
    load_model,
    model_payload,
    pipelines_from_checkpoint,
    save_checkpoint,
)
