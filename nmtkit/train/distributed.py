"""Multi-process training with torch.distributed (launched by ``torchrun``).

Every rank builds the same global batches (same seed) and takes its own slice of each batch,
so N processes with batch B see exactly the sentences one process would see in batch B.  The
loss of each rank is normalized by the *global* token count and multiplied by the world size,
which cancels DDP's gradient averaging: the summed gradient equals the single-process one.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device_kind: str) -> DistInfo:
    """Join the process group when launched by torchrun (WORLD_SIZE > 1), else a single process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    backend = "nccl" if device_kind == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    if device_kind == "cuda":
        torch.cuda.set_device(local)
    return DistInfo(rank=rank, world_size=world, local_rank=local)


def all_reduce_sum(value: float, info: DistInfo, device: torch.device) -> float:
    if not info.enabled:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t.item())


def shard(indices: list[int], info: DistInfo) -> list[int]:
    return indices[info.rank :: info.world_size] if info.enabled else indices


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def cleanup(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
