"""``nmtkit-train --tensorboard-logdir DIR``: the training curves as TensorBoard event files.

Why beside train_log.jsonl rather than instead of it: the JSON lines are what resuming prunes
and what scripts read; TensorBoard is for watching a run.  The records sent here are the
ones train_log.jsonl gets (:meth:`nmtkit.train.trainer.Trainer.log`), so the two never
disagree.  TensorBoard is an optional extra (``pip install 'nmtkit[tensorboard]'``).
"""
from __future__ import annotations

from typing import Any, Optional

from nmtkit.errors import NmtkitError

#: train_log.jsonl field -> TensorBoard tag, per event.
TAGS = {
    "train": {"loss": "train/loss", "ppl": "train/ppl", "lr": "train/lr", "gnorm": "train/gnorm",
              "tok_per_s": "train/tokens_per_s", "align_loss": "train/align_loss"},
    "valid": {"valid_loss": "valid/loss", "valid_ppl": "valid/ppl", "valid_bleu": "valid/bleu",
              "train_loss": "train/epoch_loss"},
}


class TensorBoardLog:
    """Scalars of each training and validation record, at their update; a no-op without a directory."""

    def __init__(self, logdir: Optional[str], enabled: bool = True) -> None:
        self.writer: Any = None
        if not logdir or not enabled:
            return
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise NmtkitError("--tensorboard-logdir needs the tensorboard package: pip install 'nmtkit[tensorboard]'") from None
        try:
            self.writer = SummaryWriter(log_dir=logdir)
        except OSError as exc:
            raise NmtkitError(f"{exc.filename or logdir}: {exc.strerror or exc}") from None

    def record(self, record: dict) -> None:
        """Write the scalars of one train_log.jsonl record (others are ignored)."""
        if self.writer is None:
            return
        tags = TAGS.get(record.get("event", ""))
        step = record.get("update")
        if not tags or step is None:
            return
        for key, tag in tags.items():
            value = record.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(tag, float(value), int(step))
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
