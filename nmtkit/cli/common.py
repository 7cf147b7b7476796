"""What every subcommand shares: one-line errors and exit statuses; the console and device choice
live in ``nmtkit.utils`` (the library uses them too) and are re-exported here."""
from __future__ import annotations

import functools
import io
import os
import signal
import sys
import threading
from typing import Any, Callable, NoReturn, Optional

import click
import rich_click

from nmtkit.cli.config_file import (DUMP_CONFIG, EFFECTIVE_CONFIG, ConfigFileError, dump_config,  # noqa: F401
                                       effective_config, load_config, want_dump)
from nmtkit.cli.option_types import SEED, AtLeast, FiniteFloat, OneOf, Within  # noqa: F401 - the commands import them from here
from nmtkit.errors import NmtkitError
from nmtkit.utils.amp import AMP_CHOICES
from nmtkit.utils.console import console
from nmtkit.utils.device import parse_device
from nmtkit.utils.memory import allocation_failure_message, is_allocation_failure
from nmtkit.utils.signals import EXIT_INTERRUPT, sigterm_as_interrupt
from nmtkit.utils.stdio import STDOUT_NAME, use_utf8_stdio

__all__ = ["console", "parse_device", "handle_errors", "fail", "NmtkitCommand", "OneLineUsageError", "FiniteFloat",
           "exit_broken_pipe", "SEED", "AtLeast", "Within", "OneOf", "device_options",
           "batching_options", "search_options", "set_threads"]


#: Exit statuses, the same for every subcommand (documented in docs/guide/errors.md).
EXIT_ERROR = 1  # bad input, bad option values found after parsing, failed writes
EXIT_USAGE = 2  # a command line click cannot parse (unknown option, value out of range)
EXIT_BROKEN_PIPE = 141  # stdout closed by the reader (``| head``): 128 + SIGPIPE, as a shell reports it
# EXIT_INTERRUPT (130): Ctrl-C or SIGTERM, from nmtkit.utils.signals


def fail(prog: str, message: str) -> None:
    """Print ``prog: error: message`` on one line to stderr and exit with status 1."""
    message = " ".join(str(message).split("\n")).strip()
    click.echo(f"{prog}: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null so that the final flush at exit cannot fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # not a real file descriptor (tests capture stdout)


def exit_broken_pipe() -> NoReturn:
    """The reader of stdout went away (``| head``): end quietly with status 141, as a shell reports
    SIGPIPE (the exit-status table of docs/guide/errors.md), whichever part of a command was printing."""
    _stdout_to_devnull()
    sys.exit(EXIT_BROKEN_PIPE)


def _ignore_sigxfsz() -> None:
    """Past ``ulimit -f`` the kernel sends SIGXFSZ, whose default action kills the process with a
    core dump, no message and temporary files left behind.  Ignored, the write fails with EFBIG
    and is reported like any failed write (``PATH: File too large``).  CPython ignores it at
    startup already, but not when embedded without its signal handlers: this does not rely on it."""
    sig = getattr(signal, "SIGXFSZ", None)  # not on Windows
    if sig is not None and threading.current_thread() is threading.main_thread():
        signal.signal(sig, signal.SIG_IGN)


def _stdout_failed() -> bool:
    """Flush stdout; if that fails (a full disk, /dev/full), point it at /dev/null so that
    Python's own flush at exit cannot print "Exception ignored" noise, and say so."""
    try:
        sys.stdout.flush()
        return False
    except (OSError, ValueError, AttributeError):
        _stdout_to_devnull()
        return True


def handle_errors(prog: str) -> Callable:
    """Decorator turning errors into one line and a documented exit status, never a traceback.

    :class:`NmtkitError`, any OSError and a failed allocation: ``prog: error: ...``, status 1; Ctrl-C and
    SIGTERM (:func:`~nmtkit.utils.signals.sigterm_as_interrupt`, so cleanups run): status 130;
    a reader that closed our stdout: status 141, silently.  An OSError without a file name
    that stdout cannot be flushed after came from stdout and is reported as ``<stdout>: ...``.
    The standard streams are UTF-8 (:func:`~nmtkit.utils.stdio.use_utf8_stdio`).
    """

    def deco(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _ignore_sigxfsz()
            use_utf8_stdio()
            try:
                with sigterm_as_interrupt():
                    result = fn(*args, **kwargs)
                sys.stdout.flush()  # a closed pipe or a full disk shows here, not in Python's shutdown
                return result
            except NmtkitError as exc:
                _stdout_failed()
                fail(prog, str(exc))
            except BrokenPipeError:
                exit_broken_pipe()
            except KeyboardInterrupt:
                _stdout_failed()
                click.echo(f"{prog}: interrupted", err=True)
                sys.exit(EXIT_INTERRUPT)
            except OSError as exc:
                reason = exc.strerror or str(exc) or type(exc).__name__
                stdout_failed = _stdout_failed()  # always: a failed stdout must not fail again at exit
                name = exc.filename or (STDOUT_NAME if stdout_failed else None)
                fail(prog, f"{name}: {reason}" if name else reason)
            except (MemoryError, RuntimeError) as exc:
                # the steps that allocate by an option's size name it (nmtkit.utils.memory); this
                # catches the rest, still one line
                if not is_allocation_failure(exc):
                    raise
                _stdout_failed()
                fail(prog, f"out of memory: {allocation_failure_message(exc)}")

        return wrapper

    return deco


def run_console_script(command: click.Command) -> None:
    """A console script's entry point: run ``command``, then end the process without Python's
    interpreter teardown.

    Why: with torch and a model loaded, freeing every module at exit took a sizeable share of a
    short command (bench/README.md).  Nothing is skipped that matters: the command
    has flushed stdout and closed its outputs (:func:`handle_errors`, atomic writes), ``atexit``
    handlers still run here, and the Python streams (current and original) and C's stdio are
    flushed before ``os._exit``.  Exit statuses are the interpreter's: ``sys.exit(None)`` 0, an
    int its low byte (what a parent sees anyway), anything else printed and 1.
    A live non-daemon thread (which the interpreter would wait for) gets the ordinary exit.
    Tests call ``command`` through click's runner, not this, so a test process is never ended."""
    import atexit

    try:
        command()
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)  # a thread the interpreter would wait for: leave the ordinary way
    atexit._run_exitfuncs()
    # the streams in use, the interpreter's originals (use_utf8_stdio may have replaced them) and
    # C's stdio (oneDNN's or MKL's verbose output), as the interpreter's own exit would flush them
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError, AttributeError):
            pass  # a reader that went away: handle_errors flushed stdout already and chose the status
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass  # no C library to ask (not on Linux or macOS)
    os._exit(code & 0xFF)  # what the parent sees of any status; os._exit refuses ints beyond a C int


class OneLineUsageError(click.UsageError):
    """A click usage error shown as ``prog: error: message`` on one line (exit status 2)."""

    def __init__(self, message: str, prog: str, ctx: click.Context | None = None) -> None:
        super().__init__(message, ctx)
        self.prog = prog

    def show(self, file: Any = None) -> None:
        message = " ".join(self.format_message().split())
        click.echo(f"{self.prog}: error: {message} (see --help)", file=file, err=file is None)


class NmtkitCommand(rich_click.RichCommand):
    """Every subcommand's class: option parsing errors (``--batch-size 0``) are one line, not
    click's usage block, so that they read like every other nmtkit error; a reader that closes
    stdout while an eager option (``--help``, ``--list-archs``) prints ends it with status 141.

    Every command also takes ``--config FILE.yaml`` (option names as keys, the command line
    overrides them) and ``--dump-config`` (print the effective configuration as YAML and exit):
    click's ``default_map`` with PyYAML, so the options stay declared once, on the command.

    ``--help`` is rich-click's, its options under headings by topic (:mod:`nmtkit.cli.help_panels`);
    everything else (errors, exit statuses) stays click's, in nmtkit's one-line form."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(click.Option(["--config"], metavar="FILE.yaml", is_eager=True, expose_value=False,
                                        callback=load_config, type=click.Path(dir_okay=False),
                                        help="Read options from this YAML file (keys: option names, e.g. max_tokens: "
                                             "4000); the command line overrides them."))
        self.params.append(click.Option(["--dump-config"], is_flag=True, expose_value=False, callback=want_dump,
                                        help="Print the effective configuration as YAML (what --config reads) and exit."))
        from rich_click import RichOptionPanel

        from nmtkit.cli.help_panels import PANEL_STYLE, help_width, panels_for

        flags = [o for p in self.get_params(click.Context(self)) for o in getattr(p, "opts", []) if o.startswith("--")]
        for title, options in panels_for(self.name or "", flags):
            self.panels.append(RichOptionPanel(title, options=options, **PANEL_STYLE.get(title, {})))
        self.context_settings.setdefault("rich_help_config", {"max_width": 160, "width": help_width()})

    def invoke(self, ctx: click.Context) -> Any:
        # declaration order: the same file whichever options came from the command line
        ordered = {p.name: ctx.params[p.name] for p in self.params if p.name in ctx.params}
        ctx.meta[EFFECTIVE_CONFIG] = effective_config({**ordered, **ctx.params})
        if ctx.meta.get(DUMP_CONFIG):
            try:
                click.echo(dump_config(ctx.meta[EFFECTIVE_CONFIG]), nl=False)
                sys.stdout.flush()
            except BrokenPipeError:
                exit_broken_pipe()
            return None
        return super().invoke(ctx)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """UTF-8 standard streams before click prints anything (help, usage errors).  click's own
        main, not rich-click's, which would draw errors in boxes over several lines."""
        use_utf8_stdio()
        return click.Command.main(self, *args, **kwargs)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except BrokenPipeError:  # an eager option's output (--list-archs | head): as handle_errors does,
            exit_broken_pipe()  # not click's silent exit status 1
        except OneLineUsageError:
            raise
        except click.UsageError as exc:
            raise OneLineUsageError(exc.format_message(), getattr(self, "prog", None) or f"nmtkit-{self.name}", exc.ctx) from None



# -- option groups shared by several commands: one declaration, one help text each -------------------
Decorator = Callable[[Callable], Callable]


def _stack(*options: Decorator) -> Decorator:
    """Apply click options so that ``--help`` lists them in the order given."""

    def deco(fn: Callable) -> Callable:
        for opt in reversed(options):
            fn = opt(fn)
        return fn

    return deco


#: The most ``--threads`` accepts.
MAX_THREADS = 1024


def alignment_layer_options() -> Decorator:
    """``--alignment-layer`` and ``--alignment-heads`` (fairseq's names): which attention a model
    with several layers of heads (the Transformer) reports, instead of the one it was trained with."""
    return _stack(
        click.option("--alignment-layer", type=int, default=None, metavar="N",
                     help="Read alignments from decoder layer N (negative: from the top) [as the model was trained; Transformer only]."),
        click.option("--alignment-heads", type=click.IntRange(min=0), default=None, metavar="N",
                     help="Average that layer's first N heads, 0 all [as the model was trained; Transformer only]."),
    )


def device_options(*, threads: bool = True) -> Decorator:
    """``--device``, ``--amp`` and (unless ``threads=False``) ``--threads``."""
    opts = [
        click.option("--device", default="auto", show_default=True,
                     help="auto|cpu|cuda[:N] (auto takes a GPU when present)."),
        click.option("--amp", type=click.Choice(AMP_CHOICES), default="auto", show_default=True,
                     help="Mixed precision: bf16 on CUDA or on a CPU with AVX512_BF16/AMX (weights and checkpoints "
                          "stay float32); fp16 on CUDA. auto: bf16/fp16 on CUDA; on a CPU with native bf16, bf16 for "
                          "training and float32 for translate/score/align; float32 on other CPUs."),
    ]
    if threads:
        # bounded: torch crashed (SIGSEGV) asked for 100,000 threads, and 10,000 took a minute to start
        opts.append(click.option("--threads", default=0, show_default=True, type=click.IntRange(min=0, max=MAX_THREADS),
                                 help="CPU threads (0: torch default)."))
    return _stack(*opts)


def set_threads(threads: int) -> None:
    """``--threads N``: N > 0 sets torch's intra-op threads; 0 leaves torch's default."""
    if threads > 0:
        import torch

        torch.set_num_threads(threads)


def batching_options(*, default_batch_size: Optional[int], max_tokens: bool = True,
                     max_tokens_default: Optional[str] = None) -> Decorator:
    """``--batch-size`` (its default per command) and ``--max-tokens`` (unless ``max_tokens=False``;
    ``max_tokens_default``: how ``--help`` shows a default the command fills in itself)."""
    opts = [click.option("--batch-size", default=default_batch_size, show_default=default_batch_size is not None,
                         type=click.IntRange(min=1), help="Sentences per batch.")]
    if max_tokens:
        opts.append(click.option("--max-tokens", type=click.IntRange(min=1), show_default=max_tokens_default or False,
                                 help="At most this many padded tokens per batch (sentences x longest sentence); a longer "
                                      "sentence is a batch by itself, never dropped."))
    return _stack(*opts)


def search_options() -> Decorator:
    """Beam search's options, their defaults read from the library's one ``SearchOptions``."""
    import dataclasses

    from nmtkit.generate.search_options import LENPEN_FORMS, LIMITS, SearchOptions

    d = {f.name: f.default for f in dataclasses.fields(SearchOptions)}
    return _stack(
        click.option("--beam", default=d["beam"], show_default=True, type=AtLeast(1, int(LIMITS["--beam"])),
                     help="Beam size (1: greedy)."),
        click.option("--nbest", default=d["nbest"], show_default=True, type=AtLeast(1),
                     help="Hypotheses per sentence (<= beam)."),
        click.option("--lenpen", default=d["lenpen"], show_default=True, type=Within(-LIMITS["--lenpen"], LIMITS["--lenpen"]),
                     help="Length penalty alpha."),
        click.option("--lenpen-form", type=OneOf(LENPEN_FORMS), default=d["lenpen_form"], show_default=True,
                     help="fairseq: score/len^a; gnmt: score/((5+len)/6)^a."),
        click.option("--max-len-a", default=d["max_len_a"], show_default=True, type=Within(0, LIMITS["--max-len-a"]),
                     help="Max output length = a * source length + b."),
        click.option("--max-len-b", default=d["max_len_b"], show_default=True, type=AtLeast(0, int(LIMITS["--max-len-b"]))),
        click.option("--min-len", default=d["min_len"], show_default=True, type=AtLeast(0),
                     help="Minimum output tokens before </s>."),
        click.option("--unkpen", default=d["unkpen"], show_default=True, type=Within(-LIMITS["--unkpen"], LIMITS["--unkpen"]),
                     help="Subtracted from <unk> log-probabilities."),
    )
