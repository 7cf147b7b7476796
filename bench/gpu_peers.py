"""The GPU peers of ``bench/gpu_speed.py``: Luong et al.'s 4 x 1000 model written the way a plain
PyTorch user would, to put nmtkit's training throughput beside.

* :class:`PlainLuong` with ``feed=True``: the peer baseline.  A cuDNN ``nn.LSTM`` encoder, an
  ``nn.LSTMCell`` stack stepped once per target position with input feeding, global ``general``
  attention, the attentional state ``tanh(W_c [c; h])``, dropout 0.2.  This is the shape of
  fairseq's ``lstm_luong_wmt_en_de`` (which also steps ``LSTMCell`` s in Python), standing in for
  it because fairseq 0.12.2 cannot be taken to the GPU machine (bench/README.md, "GPU").
* ``feed=False``: the ceiling a stepped decoder can approach.  Without input feeding the decoder
  is one cuDNN ``nn.LSTM`` call over the whole target, and attention reads all steps at once.

nmtkit's ``luong_wmt_en_de`` uses local-p attention, which adds a position predictor and a
Gaussian per step; the peers use global attention, slightly less work per step.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class PlainLuong(nn.Module):
    """The peer model (see the module docstring)."""

    def __init__(self, src_vocab: int, tgt_vocab: int, dim: int = 1000, layers: int = 4, dropout: float = 0.2,
                 feed: bool = True) -> None:
        super().__init__()
        self.feed = feed
        self.src_embed = nn.Embedding(src_vocab, dim, padding_idx=0)
        self.tgt_embed = nn.Embedding(tgt_vocab, dim, padding_idx=0)
        self.encoder = nn.LSTM(dim, dim, layers, batch_first=True, dropout=dropout)
        if feed:
            self.cells = nn.ModuleList(nn.LSTMCell(2 * dim if i == 0 else dim, dim) for i in range(layers))
        else:
            self.decoder = nn.LSTM(dim, dim, layers, batch_first=True, dropout=dropout)
        self.W_a = nn.Linear(dim, dim, bias=False)
        self.W_c = nn.Linear(2 * dim, dim, bias=False)
        self.out = nn.Linear(dim, tgt_vocab)
        self.drop = nn.Dropout(dropout)
        for p in self.parameters():
            nn.init.uniform_(p, -0.1, 0.1)

    def forward(self, src: Tensor, src_lengths: Tensor, prev: Tensor) -> Tensor:
        packed = pack_padded_sequence(self.drop(self.src_embed(src)), src_lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        out, (h, c) = self.encoder(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        mask = src.ne(0)
        keys = self.W_a(states)
        emb = self.drop(self.tgt_embed(prev))
        if not self.feed:
            top, _ = self.decoder(emb, (h, c))
            scores = torch.bmm(top, keys.transpose(1, 2)).masked_fill(~mask[:, None, :], float("-inf"))
            context = torch.bmm(scores.softmax(-1), states)
            return self.out(self.drop(torch.tanh(self.W_c(torch.cat([context, top], -1)))))
        hs, cs = list(h.unbind(0)), list(c.unbind(0))
        feed = states.new_zeros(src.size(0), states.size(-1))
        outs = []
        for emb_t in emb.unbind(1):
            x = torch.cat([emb_t, feed], 1)
            for i, cell in enumerate(self.cells):
                hs[i], cs[i] = cell(x, (hs[i], cs[i]))
                x = self.drop(hs[i]) if i < len(self.cells) - 1 else hs[i]
            scores = torch.bmm(keys, x.unsqueeze(2)).squeeze(2).masked_fill(~mask, float("-inf"))
            context = torch.bmm(scores.softmax(-1).unsqueeze(1), states).squeeze(1)
            feed = torch.tanh(self.W_c(torch.cat([context, x], 1)))
            outs.append(feed)
        return self.out(self.drop(torch.stack(outs, 1)))


class PlainTrainer:
    """One update of a :class:`PlainLuong`: Adam, token-averaged cross-entropy, clipping at 5."""

    def __init__(self, model: PlainLuong, amp: str, device: str = "cuda") -> None:
        self.model = model.to(device).train()
        self.amp, self.device = amp, device
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def step(self, batch) -> int:  # noqa: ANN001 - an nmtkit Batch on the GPU
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(self.device, dtype=torch.bfloat16, enabled=self.amp == "bf16"):
            logits = self.model(batch.src_tokens, batch.src_lengths, batch.prev_output_tokens)
        loss = nn.functional.cross_entropy(logits.float().flatten(0, 1), batch.target.flatten(), ignore_index=0)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)
        self.opt.step()
        return int(batch.ntokens)
