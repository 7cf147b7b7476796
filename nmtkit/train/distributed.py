"""Multi-process training with torch.distributed (launched by ``torchrun``).

Every rank builds the same global batches (same seed) and takes its own slice of each batch,
so N processes with batch B see exactly the sentences one process would see in batch B.  The
loss of each rank is normalized by the *global* token count and multiplied by the world size,
which cancels DDP's gradient averaging: the summed gradient equals the single-process one.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import IO, Callable, Iterator, Optional

import torch
import torch.distributed as dist

from nmtkit.errors import NmtkitError


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


#: What ``init_process_group``'s ``env://`` rendezvous reads besides WORLD_SIZE and RANK.
RENDEZVOUS_VARIABLES = ("MASTER_ADDR", "MASTER_PORT")


def _env_int(name: str, default: str | None = None, minimum: int = 0) -> int:
    """An integer environment variable set by the launcher; a one-line error when it is not one."""
    value = os.environ.get(name, default)
    if value is None:
        raise NmtkitError(f"{name} is not set: WORLD_SIZE above 1 means a distributed run, which needs "
                          "WORLD_SIZE, RANK, MASTER_ADDR and MASTER_PORT (torchrun sets them)")
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or int(text) < minimum:
        raise NmtkitError(f"{name} must be an integer of at least {minimum} (as torchrun sets it), got {value!r}")
    return int(text)


def distributed_environment() -> tuple[int, int, int]:
    """(world size, rank, local rank) from the launcher's environment, checked; (1, 0, 0) alone."""
    world = _env_int("WORLD_SIZE", "1", minimum=1)
    if world == 1:
        return 1, 0, 0
    rank = _env_int("RANK")
    if rank >= world:
        raise NmtkitError(f"RANK {rank} is not below WORLD_SIZE {world}")
    local = _env_int("LOCAL_RANK", str(rank))
    for name in RENDEZVOUS_VARIABLES:
        if not os.environ.get(name, "").strip():
            _env_int(name)  # the "is not set" error
    if not 1 <= _env_int("MASTER_PORT") <= 65535:
        raise NmtkitError(f"MASTER_PORT must be a port number (1-65535), got {os.environ['MASTER_PORT']!r}")
    return world, rank, local


#: Seconds every process waits for the others, when joining and in each collective operation
#: (``--dist-timeout``): torch's own default for gloo.
DEFAULT_DIST_TIMEOUT_S = 1800.0


def init_distributed(device_kind: str, timeout_s: float = DEFAULT_DIST_TIMEOUT_S,
                     announce: Optional[Callable[[str], None]] = None) -> DistInfo:
    """Join the process group when launched by torchrun (WORLD_SIZE > 1), else a single process.

    The processes named by WORLD_SIZE must all join within ``timeout_s`` (``--dist-timeout``),
    else one line says so (one that never comes was a silent wait forever); ``announce`` tells
    the user what is awaited.  While joining, SIGINT and SIGTERM take their default action: the
    wait for the other ranks is in C++, where a Python handler (the command's
    SIGTERM-as-interrupt) never runs, so a rank whose peers never come could not be stopped but
    by SIGKILL.  Nothing is written before this point."""
    world, rank, local = distributed_environment()
    if world == 1:
        return DistInfo()
    backend = "nccl" if device_kind == "cuda" else "gloo"
    if not dist.is_initialized():
        where = f"{os.environ['MASTER_ADDR'].strip()}:{os.environ['MASTER_PORT'].strip()}"
        if announce is not None:
            announce(f"rank {rank}: waiting up to {timeout_s:g} s (--dist-timeout) for the {world} processes of "
                     f"WORLD_SIZE to join at {where}")
        try:
            with _default_signals(), _native_stderr_held() as held:
                dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout_s))
            sys.stderr.write(held.read())  # what the join logged, once it succeeded
        except (RuntimeError, TimeoutError) as exc:  # DistStoreError (a timeout, a refused connection) is one
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise NmtkitError(f"rank {rank} of WORLD_SIZE {world}: the processes did not all join at {where} within "
                              f"--dist-timeout {timeout_s:g} s ({first}); start every process (torchrun "
                              "--nproc-per-node), or raise --dist-timeout") from None
    if device_kind == "cuda":
        torch.cuda.set_device(local)
    return DistInfo(rank=rank, world_size=world, local_rank=local)


@contextlib.contextmanager
def _native_stderr_held() -> Iterator[IO[str]]:
    """File descriptor 2 goes to a temporary file within the block, which is yielded (read it
    after the block).  Why: a failed join makes torch's C++ side log the exception with some
    sixty stack frames straight to fd 2, where the one-line error should stand alone."""
    sys.stderr.flush()
    held = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
    saved = os.dup(2)
    os.dup2(held.fileno(), 2)
    try:
        yield held
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        held.seek(0)


@contextlib.contextmanager
def _default_signals() -> Iterator[None]:
    """SIGINT and SIGTERM at their default action within the block (main thread; else a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_DFL) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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
