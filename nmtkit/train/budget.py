"""``--stop-time-hours``: the wall-time budget of a save dir, summed over its runs.

A resumed run gets the rest of the budget: the seconds spent so far are kept in every
checkpoint (``TrainState.budget_wall_s``).  Under torchrun every rank takes the main process's
clock, so that all stop and anneal at the same update; the budget is read at the same points on
every rank.
"""
from __future__ import annotations

from typing import Callable, Optional

from nmtkit.train import distributed as distmod
from nmtkit.train.run import TrainingRun


class TimeBudget:
    """The --stop-time-hours clock of ``run`` (``clock``: seconds, e.g. ``time.perf_counter``)."""

    def __init__(self, run: TrainingRun, clock: Callable[[], float]) -> None:
        self.run = run
        self.clock = clock
        self.t_start: Optional[float] = None  # clock() when this run's training began
        self.before = 0.0  # budget seconds spent by earlier runs of this save dir
        self.wall = 0.0  # seconds spent, as last read

    def start(self) -> None:
        """Training begins: count from now, after what earlier runs spent."""
        self.t_start = self.clock()
        self.before = self.run.state.budget_wall_s
        self.wall = self.spent()

    def reached(self) -> bool:
        """Whether the budget is spent (reads the clock: call it at the same points on every rank)."""
        if self.run.opt.stop_time_hours <= 0:
            return False
        self.wall = self.spent()
        return self.wall >= self.run.opt.stop_time_hours * 3600

    def stop_message(self) -> str:
        opt = self.run.opt
        from nmtkit.train.checkpoints import saved_sizes

        return (f"reached --stop-time-hours {opt.stop_time_hours:g} ({self.wall / 3600:.3g} h in all; raise it and "
                f"rerun the command to continue); {saved_sizes(self.run.save_dir, self.run.written)}")

    def spent(self) -> float:
        """Wall seconds spent in the budget (0 without one): earlier, interrupted runs' time plus
        this run's, the main process's under torchrun."""
        if self.run.opt.stop_time_hours <= 0:
            return 0.0
        wall = self.local()
        if self.run.dist.enabled:
            wall = distmod.all_reduce_sum(wall if self.run.dist.is_main else 0.0, self.run.dist, self.run.device)
        return wall

    def local(self) -> float:
        """This process's count of the budget's wall seconds (what a checkpoint keeps)."""
        if self.t_start is None:  # not training yet
            return self.run.state.budget_wall_s
        return self.before + self.clock() - self.t_start

    def used(self, batch: int, epoch_batches: int) -> float:
        """The share (0..1) of the run's budget spent before batch ``batch`` of the current epoch:
        the largest of the wall-time (as last read), update and epoch shares that have a limit."""
        opt, st = self.run.opt, self.run.state
        used = 0.0
        if opt.stop_time_hours > 0:
            used = self.wall / (opt.stop_time_hours * 3600)
        if opt.max_update > 0:
            used = max(used, st.update / opt.max_update)
        if opt.max_epoch > 0:
            used = max(used, (st.epoch - 1 + batch / max(epoch_batches, 1)) / opt.max_epoch)
        return min(used, 1.0)
