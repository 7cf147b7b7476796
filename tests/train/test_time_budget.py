"""--stop-time-hours on a simulated clock: each update and each validation advance it by a set
number of seconds, so the tests say exactly where a run stops without timing anything."""
from __future__ import annotations

from pathlib import Path

import pytest

from nmtkit.checkpoint import load_checkpoint
from nmtkit.train.trainer import Trainer
from tests.helpers import run_train


class SimulatedClock:
    """A clock that moves only when training does: ``update_s`` per update, ``valid_s`` per validation."""

    def __init__(self, update_s: float, valid_s: float, start: float = 1000.0) -> None:
        self.now, self.update_s, self.valid_s = start, update_s, valid_s
        self.events: list[str] = []  # "u" per update, "v" per validation, in order

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """Installs a :class:`SimulatedClock` (set its speeds with ``clock.update_s`` / ``clock.valid_s``)."""
    sim = SimulatedClock(10.0, 100.0)
    real_init, real_step, real_validate = Trainer.__init__, Trainer.train_step, Trainer.validate

    def init(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        real_init(self, *args, **kwargs)
        self.clock = sim

    def step(self, group):  # noqa: ANN001, ANN202
        out = real_step(self, group)
        sim.now += sim.update_s
        sim.events.append("u")
        return out

    def validate(self):  # noqa: ANN001, ANN202
        out = real_validate(self)
        sim.now += sim.valid_s
        sim.events.append("v")
        return out

    monkeypatch.setattr(Trainer, "__init__", init)
    monkeypatch.setattr(Trainer, "train_step", step)
    monkeypatch.setattr(Trainer, "validate", validate)
    return sim


def train_budgeted(data: Path, save: Path, *extra: str):  # noqa: ANN201
    """``run_train`` at luong_tiny's own dropout (0.1), with no epoch limit (the time budget stops it)."""
    return run_train(data, save, "--dropout", "0.1", "--max-epoch", "0", *extra)


def spent(save: Path) -> float:
    return load_checkpoint(save / "checkpoint_last.pt")["train_state"]["state"]["budget_wall_s"]


def check_stop(clock: SimulatedClock, budget_s: float) -> None:
    """The budget's promise: no two validations in a row, and no more than one update plus one
    validation past the budget."""
    assert "vv" not in "".join(clock.events), clock.events
    used = clock.now - 1000.0
    assert budget_s <= used <= budget_s + clock.update_s + clock.valid_s, (used, clock.events)


@pytest.mark.parametrize("update_s,valid_s,interval", [(10.0, 100.0, 1), (10.0, 100.0, 0), (1.0, 50.0, 2), (40.0, 5.0, 0)])
def test_the_budget_holds_counting_validation(data_dir, tmp_path, clock, update_s, valid_s, interval):
    clock.update_s, clock.valid_s = update_s, valid_s
    res = train_budgeted(data_dir, tmp_path / "s", "--stop-time-hours", "0.05", "--validate-interval-updates", str(interval))
    assert res.exit_code == 0, res.output
    assert "reached --stop-time-hours 0.05" in res.output
    check_stop(clock, 180.0)
    assert spent(tmp_path / "s") == pytest.approx(clock.now - 1000.0)


def test_a_validation_that_spends_the_budget_is_the_last_thing_the_run_does(data_dir, tmp_path, clock):
    # 3 updates an epoch: epoch 1 ends at 30 s, its validation at 130 s, past the 120 s budget.
    # The run used to do one more update and validate again.
    res = train_budgeted(data_dir, tmp_path / "s", "--stop-time-hours", str(120 / 3600))
    assert res.exit_code == 0, res.output
    assert clock.events == ["u", "u", "u", "v"]
    state = load_checkpoint(tmp_path / "s" / "checkpoint_last.pt")["train_state"]["state"]
    assert (state["epoch"], state["batches_done"], state["update"]) == (2, 0, 3)
    assert "reached --stop-time-hours" in res.output


def test_an_interval_validation_at_the_budget_is_not_repeated(data_dir, tmp_path, clock):
    # update 1 at 10 s, its interval validation ends at 110 s, past the 60 s budget: stop on its scores
    res = train_budgeted(data_dir, tmp_path / "s", "--stop-time-hours", str(60 / 3600), "--validate-interval-updates", "1")
    assert res.exit_code == 0, res.output
    assert clock.events == ["u", "v"]
    save = tmp_path / "s"
    assert (save / "checkpoint_best.pt").exists()  # the one validation chose the best, as the end's would
    assert load_checkpoint(save / "checkpoint_last.pt")["train_state"]["state"]["update"] == 1


def test_on_resume_the_budget_is_the_total(data_dir, tmp_path, clock):
    save = tmp_path / "s"
    clock.valid_s = 5.0
    res = train_budgeted(data_dir, save, "--stop-time-hours", str(100 / 3600))
    assert res.exit_code == 0 and "reached --stop-time-hours" in res.output, res.output
    first = spent(save)
    assert 100 <= first <= 115
    # the same budget again: nothing left, said in one line, nothing trained
    clock.events.clear()
    res = train_budgeted(data_dir, save, "--stop-time-hours", str(100 / 3600))
    assert res.exit_code == 0 and "already reached --stop-time-hours" in res.output, res.output
    assert clock.events == [] and spent(save) == first
    # a raised budget gives the rest of it, not the whole of it again
    start = clock.now
    res = train_budgeted(data_dir, save, "--stop-time-hours", str(200 / 3600))
    assert res.exit_code == 0 and "resuming from" in res.output and "reached --stop-time-hours" in res.output, res.output
    assert 200 <= spent(save) <= 215
    assert clock.now - start == pytest.approx(spent(save) - first)


def test_an_interrupted_run_gets_the_rest(data_dir, tmp_path, clock):
    save = tmp_path / "s"
    clock.valid_s = 5.0
    res = train_budgeted(data_dir, save, "--max-update", "2", "--stop-time-hours", str(300 / 3600))  # 2 updates, 1 validation
    assert res.exit_code == 0, res.output
    assert spent(save) == 25.0
    res = train_budgeted(data_dir, save, "--stop-time-hours", str(300 / 3600))
    assert res.exit_code == 0 and "reached --stop-time-hours" in res.output, res.output
    check_stop(clock, 300.0)
