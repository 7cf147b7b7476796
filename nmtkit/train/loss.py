"""Token-level cross-entropy with optional label smoothing, summed (callers normalize)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from nmtkit.data.dictionary import PAD_ID
from nmtkit.models import gemm

if TYPE_CHECKING:
    from nmtkit.data.dataset import Batch
    from nmtkit.models.base import Seq2SeqModel


class _SmoothedCrossEntropy(torch.autograd.Function):
    """(label-smoothed loss sum, NLL sum) over the real rows of ``logits`` ``[N, V]``, with the
    gradient written directly as ``softmax - smoothed one-hot``.

    Why: autograd's version of the same sum (``log_softmax``, ``gather``, ``mean``, masks) makes its
    backward pass build the gradient of each piece over the whole ``[N, V]`` (a zero-filled buffer
    for ``gather``, an expanded one for ``mean``, their sum, then ``log_softmax``'s backward): about
    four more passes over the largest tensor of a training step than the closed form.  The forward
    is the same computation in float32; the saved log-probabilities become the gradient in place.
    """

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:  # noqa: ANN001
        lprobs = torch.log_softmax(logits.float(), dim=-1)
        real = target != PAD_ID
        zero = lprobs.new_zeros(())
        nll_sum = -torch.where(real, lprobs.gather(1, target.unsqueeze(1)).squeeze(1), zero).sum()
        loss = nll_sum.clone()  # two outputs, two tensors (autograd fills one gradient per tensor)
        if smoothing > 0:
            loss = (1.0 - smoothing) * nll_sum - smoothing * torch.where(real, lprobs.mean(dim=-1), zero).sum()
        ctx.save_for_backward(lprobs, target, real)
        ctx.smoothing, ctx.in_dtype, ctx.used = smoothing, logits.dtype, False
        return loss, nll_sum

    @staticmethod
    @once_differentiable
    def backward(ctx, g_loss: Tensor, g_nll: Tensor) -> tuple[Tensor, None, None]:  # noqa: ANN001
        if ctx.used:  # the saved log-probabilities were turned into the first backward's gradient
            raise RuntimeError("a second backward through sequence_loss is not supported (retain_graph)")
        ctx.used = True
        lprobs, target, real = ctx.saved_tensors
        eps = ctx.smoothing
        # d loss / d logits = softmax - (1 - eps) onehot - eps / V; d nll / d logits = softmax - onehot;
        # padded rows get 0 through per-row factors (no pass of its own, no host sync on a GPU)
        row = real.unsqueeze(1).to(lprobs.dtype)  # [N, 1]
        grad, scale = lprobs.exp_(), row * (g_loss + g_nll)
        if eps > 0:  # scale * softmax - eps / V in one pass
            torch.addcmul(row * -(g_loss * (eps / lprobs.size(1))), grad, scale, out=grad)
        else:
            grad.mul_(scale)
        grad.scatter_add_(1, target.unsqueeze(1), row * -(g_loss * (1.0 - eps) + g_nll))
        return grad.to(ctx.in_dtype), None, None


def sequence_loss(logits: Tensor, target: Tensor, label_smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
    """Return (training loss summed over real tokens, NLL summed over real tokens).

    The NLL (without smoothing) is what perplexity is computed from, so validation numbers
    stay comparable whatever smoothing was used in training.  Smoothing spreads
    ``label_smoothing`` of each token's mass uniformly over the vocabulary (its loss term is the
    mean negative log-probability of a row).
    """
    return _SmoothedCrossEntropy.apply(logits.reshape(-1, logits.size(-1)), target.reshape(-1), float(label_smoothing))


#: Elements of one chunk's ``[rows, V]`` logits in :func:`output_layer_loss` (8 MB in float32):
#: small enough to stay in a core's cache between its passes, large enough for full-speed products.
CHUNK_ELEMENTS = 2 ** 21
#: The fewest rows of a chunk whatever the vocabulary: every float32 chunk adds its product into
#: the ``[V, F]`` weight gradient, a pass over it that must stay small beside the chunk's products.
#: At V = 32k, F = 512, 2,000 rows (Intel host, one thread, forward and backward): 1,542 ms with
#: this floor, 1,947 ms with 64-row chunks, 1,693 ms for sequence_loss of the whole logits.
MIN_CHUNK_ROWS = 256


def loss_from_features(model: "Seq2SeqModel", device: torch.device) -> bool:
    """Whether :func:`teacher_forced_loss` computes ``model``'s loss by :func:`output_layer_loss`:
    on the CPU, where it was measured (a GPU keeps :func:`sequence_loss` of the whole logits,
    unmeasured there), for a model whose output layer is an ``nn.Linear`` over its features."""
    return device.type == "cpu" and model.trains_from_features()


def teacher_forced_loss(call: Callable[..., tuple[Tensor, Optional[Tensor]]], model: "Seq2SeqModel", batch: "Batch",
                        label_smoothing: float = 0.0, need_attention: bool = False
                        ) -> tuple[Tensor, Tensor, Optional[Tensor]]:
    """(loss sum, NLL sum, attention or None) of ``model`` on ``batch``, teacher-forced, the one
    way training and validation compute it: from the features where :func:`loss_from_features`
    (never holding the ``[N, V]`` logits), else from the logits.  ``call``: the model itself or
    its DistributedDataParallel wrapper (which must see the call); run it under the autocast
    wanted: the chunked loss makes its products in the autocast type, as the output layer would."""
    from_features = loss_from_features(model, batch.target.device)
    # features_only only where asked: a model that overrides forward need not take it
    out, attn = call(batch.src_tokens, batch.src_lengths, batch.prev_output_tokens, need_attention=need_attention,
                     **({"features_only": True} if from_features else {}))
    if from_features:
        loss, nll = output_layer_loss(out, model.output_projection, batch.target, label_smoothing)
    else:
        with torch.autocast(out.device.type, enabled=False):  # as before: float32, outside autocast
            loss, nll = sequence_loss(out, batch.target, label_smoothing)
    return loss, nll, attn


def output_layer_loss(features: Tensor, layer: torch.nn.Linear, target: Tensor,
                      label_smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
    """:func:`sequence_loss` of ``layer(features)`` (the model's output layer), without holding the
    float32 ``[N, V]`` logits and their gradient: (loss sum, NLL sum), the same values and
    gradients.

    Why: on the CPU the largest tensors of a training step are the output layer's logits and their
    gradient (``[N, V]`` floats, beyond every cache), and each of the ten or so passes over them
    (bias, product, float cast, log-softmax, exp, scale, cast back, two gradient products) runs at
    memory speed.  Here the rows go through in chunks that stay in the cache, and each chunk's
    gradient contributions (the softmax times the weight, its transpose times the features, its
    column sums) are made in the forward pass, while the chunk is at hand; the backward pass only
    combines them with the incoming scalars.  On the Intel host measured (3,200 rows, V 7,969,
    one thread, float32) the forward and backward of the output layer and loss took 289 ms
    against 407 ms.  Under autocast the products run in its type, as ``F.linear``'s would, and
    the log-softmax in float32, as :func:`sequence_loss`'s; there the softmax of every row is
    kept in the autocast type (``[N, V]`` at half the bytes) for one product per gradient.
    Without gradients (validation) only the loss is computed."""
    flat = features.reshape(-1, features.size(-1))
    # inside the Function the grad mode is always off, and its needs_input_grad follows only the
    # inputs' requires_grad: validation (no_grad, inference_mode) must say it wants no gradients
    return _OutputLayerLoss.apply(flat, layer.weight, layer.bias, target.reshape(-1), float(label_smoothing),
                                  torch.is_grad_enabled())


class _OutputLayerLoss(torch.autograd.Function):
    """The chunked output layer and loss of :func:`output_layer_loss`.

    The gradient of the logits is ``a softmax - b onehot - c / V`` row by row, with ``a, b, c``
    known only in the backward pass (``g_loss + g_nll``, ``g_loss (1 - eps) + g_nll``,
    ``g_loss eps``); every gradient is linear in it, so the forward pass keeps the softmax's
    three products and the backward pass adds the (cheap) one-hot and uniform terms."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Optional[Tensor], target: Tensor, smoothing: float,  # noqa: ANN001
                grad_enabled: bool) -> tuple[Tensor, Tensor]:
        kind = x.device.type
        dtype = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else x.dtype
        real = (target != PAD_ID).nonzero().squeeze(1)
        tgt = target.index_select(0, real)
        needs = ctx.needs_input_grad if grad_enabled else (False,) * 3
        with torch.autocast(kind, enabled=False), torch.no_grad():
            xs = x.index_select(0, real).to(dtype)
            w = weight.to(dtype)
            b = None if bias is None else bias.to(dtype)
            n, vocab = xs.size(0), w.size(0)
            acc = torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype
            gx = xs.new_empty(n, xs.size(1)) if needs[0] else None
            gw = torch.zeros(vocab, w.size(1), dtype=acc, device=x.device) if needs[1] else None
            gb = torch.zeros(vocab, dtype=acc, device=x.device) if bias is not None and needs[2] else None
            nll = torch.zeros((), dtype=acc, device=x.device)
            mean_lp = torch.zeros((), dtype=acc, device=x.device)
            rows = max(1, min(n, max(MIN_CHUNK_ROWS, CHUNK_ELEMENTS // max(vocab, 1))))
            # one buffer for every chunk's logits (a fresh [rows, V] each chunk costs page faults),
            # and one for their float32 copy under autocast
            buf = xs.new_empty(rows, vocab)
            buf_acc = buf if acc == dtype else buf.new_empty(rows, vocab, dtype=acc)
            grads = gx is not None or gw is not None or gb is not None
            # under autocast the softmax of every chunk is kept in the autocast type ([N, V] at
            # half the bytes) and multiplied once: one product per gradient, each accumulating in
            # float32 inside, instead of a product and a float32 addition of [V, F] per chunk
            low = xs.new_empty(n, vocab) if acc != dtype and (gx is not None or gw is not None) else None
            for s in range(0, n, rows):
                xc, tc = xs[s:s + rows], tgt[s:s + rows]
                m = xc.size(0)
                logits = gemm.product(xc, w, b, out=buf[:m])
                lp = logits if acc == dtype else buf_acc[:m].copy_(logits)
                torch.log_softmax(lp, dim=-1, out=lp)
                nll -= lp.gather(1, tc.unsqueeze(1)).sum()
                if smoothing > 0:
                    mean_lp += lp.mean(dim=-1).sum()
                if not grads:
                    continue
                p = lp.exp_()  # the softmax
                if gb is not None:
                    gb += p.sum(0)
                if low is not None:  # the products come after the loop, in the autocast type
                    low[s:s + m].copy_(p)
                    continue
                if gx is not None:
                    gemm.product(p, w.t(), None, out=gx[s:s + m])
                if gw is not None:
                    if gemm.ENABLED:
                        gw += gemm.product(p.t(), xc.t(), None)
                    else:
                        gw.addmm_(p.t(), xc)  # accumulated inside the product (MKL)
            if low is not None and n:
                if gx is not None:
                    gemm.product(low, w.t(), None, out=gx)
                if gw is not None:
                    gw.copy_(gemm.product(low.t(), xs.t(), None))
        loss = nll.clone()
        if smoothing > 0:
            loss = (1.0 - smoothing) * nll - smoothing * mean_lp
        ctx.save_for_backward(xs, w, real, tgt, *(t for t in (gx, gw, gb) if t is not None))
        ctx.parts = (gx is not None, gw is not None, gb is not None)
        ctx.smoothing, ctx.rows, ctx.x_dtype, ctx.used = smoothing, x.size(0), x.dtype, False
        ctx.acc, ctx.weight_dtype = acc, weight.dtype
        ctx.bias_dtype = None if bias is None else bias.dtype
        return loss, nll

    @staticmethod
    @once_differentiable
    def backward(ctx, g_loss: Tensor, g_nll: Tensor) -> tuple[Optional[Tensor], ...]:  # noqa: ANN001
        if ctx.used:  # the saved products were scaled in place into the first backward's gradients
            raise RuntimeError("a second backward through output_layer_loss is not supported (retain_graph)")
        ctx.used = True
        xs, w, real, tgt, *parts = ctx.saved_tensors
        it = iter(parts)
        gx, gw, gb = (next(it) if present else None for present in ctx.parts)
        eps = ctx.smoothing
        a = g_loss + g_nll                        # of the softmax
        b = g_loss * (1.0 - eps) + g_nll          # of the one-hot target
        c = g_loss * (eps / w.size(0))            # of the uniform 1/V (smoothing)
        grad_x = grad_w = grad_b = None
        acc = ctx.acc  # float32 under autocast, else the features' own type
        if gx is not None:
            rows = gx.to(acc) * a - w.index_select(0, tgt).to(acc) * b
            if eps > 0:
                rows -= c * w.to(acc).sum(0)
            grad_x = rows.new_zeros(ctx.rows, rows.size(1)).index_copy_(0, real, rows).to(ctx.x_dtype)
        if gw is not None:
            xa = xs.to(acc)
            grad_w = gw.mul_(a)
            grad_w.index_add_(0, tgt, xa * -b)
            if eps > 0:
                grad_w -= c * xa.sum(0)
            grad_w = grad_w.to(ctx.weight_dtype)
        if gb is not None:
            counts = torch.bincount(tgt, minlength=gb.size(0)).to(gb.dtype)
            grad_b = gb.mul_(a).sub_(counts * b)
            if eps > 0:
                grad_b -= c * tgt.numel()
            grad_b = grad_b.to(ctx.bias_dtype)
        return grad_x, grad_w, grad_b, None, None, None
