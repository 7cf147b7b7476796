"""CUDA graphs of the teacher-forced step loop (nmtkit.models.loop_graphs).

On the CPU, the bucket padding is checked with an eager stand-in for the capture: every Luong
attention variant with input feeding and RNNsearch give the same logits and gradients padded
as unpadded.  On a CUDA GPU the real graphs are checked against the eager loop: exactly equal
in float32 where the batch already has a bucket's shape, within bf16 tolerance under autocast,
over several updates and two interleaved shapes (the graphs share one memory pool)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from nmtkit.models.loop_graphs import LoopGraphs, LoopSpec, _Loop, round_up
from tests.helpers import make_batch, random_sentences, tiny_model

torch.set_num_threads(1)

FEED_VARIANTS = [dict(attention=a, score=s) for a in ("global", "local-m", "local-p")
                 for s in ("dot", "general", "concat", "location")]
ARCHS = [("luong_tiny", v) for v in FEED_VARIANTS] + [
    ("luong_tiny", dict(encoder_bidirectional=True, attention="local-p")),
    ("rnnsearch_tiny", {}),
]


class EagerStandIn(LoopGraphs):
    """Pads and cuts exactly as :class:`LoopGraphs` does, but runs the loop eagerly (no CUDA)."""

    def __init__(self) -> None:
        super().__init__(batch_step=8, length_step=8)
        self.captures = 0

    @staticmethod
    def applies(x: torch.Tensor) -> bool:
        return torch.is_grad_enabled()

    def _capture(self, owner: nn.Module, method: str, args: tuple) -> nn.Module:
        self.captures += 1
        return _Loop(owner, method)


def _batch(seed: int, n: int = 5, vocab: int = 40, longest: int = 9):
    """``n`` random pairs, sources of 1..longest words and targets of 1..7 (</s> added to each)."""
    gen = torch.Generator().manual_seed(seed)
    src = random_sentences(gen, [1 + (3 * i + seed) % longest for i in range(n)], vocab)
    tgt = random_sentences(gen, [1 + (5 * i + seed) % 7 for i in range(n)], vocab)
    return make_batch(src, tgt)


def _logits_and_grads(model: nn.Module, batch) -> tuple[torch.Tensor, dict]:
    src, lengths, prev, target = batch
    model.zero_grad(set_to_none=True)
    logits, _ = model(src, lengths, prev)
    loss = nn.functional.cross_entropy(logits.float().flatten(0, 1), target.flatten(), ignore_index=0)
    loss.backward()
    return logits.detach(), {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


def test_round_up() -> None:
    assert [round_up(n, 8) for n in (1, 7, 8, 9, 16)] == [8, 8, 8, 16, 16]


@pytest.mark.parametrize("arch,overrides", ARCHS, ids=lambda v: str(v))
def test_padded_loop_matches_the_plain_loop(arch: str, overrides: dict) -> None:
    model = tiny_model(arch, dropout=0.0, **overrides).train()
    batch = _batch(seed=3)
    ref_logits, ref_grads = _logits_and_grads(model, batch)
    model.loop_graphs = stand_in = EagerStandIn()
    logits, grads = _logits_and_grads(model, batch)
    assert stand_in.captures == 1 and stand_in.replays == 1
    torch.testing.assert_close(logits, ref_logits, atol=1e-5, rtol=1e-5)
    assert grads.keys() == ref_grads.keys()
    for k in grads:
        torch.testing.assert_close(grads[k], ref_grads[k], atol=1e-5, rtol=1e-4, msg=k)


def test_shapes_in_one_bucket_share_a_capture_and_evaluation_stays_eager() -> None:
    model = tiny_model("luong_tiny", dropout=0.0).train()
    model.loop_graphs = stand_in = EagerStandIn()
    for seed in (1, 2, 3):
        _logits_and_grads(model, _batch(seed, n=5, longest=6))
    assert stand_in.captures == 1 and stand_in.replays == 3  # 5 rows, lengths up to 7 and 8: one bucket
    with torch.no_grad():
        src, lengths, prev, _ = _batch(4)
        model(src, lengths, prev)
    assert stand_in.replays == 3


def test_a_full_cache_runs_new_shapes_eagerly() -> None:
    model = tiny_model("luong_tiny", dropout=0.0).train()
    model.loop_graphs = stand_in = EagerStandIn()
    stand_in.max_shapes = 1
    _logits_and_grads(model, _batch(1, n=5))
    _logits_and_grads(model, _batch(1, n=12))
    assert stand_in.captures == 1 and stand_in.eager_calls == 1


def test_spec_names_each_dimension() -> None:
    spec = LoopSpec(inputs=(("B", "T", None), ("B", "S")), outputs=(("B", "T", None),), mask=1)
    graphs = LoopGraphs(batch_step=4, length_step=8)
    sizes = graphs._sizes(spec, (torch.zeros(3, 5, 2), torch.ones(3, 9, dtype=torch.bool)))
    assert sizes == {"B": 3, "T": 5, "S": 9}
    assert graphs._padded(sizes) == {"B": 4, "T": 8, "S": 16}
    mask = graphs._pad_mask(torch.ones(3, 9, dtype=torch.bool), graphs._padded(sizes))
    assert mask.shape == (4, 16) and mask[3].tolist() == [True] + [False] * 15 and not mask[:3, 9:].any()


def test_cuda_graphs_need_cuda(data_dir, tmp_path) -> None:
    from rich.console import Console

    from nmtkit.errors import NmtkitError
    from nmtkit.train import distributed as distmod
    from nmtkit.train.options import resolve_train_options
    from nmtkit.train.trainer import Trainer

    opt = resolve_train_options(str(data_dir), {"arch": "luong_tiny", "device": "cpu", "cuda_graphs": True,
                                                "save_dir": str(tmp_path / "ck"), "no_progress": True})
    with pytest.raises(NmtkitError, match="--cuda-graphs needs a CUDA device"):
        Trainer(opt, {}, Console(stderr=True), distmod.DistInfo())
    with pytest.raises(NmtkitError, match="not with distributed training"):
        Trainer(opt, {}, Console(stderr=True), distmod.DistInfo(rank=0, world_size=2))
    opt.update_freq = 2
    with pytest.raises(NmtkitError, match="not with --update-freq above 1"):
        Trainer(opt, {}, Console(stderr=True), distmod.DistInfo())


# -- on a CUDA GPU --------------------------------------------------------------------------
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_a_transformer_is_refused_cuda_graphs_in_one_line_for_training_and_translation(data_dir, tmp_path) -> None:
    # it has no step loop to replay, and its key/value cache grows every step (no fixed-shape search);
    # the checks come after the device's, so they are called here as on a CUDA device
    from nmtkit.errors import NmtkitError
    from nmtkit.generate.bundle import check_graphed_search
    from nmtkit.generate.ensemble import EnsembleModel
    from nmtkit.train.options import resolve_train_options
    from nmtkit.train.run import _use_cuda_graphs

    transformer, luong = tiny_model("transformer_test"), tiny_model("luong_tiny")
    opt = resolve_train_options(str(data_dir), {"arch": "transformer_test", "cuda_graphs": True,
                                                "save_dir": str(tmp_path / "ck")})
    with pytest.raises(NmtkitError, match=r"transformer_test \(transformer\) has none \(it trains all target positions"):
        _use_cuda_graphs(opt, transformer, "transformer", torch.device("cuda"))
    for members in ([transformer], [luong, transformer]):
        with pytest.raises(NmtkitError, match=r"which transformer does not have \(its state grows every step\)") as refusal:
            check_graphed_search(EnsembleModel(members))
        assert "\n" not in str(refusal.value)
    check_graphed_search(EnsembleModel([luong]))  # a recurrent model's state is of fixed size


def _cuda_batch(seed: int, n: int, vocab: int = 40):
    return tuple(t.cuda() for t in _batch(seed, n=n, vocab=vocab))


@cuda
@pytest.mark.parametrize("arch,overrides", [ARCHS[0], ARCHS[6], ARCHS[-2], ARCHS[-1]], ids=lambda v: str(v))
def test_graphs_equal_eager_in_float32_at_a_bucket_shape(arch: str, overrides: dict) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    model = tiny_model(arch, dropout=0.0, **overrides).cuda().train()
    src, lengths, prev, target = _cuda_batch(5, n=8)
    # widen to bucket shapes (8 rows, lengths 16): the graph then sees exactly the eager shapes
    src = nn.functional.pad(src, (0, 16 - src.size(1)))
    prev, target = (nn.functional.pad(x, (0, 16 - x.size(1))) for x in (prev, target))
    ref_logits, ref_grads = _logits_and_grads(model, (src, lengths, prev, target))
    model.loop_graphs = LoopGraphs(batch_step=8, length_step=16)
    for _ in range(2):  # the capture, then a replay
        logits, grads = _logits_and_grads(model, (src, lengths, prev, target))
        torch.testing.assert_close(logits, ref_logits, atol=0, rtol=0)
        for k in grads:
            torch.testing.assert_close(grads[k], ref_grads[k], atol=0, rtol=0, msg=k)


@cuda
@pytest.mark.parametrize("amp", [None, torch.bfloat16])
@pytest.mark.parametrize("arch", ["luong_tiny", "rnnsearch_tiny"])
def test_graphed_training_follows_eager_over_interleaved_shapes(arch: str, amp) -> None:
    batches = [_cuda_batch(s, n=n) for s, n in ((1, 5), (2, 13), (3, 6), (4, 12))]  # buckets of 8 and 16 rows, interleaved
    runs = []
    for graphed in (False, True):
        model = tiny_model(arch, dropout=0.0).cuda().train()
        if graphed:
            model.loop_graphs = LoopGraphs(batch_step=8, length_step=8)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        losses = []
        for src, lengths, prev, target in batches * 2:
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=amp or torch.float32, enabled=amp is not None):
                logits, _ = model(src, lengths, prev)
            loss = nn.functional.cross_entropy(logits.float().flatten(0, 1), target.flatten(), ignore_index=0)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        runs.append(losses)
        if graphed:
            assert len(model.loop_graphs.graphs) >= 2
    tol = 1e-4 if amp is None else 3e-2
    torch.testing.assert_close(torch.tensor(runs[1]), torch.tensor(runs[0]), atol=tol, rtol=tol)


@cuda
def test_dropout_differs_between_replays() -> None:
    model = tiny_model("luong_tiny", dropout=0.3).cuda().train()
    model.loop_graphs = LoopGraphs(batch_step=8, length_step=8)
    src, lengths, prev, _ = _cuda_batch(1, n=5)
    a = model(src, lengths, prev)[0].detach().clone()
    b = model(src, lengths, prev)[0].detach().clone()
    assert not torch.equal(a, b)
