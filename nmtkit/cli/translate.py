"""``nmtkit-translate``: translate raw text from stdin (or --input), one output line per input line.

Lines are read in buffers (``--buffer-size``), sorted by length, translated in batches and
written back in input order, flushed after every buffer; on a pipe or terminal a buffer also
ends when the input pauses (no new line within a few ms), so each line that has arrived is
translated at once (``nmtkit.utils.streaming``).  Invalid UTF-8 stops with an error naming the line,
after every earlier line has been written.
"""
from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from typing import IO, Iterator, Optional

import click

from nmtkit.cli.common import NmtkitCommand, console, handle_errors, parse_device
from nmtkit.errors import InputError, NmtkitError
from nmtkit.utils.signals import handles_sigterm
from nmtkit.utils.streaming import PAUSE

PROG = "nmtkit-translate"
COPY = "\0copy"  # --replace-unk without a dictionary


def read_input(stream: IO[bytes], name: str) -> Iterator[tuple[int, object]]:
    """Yield (0-based index, text) per ``\\n`` line; a decoding error is yielded, not raised,
    so the caller can first write out everything before it; ``(k, PAUSE)`` when a pipe paused."""
    from nmtkit.utils.streaming import iter_raw_lines
    from nmtkit.utils.textio import decode_line

    k = 0
    for raw in iter_raw_lines(stream):
        if raw is PAUSE:  # the input paused after line k - 1
            yield k, PAUSE
            continue
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        try:
            yield k, decode_line(raw, name, k + 1)
        except InputError as exc:
            yield k, exc
            return
        k += 1


@click.command("translate", cls=NmtkitCommand, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--path", required=True, help="Checkpoint(s); several joined by ':' form an ensemble.")
@click.option("--input", "input_path", type=click.Path(dir_okay=False), help="Read this file instead of stdin.")
@click.option("--output", "output_path", type=click.Path(dir_okay=False), help="Write here (atomically) instead of stdout.")
@click.option("--data", type=click.Path(file_okay=False), help="Use this data dir's tokenizer/BPE (its dictionaries must match).")
@click.option("--beam", default=5, show_default=True, type=click.IntRange(min=1), help="Beam size (1: greedy).")
@click.option("--nbest", default=1, show_default=True, type=click.IntRange(min=1), help="Hypotheses per sentence (<= beam).")
@click.option("--lenpen", default=1.0, show_default=True, help="Length penalty alpha.")
@click.option("--lenpen-form", type=click.Choice(["fairseq", "gnmt"]), default="fairseq", show_default=True,
              help="fairseq: score/len^a; gnmt: score/((5+len)/6)^a.")
@click.option("--max-len-a", default=1.5, show_default=True, type=click.FloatRange(min=0), help="Max output length = a * source length + b.")
@click.option("--max-len-b", default=10, show_default=True, type=click.IntRange(min=0))
@click.option("--min-len", default=1, show_default=True, type=click.IntRange(min=0))
@click.option("--unkpen", default=0.0, show_default=True, help="Subtracted from <unk> log-probabilities.")
@click.option("--replace-unk", is_flag=False, flag_value=COPY, default=None, metavar="[DICT]",
              help="Replace <unk> by the most-attended source word, translated by DICT ('source target' lines) if given, else copied.")
@click.option("--print-alignment", is_flag=True, help="Append ' ||| i-j ...' word alignments to each output line.")
@click.option("--alignment-file", type=click.Path(dir_okay=False), help="Write word alignments to this file instead.")
@click.option("--align-shift", type=click.IntRange(0, 1), default=0, show_default=True, help="Take output word t's alignment from step t+shift.")
@click.option("--verbose", "-v", is_flag=True, help="fairseq-style S-/H-/D-/P-/A- lines.")
@click.option("--buffer-size", default=0, type=click.IntRange(min=0), help="Lines read before translating [1 on a terminal, else 2000].")
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1), help="Sentences per batch.")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Also cap padded source tokens per batch.")
@click.option("--max-source-len", type=click.IntRange(min=1), help="Truncate longer inputs (with a warning naming the line) [model limit or 400].")
@click.option("--device", default="auto", show_default=True, help="auto|cpu|cuda[:N].")
@click.option("--amp", type=click.Choice(["auto", "none", "bf16", "fp16"]), default="auto", show_default=True)
@click.option("--threads", default=0, type=click.IntRange(min=0), help="CPU threads (0: torch default).")
@click.option("--quiet", "-q", is_flag=True, help="No closing speed summary.")
@handle_errors(PROG)
@handles_sigterm
def command(**kw) -> None:  # noqa: ANN003
    """Translate raw text (stdin or --input) with a trained checkpoint or an ensemble."""
    import torch

    from nmtkit.generate.loading import load_ensemble
    from nmtkit.generate.translator import SearchOptions, Translator
    from nmtkit.generate.unk import load_lexicon
    from nmtkit.checkpoint import pipelines_from_checkpoint
    from nmtkit.utils.progress import progress_bar

    search = SearchOptions(kw["beam"], kw["nbest"], kw["max_len_a"], kw["max_len_b"], kw["min_len"], kw["lenpen"], kw["lenpen_form"], kw["unkpen"])
    search.validate()
    if kw["threads"] > 0:
        torch.set_num_threads(kw["threads"])
    lexicon = load_lexicon(kw["replace_unk"]) if kw["replace_unk"] not in (None, COPY) else None
    device = parse_device(kw["device"])
    model, ckpts = load_ensemble(kw["path"], device)
    src_pipe, tgt_pipe = pipelines_from_checkpoint(ckpts[0])
    if kw["data"]:
        src_pipe, tgt_pipe = _pipelines_from_data(kw["data"], model)
    amp = None
    if device.type == "cuda" and kw["amp"] != "none":
        amp = torch.bfloat16 if kw["amp"] in ("auto", "bf16") and torch.cuda.is_bf16_supported() else torch.float16
    max_src = kw["max_source_len"] or _model_source_limit(model) or 400
    want_align = kw["print_alignment"] or bool(kw["alignment_file"]) or kw["verbose"]
    translator = Translator(model, src_pipe, tgt_pipe, search, device, replace_unk=kw["replace_unk"] is not None,
                            lexicon=lexicon, alignments=want_align and model.has_attention,
                            align_shift=kw["align_shift"], max_source_len=max_src, amp_dtype=amp)

    in_stream = open(kw["input_path"], "rb") if kw["input_path"] else sys.stdin.buffer
    in_name = kw["input_path"] or "<stdin>"
    interactive = not kw["input_path"] and sys.stdin.isatty()
    buffer_size = kw["buffer_size"] or (1 if interactive else 2000)
    writer = OutputWriter(kw, translator)
    t0 = time.perf_counter()
    # a live sentences/s bar only when a person watches stderr and is not typing the input
    show = console.is_terminal and not interactive and not kw["quiet"]
    progress = progress_bar("sentences", transient=True)
    task = progress.add_task("translate", total=None)

    def flush(buf: list[tuple[int, str]]) -> None:
        writer.write(translator.translate(buf, kw["batch_size"], kw["max_tokens"]))
        progress.advance(task, len(buf))

    try:
        with torch.inference_mode(), writer, (progress if show else nullcontext()):
            buf: list[tuple[int, str]] = []
            error: Optional[InputError] = None
            for k, text in read_input(in_stream, in_name):
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
            for w in translator.warnings:
                console.print(f"[yellow]warning:[/yellow] {w}")
            if error is not None:
                writer.keep_partial = True
                raise error
    finally:
        if kw["input_path"]:
            in_stream.close()
    if not kw["quiet"] and translator.n_sentences:
        dt = time.perf_counter() - t0
        console.print(
            f"translated {translator.n_sentences:,} sentences ({translator.n_target_tokens:,} target tokens) in {dt:.1f}s: "
            f"{translator.n_sentences / dt:,.1f} sentences/s, {translator.n_target_tokens / dt:,.0f} tokens/s"
        )


class OutputWriter:
    """Writes translations in the chosen format to stdout or (atomically) to --output."""

    def __init__(self, kw: dict, translator) -> None:  # noqa: ANN001
        self.kw = kw
        self.verbose = kw["verbose"]
        self.nbest = kw["nbest"]
        self.inline_align = kw["print_alignment"] and not kw["alignment_file"]
        self.keep_partial = False
        self.has_alignments = translator.alignments

    def __enter__(self) -> "OutputWriter":
        from nmtkit.utils.textio import atomic_write

        self._ctx = []
        if self.kw["output_path"]:
            ctx = atomic_write(self.kw["output_path"])
            self.out = ctx.__enter__()
            self._ctx.append(ctx)
        else:
            self.out = sys.stdout
        self.align_out = None
        if self.kw["alignment_file"]:
            ctx = atomic_write(self.kw["alignment_file"])
            self.align_out = ctx.__enter__()
            self._ctx.append(ctx)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:  # noqa: ANN001
        # a bad input line still leaves the translations of every earlier line in place
        for ctx in reversed(self._ctx):
            if exc_type is not None and self.keep_partial:
                ctx.__exit__(None, None, None)
            else:
                ctx.__exit__(exc_type, exc, tb)
        if self.out is sys.stdout:
            sys.stdout.flush()
        return False

    def write(self, translations) -> None:  # noqa: ANN001
        from nmtkit.evaluate.alignment_io import format_pharaoh

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
            if self.align_out is not None:
                self.align_out.write(format_pharaoh(tr.candidates[0].alignment) + "\n")
        self.out.flush()


def _model_source_limit(model) -> Optional[int]:  # noqa: ANN001
    """The longest source (pieces, without </s>) every member can take, if any has a limit."""
    limits = []
    for m in model.models:
        cfg = m.cfg
        if getattr(cfg, "score", None) == "location" and getattr(cfg, "attention", "none") != "none":
            limits.append(int(cfg.max_source_positions) - 1)
    return min(limits) if limits else None


def _pipelines_from_data(data_dir: str, model):  # noqa: ANN001, ANN202
    from nmtkit.data.dataset import DataDir

    data = DataDir(data_dir)
    if data.src_dict != model.src_dict or data.tgt_dict != model.tgt_dict:
        raise NmtkitError(f"{data_dir}: dictionaries do not match the checkpoint's (preprocessed with other settings?)")
    return data.pipeline(data.src_lang), data.pipeline(data.tgt_lang)


def main() -> None:
    command()


if __name__ == "__main__":
    main()
