"""Tests of nmtkit.train: training runs, resume, options, schedules, checkpoints kept on disk."""
