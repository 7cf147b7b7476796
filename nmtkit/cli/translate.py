"""``nmtkit-translate``: translate raw text from stdin (or --input), one output line per input line.

Lines are read in buffers (``--buffer-size``), sorted by length, translated in batches and
written back in input order, flushed after every buffer; on a pipe or terminal a buffer also
ends when the input pauses (no new line within a few ms), so each line that has arrived is
translated at once (``nmtkit.utils.streaming``).  Invalid UTF-8 is replaced (U+FFFD) with one
warning per line; with ``--strict`` it stops with an error naming the line, after every earlier
line has been written to stdout (``--output`` and ``--alignment-file``, written atomically, are
then left as they were: a failed command replaces no file).
"""
from __future__ import annotations

import sys
import time
from contextlib import ExitStack, nullcontext
from typing import TYPE_CHECKING, Literal, Optional

import click

from nmtkit.cli.common import (NmtkitCommand, OneLineUsageError, alignment_layer_options, batching_options, console, device_options,
                               handle_errors, run_console_script, search_options, set_threads)
from nmtkit.errors import InputError, NmtkitError
from nmtkit.generate.inference_options import DEFAULT_BATCH_SIZE, LoadOptions, OutputOptions, field_defaults, from_values
from nmtkit.utils.stdio import STDIN_NAME, STDIO, STDOUT_NAME, direct_target, is_stdio, refuse_stdin_twice, stream_closed
from nmtkit.utils.streaming import PAUSE, iter_input_lines

if TYPE_CHECKING:
    from nmtkit.generate.search_options import SearchOptions
    from nmtkit.generate.translator import Translator

PROG = "nmtkit-translate"
COPY = "\0copy"  # --replace-unk without a dictionary
_OUT = field_defaults(OutputOptions)  # the library's defaults, the flags' too


@click.command("translate", cls=NmtkitCommand, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--path", required=True, help="Checkpoint(s); several joined by ':' form an ensemble (a name with ':' in it is read whole where that file exists).")
@click.option("--input", "input_path", type=click.Path(dir_okay=False), help="Read this file instead of stdin ('-': stdin).")
@click.option("--output", "output_path", type=click.Path(dir_okay=False), help="Write here (atomically; '-': stdout) instead of stdout.")
@click.option("--data", type=click.Path(file_okay=False), help="Use this data dir's tokenizer/BPE (its dictionaries must match).")
@search_options()
@click.option("--replace-unk", is_flag=False, flag_value=COPY, default=None, metavar="[DICT]",
              help="Replace <unk> by the most-attended source word, translated by DICT ('source target' lines) if given, else copied.")
@click.option("--unk-posterior", is_flag=True,
              help="With --replace-unk: choose each <unk>'s source word from the attention posterior given the <unk> "
                   "(one forced pass over the outputs that have one; rnnsearch, luong; not with --quantize), not the search's attention.")
@click.option("--print-alignment", is_flag=True, help="Append ' ||| i-j ...' word alignments to each output line.")
@click.option("--alignment-file", type=click.Path(dir_okay=False),
              help="Write word alignments to this file instead (one line per hypothesis written: N per input with --nbest N).")
@click.option("--align-shift", type=click.IntRange(0, 1), default=_OUT["align_shift"], show_default=True, help="Take output word t's alignment from step t+shift.")
@click.option("--verbose", "-v", is_flag=True, help="fairseq-style S-/H-/D-/P-/A- lines.")
@click.option("--buffer-size", default=0, type=click.IntRange(min=0), help="Lines read before translating [1 on a terminal, else 2000].")
@alignment_layer_options()
@batching_options(default_batch_size=DEFAULT_BATCH_SIZE)
@click.option("--max-source-len", type=click.IntRange(min=1), help="Truncate longer inputs (with a warning naming the line) [model limit or 400].")
@device_options()
@click.option("--quiet", "-q", is_flag=True, help="No closing speed summary.")
@click.option("--quantize", type=click.Choice(["none", "int8"]), default="none", show_default=True,
              help="int8: dynamic int8 weights for the linear and recurrent layers (CPU only; faster, BLEU nearly unchanged; activation scales are per batch, so output can depend on batching).")
@click.option("--shortlist", type=click.Path(dir_okay=False), metavar="FILE",
              help="Restrict the output layer per batch to the top translations of the source words in this "
                   "'source target count' table (e.g. nmtkit-align --build-dict FILE --dict-top-k K).")
@click.option("--shortlist-k", default=_OUT["shortlist_k"], show_default=True, type=click.IntRange(min=1),
              help="Translations per source word taken from --shortlist.")
@click.option("--shortlist-frequent", default=_OUT["shortlist_frequent"], show_default=True, type=click.IntRange(min=0),
              help="Most frequent target symbols always in the shortlist.")
@click.option("--cuda-graphs", is_flag=True,
              help="On CUDA, run the search in fixed shapes, each step one CUDA graph replay, batches padded to buckets (faster; "
                   "output can differ from the eager search's in the rounding; not with --shortlist).")
@click.option("--strict", is_flag=True,
              help="Stop at the first line that is not valid UTF-8 (default: replace its bad bytes by U+FFFD and warn).")
@handle_errors(PROG)
def command(**kw) -> None:  # noqa: ANN003
    """Translate raw text (stdin or --input) with a trained checkpoint or an ensemble (a.pt:b.pt).

    Example: nmtkit-translate --path ckpt/checkpoint_best.pt --beam 5 < test.en > test.hyp"""
    from nmtkit.utils.startup import long_lived

    check_streams(kw)
    search = _search_options(kw)  # a bad combination (--nbest above --beam) is refused before torch loads
    with long_lived():  # torch, the model and the text pipelines: kept for the whole run
        translator = _load(kw, search)
    import torch

    from nmtkit.utils.progress import count_lines, progress_bar

    from_file = kw["input_path"] is not None and not is_stdio(kw["input_path"])
    in_stream = open(kw["input_path"], "rb") if from_file else sys.stdin.buffer
    in_name = kw["input_path"] if from_file else STDIN_NAME
    interactive = not from_file and sys.stdin.isatty()
    buffer_size = kw["buffer_size"] or (1 if interactive else 2000)
    writer = OutputWriter(kw, translator)
    t0 = time.perf_counter()
    # a live sentences/s bar only when a person watches stderr and is not typing the input
    show = console.is_terminal and not interactive and not kw["quiet"]
    progress = progress_bar("sentences", transient=True)
    task = progress.add_task("translate", total=count_lines(kw["input_path"]) if show and from_file else None)

    def warn_invalid(exc: InputError) -> None:
        click.echo(f"{PROG}: warning: {exc}", err=True)

    unmatched_said = False

    def warn_unmatched_shortlist(finished: bool = False) -> None:
        nonlocal unmatched_said
        message = None if unmatched_said or translator.shortlist is None else translator.shortlist.unmatched(finished)
        if message:
            click.echo(f"{PROG}: warning: --shortlist {message}", err=True)
            unmatched_said = True

    def flush(buf: list[tuple[int, str]]) -> None:
        done = translator.translate_indexed(buf)
        warn_unmatched_shortlist()
        for r in done:  # as each buffer is written, in the form of the other input warnings
            if r.truncated_from is not None:
                click.echo(f"{PROG}: warning: {in_name}:{r.index + 1}: {r.truncated_from} source tokens, truncated to "
                           f"{translator.max_source_len}", err=True)
        writer.write(done)
        progress.advance(task, len(buf))

    try:
        with torch.inference_mode(), writer, (progress if show else nullcontext()):
            buf: list[tuple[int, str]] = []
            error: Optional[InputError] = None
            for k, text in iter_input_lines(in_stream, in_name, strict=kw["strict"], on_invalid=warn_invalid):
                if text is PAUSE:  # a pipe paused: translate and write what has arrived
                    if buf:
                        flush(buf)
                        buf = []
                    continue
                if isinstance(text, InputError):
                    error = text
                    break
                buf.append((k, text))
                if len(buf) >= buffer_size:
                    flush(buf)
                    buf = []
            if buf:
                flush(buf)
            if error is not None:  # stdout has every earlier line; --output and --alignment-file stay as they were
                raise error
    finally:
        if from_file:
            in_stream.close()
    warn_unmatched_shortlist(finished=True)
    if not kw["quiet"] and translator.n_sentences:
        dt = time.perf_counter() - t0
        console.print(
            f"translated {translator.n_sentences:,} sentences ({translator.n_target_tokens:,} target tokens) in {dt:.1f}s: "
            f"{translator.n_sentences / dt:,.1f} sentences/s, {translator.n_target_tokens / dt:,.0f} tokens/s"
        )


def check_streams(kw: dict) -> None:
    """Before torch is imported and the model loads: a closed stdin or stdout that the run needs
    is one line, standard input is read by one option at most, every checkpoint must exist, and
    no output may replace an input (the translations would overwrite their own source)."""
    from nmtkit.errors import OutputError
    from nmtkit.generate.checkpoint_paths import checkpoint_paths
    from nmtkit.utils.overlap import refuse_outputs_over_inputs

    if (kw["input_path"] is None or is_stdio(kw["input_path"])) and stream_closed(sys.stdin):
        raise InputError(STDIN_NAME, None, "standard input is closed (give --input FILE)")
    if (kw["output_path"] is None or is_stdio(kw["output_path"])) and stream_closed(sys.stdout):
        raise OutputError(STDOUT_NAME, "standard output is closed (give --output FILE)")
    on_stdout = direct_target(kw["output_path"] or STDIO) == 1
    if on_stdout and kw["alignment_file"] is not None and direct_target(kw["alignment_file"]) == 1:
        raise OutputError(STDOUT_NAME, "--alignment-file would interleave alignments with the translations on standard "
                                       "output (use --print-alignment to append them to each line)")
    unk_dict = kw["replace_unk"] if kw["replace_unk"] not in (None, COPY) else None
    refuse_stdin_twice([("the sentences (--input)", kw["input_path"] or STDIO), ("--replace-unk", unk_dict),
                        ("--shortlist", kw["shortlist"])])
    refuse_outputs_over_inputs(
        outputs=[("--output", kw["output_path"]), ("--alignment-file", kw["alignment_file"])],
        inputs=[("--input", kw["input_path"]), *[("--path", p) for p in checkpoint_paths(kw["path"])],
                ("--data", kw["data"]), ("--replace-unk", unk_dict), ("--shortlist", kw["shortlist"])])


def _search_options(kw: dict) -> "SearchOptions":
    """The search's settings from the options, checked (torch-free): a combination the library
    refuses (--nbest above --beam, lengths that leave no room) is a bad command line, exit 2."""
    from nmtkit.generate.search_options import SearchOptions

    try:
        return from_values(SearchOptions, kw)
    except NmtkitError as exc:
        raise OneLineUsageError(str(exc), PROG, click.get_current_context(silent=True)) from None


def _load(kw: dict, search: "SearchOptions") -> "Translator":
    """The translator the options describe, its text pipelines built (threads set first; on the
    CPU, freed memory is kept in the heap, as training does: the search allocates and frees
    ``[rows, vocabulary]`` tensors every step, nmtkit.utils.heap)."""
    from nmtkit.generate.translator import Translator
    from nmtkit.utils.heap import keep_freed_memory

    set_threads(kw["threads"])
    want_align = kw["print_alignment"] or bool(kw["alignment_file"]) or kw["verbose"]
    replace_unk = {None: False, COPY: True}.get(kw["replace_unk"], kw["replace_unk"])
    output = from_values(OutputOptions, kw, replace_unk=replace_unk, alignments="auto" if want_align else False)
    translator = Translator.from_checkpoint(kw["path"], search, from_values(LoadOptions, kw), output)
    translator.build_pipelines()
    if translator.device.type == "cpu":
        keep_freed_memory()
    return translator


class OutputWriter:
    """Writes translations in the chosen format to stdout or (atomically) to --output."""

    def __init__(self, kw: dict, translator) -> None:  # noqa: ANN001
        self.kw = kw
        self.verbose = kw["verbose"]
        self.nbest = kw["nbest"]
        self.inline_align = kw["print_alignment"] and not kw["alignment_file"]
        self.has_alignments = translator.alignments

    def __enter__(self) -> "OutputWriter":
        """Open --output and --alignment-file as atomic writes held in one ExitStack.

        Why a stack: when one file fails to open or to commit (a full disk), the other one is
        still finished (its temporary file removed, the previous file kept) instead of left behind.
        """
        from nmtkit.utils.textio import atomic_write

        with ExitStack() as stack:
            self.out = stack.enter_context(atomic_write(self.kw["output_path"] or STDIO))
            self.align_out = stack.enter_context(atomic_write(self.kw["alignment_file"])) if self.kw["alignment_file"] else None
            self._files = stack.pop_all()
        return self

    def __exit__(self, exc_type, exc, tb) -> Literal[False]:  # noqa: ANN001
        try:
            self._files.__exit__(exc_type, exc, tb)  # on any error, files keep their previous content
        finally:
            if self.out is sys.stdout:
                sys.stdout.flush()
        return False

    def write(self, translations) -> None:  # noqa: ANN001
        """Write a buffer's translations; a failed write is named by the output it went to (the
        temporary files' writers cannot tell which of the two files a bare OSError came from)."""
        from nmtkit.utils.textio import output_error

        try:
            self._write(translations)
        except OSError as exc:
            if getattr(exc, "filename", None):
                raise
            raise output_error(exc, self.kw["output_path"] or STDOUT_NAME) from exc

    def _write(self, translations) -> None:  # noqa: ANN001
        from nmtkit.evaluate.alignment_io import format_pharaoh
        from nmtkit.utils.textio import output_error

        w = self.out.write
        for tr in translations:
            if self.verbose:
                w(f"S-{tr.index}\t{' '.join(tr.source_tokens)}\n")
                for c in tr.candidates:
                    w(f"H-{tr.index}\t{c.score:.4f}\t{' '.join(c.tokens)}\n")
                    w(f"D-{tr.index}\t{c.score:.4f}\t{c.text}\n")
                    w(f"P-{tr.index}\t{' '.join(f'{x:.4f}' for x in c.positional_scores)}\n")
                    if self.has_alignments:
                        w(f"A-{tr.index}\t{format_pharaoh(c.alignment)}\n")
            elif self.nbest > 1:
                for c in tr.candidates:  # Moses n-best format
                    extra = f" ||| {format_pharaoh(c.alignment)}" if self.inline_align else ""
                    w(f"{tr.index} ||| {c.text} ||| {c.score:.4f}{extra}\n")
            else:
                c = tr.candidates[0]
                extra = f" ||| {format_pharaoh(c.alignment)}" if self.inline_align else ""
                w(f"{c.text}{extra}\n")
            if self.align_out is not None:  # one line per output hypothesis: every n-best entry has its own
                try:
                    for c in tr.candidates if self.nbest > 1 else tr.candidates[:1]:
                        self.align_out.write(format_pharaoh(c.alignment) + "\n")
                except OSError as exc:
                    raise output_error(exc, self.kw["alignment_file"]) from exc
        self.out.flush()


if __name__ == "__main__":  # python -m nmtkit.cli.translate (the console script starts in nmtkit.launch)
    run_console_script(command)
