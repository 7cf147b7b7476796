"""Token-level cross-entropy with optional label smoothing, summed (callers normalize)."""
from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from nmtkit.data.dictionary import PAD_ID


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
