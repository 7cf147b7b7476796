"""Training: loss, optimizers and schedules, checkpoints, the trainer loop, distributed setup."""
