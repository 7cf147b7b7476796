"""``--shortlist``: exactness with a full shortlist, restriction with a tiny one, the lexical table
(top K by count, words through the target BPE, lowercasing), and one-line errors naming file:line."""
from __future__ import annotations

import re

import pytest
import torch
from click.testing import CliRunner

from tests.helpers import make_checkpoint, search_options, write
from nmtkit.cli.translate import command as translate
from nmtkit.data.dictionary import Dictionary
from nmtkit.data.text_pipeline import TextPipeline
from nmtkit.errors import InputError
from nmtkit.generate.search import beam_search
from nmtkit.generate.bundle import load_ensemble
from nmtkit.generate.shortlist import Shortlist, TextTable, check_shortlist, compile_shortlist, sentence_keys

ARCHS = ["luong_tiny", "rnnsearch_tiny", "rnnencdec_tiny", "transformer_test"]
LINES = ["the cat sits .", "a dog sees the man , Anna sleeps .", "the man runs .", "Anna"]


def _batch(model, lines=LINES):  # noqa: ANN001, ANN202
    from nmtkit.data.dataset import pad_sequences

    return pad_sequences([model.src_dict.encode(line.split(), add_eos=False) for line in lines])


def _same(a, b) -> None:  # noqa: ANN001
    for x, y in zip(a, b):
        assert [h.tokens for h in x] == [h.tokens for h in y]
        assert [h.score for h in x] == [h.score for h in y]
        for hx, hy in zip(x, y):
            assert torch.equal(hx.positional_scores, hy.positional_scores)
            assert (hx.attention is None and hy.attention is None) or torch.equal(hx.attention, hy.attention)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_shortlist_of_the_whole_vocabulary_changes_nothing(tmp_path, arch):
    model, _ = load_ensemble(str(make_checkpoint(tmp_path / "m.pt", arch)))
    src, lengths = _batch(model)
    plain = beam_search(model, src, lengths, search_options(beam=4, nbest=3, max_len_b=8))
    full = beam_search(model, src, lengths, search_options(beam=4, nbest=3, max_len_b=8), shortlist=torch.arange(len(model.tgt_dict)))
    _same(plain, full)
    assert all(m._output_rows is None for m in model.models)  # the restriction ends with the search


def test_ensemble_members_share_the_shortlist(tmp_path):
    paths = ":".join(str(make_checkpoint(tmp_path / f"m{k}.pt", a, seed=k)) for k, a in enumerate(ARCHS[:2]))
    model, _ = load_ensemble(paths)
    src, lengths = _batch(model)
    _same(beam_search(model, src, lengths, search_options(beam=3, max_len_b=6)),
          beam_search(model, src, lengths, search_options(beam=3, max_len_b=6), shortlist=torch.arange(len(model.tgt_dict))))
    ids = torch.tensor([0, 1, 2, 3, 9, 12, 20])
    for hyps in beam_search(model, src, lengths, search_options(beam=3, nbest=2, max_len_b=6), shortlist=ids):
        assert all(t in ids.tolist() for h in hyps for t in h.tokens)


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_output_is_kept_when_the_shortlist_holds_it(tmp_path, arch):
    """The argmax over a subset holding the global argmax is the same token: greedy search with a
    shortlist containing the unrestricted output's tokens gives that output, with log-probs
    renormalised over the shortlist (never lower)."""
    model, _ = load_ensemble(str(make_checkpoint(tmp_path / "m.pt", arch, seed=3)))
    src, lengths = _batch(model)
    plain = beam_search(model, src, lengths, search_options(beam=1, max_len_b=8))
    used = {t for h in plain for t in h[0].tokens}
    ids = torch.tensor(sorted({0, 1, 2, 3, 17} | used))
    assert len(ids) < len(model.tgt_dict)  # a real restriction
    short = beam_search(model, src, lengths, search_options(beam=1, max_len_b=8), shortlist=ids)
    assert [h[0].tokens for h in short] == [h[0].tokens for h in plain]
    for a, b in zip(plain, short):
        assert bool((b[0].positional_scores >= a[0].positional_scores - 1e-6).all())
        assert b[0].log_prob > a[0].log_prob


def test_the_fixed_shape_searcher_hands_a_shortlist_to_the_eager_one_whole(tmp_path):
    """``--cuda-graphs`` with ``--shortlist`` (and any batch the graphs do not take, as every CPU
    batch): the eager searcher runs with the output layer restricted, the same hypotheses as
    the eager searcher's own, every token inside the shortlist."""
    from nmtkit.generate.search import EagerSearch
    from nmtkit.generate.search.fixed_shape import SearchGraphs

    model, _ = load_ensemble(str(make_checkpoint(tmp_path / "m.pt", "luong_tiny", seed=3)))
    src, lengths = _batch(model)
    ids = torch.tensor([0, 1, 2, 3, 9, 12, 20])
    o = search_options(beam=3, nbest=2, max_len_b=6)
    graphs = SearchGraphs()(model, src, lengths, o, True, ids)
    _same(graphs, EagerSearch()(model, src, lengths, o, True, ids))
    assert all(t in ids.tolist() for hyps in graphs for h in hyps for t in h.tokens)


def test_shortlist_contract():
    check_shortlist(torch.tensor([0, 1, 2, 3, 7]), 10)
    for bad in ([0, 1, 2, 3, 7, 5], [1, 2, 3, 4], [0, 1, 2, 3, 10], [0, 1, 2, 3, 3]):
        with pytest.raises(ValueError):
            check_shortlist(torch.tensor(bad), 10)


# ---------------------------------------------------------------------------------------------
# the lexical table
# ---------------------------------------------------------------------------------------------
# hund -> hu@@ nd, katze -> ka@@ tze; der, die, maus, sieht stay whole
BPE_CODES = ("#version: 0.2\nh u\nn d</w>\nk a\nt z\ntz e</w>\nd e\nde r</w>\nd i\ndi e</w>\nm a\nma u\n"
             "mau s</w>\ns i\ne h\nsi eh\nsieh t</w>\n")


def _tgt_dict(words: str) -> Dictionary:
    d = Dictionary()
    for w in words.split():
        d.add(w)
    return d


def test_table_top_k_by_count_words_through_bpe_and_lowercasing(tmp_path):
    tgt_pipe = TextPipeline("de", tokenizer="moses", lowercase=True, bpe_codes_text=BPE_CODES)
    d = _tgt_dict("die der , . hu@@ nd ka@@ tze sieht maus")
    table = write(tmp_path / "lex.txt", "Dog Hund 5\ndog der 9\ndog sieht 1\ncat Katze 4\ncat Maus. 7\nthe die\nthe der\n")
    sl = Shortlist.load(table, tgt_pipe, d, k=2, frequent=2, lowercase_source=True)
    idx = d.index
    # dog: der (9) and hund (5, "Hund" -> hu@@ nd); sieht (1) is beyond k=2
    assert sl.key_ids("dog").tolist() == sorted([idx["der"], idx["hu@@"], idx["nd"]])
    # cat: "Maus." is tokenized into maus + . ; Katze -> ka@@ tze
    assert sl.key_ids("cat").tolist() == sorted([idx["maus"], idx["."], idx["ka@@"], idx["tze"]])
    # no counts: file order ranks
    assert sl.key_ids("the").tolist() == sorted([idx["die"], idx["der"]])
    ids = sl.ids_for([sentence_keys(["The", "Cat"], ["the", "cat"], ["the", "cat"], lowercase=True)])
    assert ids.tolist() == sorted({0, 1, 2, 3, 4, 5} | {idx["die"], idx["der"]} | set(sl.key_ids("cat").tolist()))
    assert sl.ids_for([["nothing"]]).tolist() == [0, 1, 2, 3, 4, 5]  # specials + 2 most frequent
    assert Shortlist.load(table, tgt_pipe, d, k=1, frequent=0).ids_for([["dog"]]).tolist() == [0, 1, 2, 3, idx["der"]]
    # source words, tokens or pieces that are target symbols copy themselves (names through BPE)
    assert sl.ids_for([["ka@@", "tze", "zebra"]]).tolist() == [0, 1, 2, 3, 4, 5, idx["ka@@"], idx["tze"]]


def test_targets_go_through_the_pipeline_only_when_an_input_needs_them(monkeypatch):
    seen: list[str] = []
    pipe = TextPipeline("de")
    tokenize = pipe.tokenize
    monkeypatch.setattr(pipe, "tokenize", lambda entry: seen.append(entry) or tokenize(entry))
    d = _tgt_dict("hund der katze")
    table = TextTable({"dog": ["hund", "der"], "cat": ["katze", "der"]}, pipe, d)
    sl = Shortlist(table.ids_of, vocab_size=len(d), frequent=0)
    assert seen == []
    assert sl.ids_for([["dog", "dog"]]).tolist() == [0, 1, 2, 3, 4, 5]
    assert sl.ids_for([["cat"], ["dog"]]).tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert seen == ["hund", "der", "katze"]  # each entry once, "der" shared by both words


@pytest.mark.parametrize("content,line", [("a b 1\na\n", 2), ("a b 1\nc d e\n", 2), ("x y\n\ta b c d\n", 2),
                                          ("a b 1\nc d 2\ne f many\n", 3)])
def test_bad_table_line_is_an_error_naming_file_and_line(tmp_path, content, line):
    table = write(tmp_path / "lex.txt", content)
    with pytest.raises(InputError) as err:
        Shortlist.load(table, TextPipeline("de"), _tgt_dict("b d f"), k=5)
    assert str(err.value).startswith(f"{table}:{line}: expected 'source target' or 'source target score'")


@pytest.mark.parametrize("score", ["nan", "inf", "-inf"])
def test_a_score_that_is_not_finite_is_an_error_naming_file_and_line(tmp_path, score):
    table = write(tmp_path / "lex.txt", f"a b 3\nc d {score}\n")
    with pytest.raises(InputError, match=rf"^{re.escape(str(table))}:2: the score must be a finite number"):
        Shortlist.load(table, TextPipeline("de"), _tgt_dict("b d f"), k=5)


# ---------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------
def _translate(ckpt, inp, *extra):  # noqa: ANN001, ANN202
    return CliRunner().invoke(translate, ["--path", str(ckpt), "--input", str(inp), "--quiet", "--threads", "1",
                                          "--device", "cpu", "--beam", "3", "--nbest", "2", *extra])


def _cli_case(tmp_path, blank_line: bool = False):  # noqa: ANN001, ANN202
    """(a random rnnsearch checkpoint, LINES as the input file, a table pairing "the cat dog sees"
    with twelve German words at counts 1..12)."""
    ckpt = make_checkpoint(tmp_path / "m.pt", "rnnsearch_tiny", seed=5)
    inp = write(tmp_path / "in.txt", "\n".join(LINES) + ("\n\n" if blank_line else "\n"))
    words = "die der eine Katze Hund sieht sitzt läuft Mann schläft . ,".split()
    table = write(tmp_path / "lex.txt", "".join(f"{s} {t} {n}\n" for s in "the cat dog sees".split()
                                                for n, t in enumerate(words, 1)))
    return ckpt, inp, table


def test_cli_shortlist_large_k_exact_and_tiny_k_valid(tmp_path):
    ckpt, inp, table = _cli_case(tmp_path, blank_line=True)
    plain = _translate(ckpt, inp)
    assert plain.exit_code == 0, plain.output
    big = _translate(ckpt, inp, "--shortlist", str(table), "--shortlist-k", "1000", "--shortlist-frequent", "1000")
    assert big.exit_code == 0, big.output
    assert big.stdout == plain.stdout
    tiny = _translate(ckpt, inp, "--shortlist", str(table), "--shortlist-k", "1", "--shortlist-frequent", "0")
    assert tiny.exit_code == 0, tiny.output
    rows = tiny.stdout.splitlines()
    assert len(rows) == 2 * (len(LINES) + 1)  # n-best 2, the blank line included
    for row in rows:
        text = row.split(" ||| ")[1]
        # the top-1 (highest count) of every source word is ","; the batch's source words copy themselves
        assert set(text.split()) <= {",", "<unk>", *" ".join(LINES).split()}, row
    both = _translate(ckpt, inp, "--shortlist", str(table), "--shortlist-k", "1000", "--shortlist-frequent", "1000",
                      "--quantize", "int8")
    assert both.exit_code == 0, both.output


def test_a_table_matching_no_source_word_is_a_warning_once(tmp_path):
    ckpt, inp, table = _cli_case(tmp_path)
    matching = _translate(ckpt, inp, "--shortlist", str(table))
    assert matching.exit_code == 0 and "warning" not in matching.stderr
    # the same table the wrong way round: German source words, English targets (punctuation, which
    # both sides share, left out)
    pairs = [line.split()[:2] for line in table.read_text().splitlines()]
    backwards = write(tmp_path / "back.txt", "".join(f"{t} {s} 1\n" for s, t in pairs if t.isalpha()))
    res = _translate(ckpt, inp, "--shortlist", str(backwards))
    assert res.exit_code == 0, res.output
    warnings = [line for line in res.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"nmtkit-translate: warning: --shortlist {backwards}: none of the ")
    assert "another language pair or direction?" in warnings[0]
    assert res.stdout.count("\n") == matching.stdout.count("\n")  # every line still translated


def test_cli_bad_table_is_one_line(tmp_path, random_ckpt):
    inp = write(tmp_path / "in.txt", "the cat sits .\n")
    table = write(tmp_path / "lex.txt", "the die 3\ncat Katze x\n")
    res = _translate(random_ckpt, inp, "--shortlist", str(table))
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        f"nmtkit-translate: error: {table}:2: expected 'source target' or 'source target score', got 'cat Katze x'"]


# ---------------------------------------------------------------------------------------------
# compiled shortlists (nmtkit-shortlist)
# ---------------------------------------------------------------------------------------------
def test_a_compiled_table_gives_the_text_tables_ids_for_every_k(tmp_path):
    tgt_pipe = TextPipeline("de", tokenizer="moses", lowercase=True, bpe_codes_text=BPE_CODES)
    d = _tgt_dict("die der , . hu@@ nd ka@@ tze sieht maus")
    table = write(tmp_path / "lex.txt", "Dog Hund 5\ndog der 9\ndog sieht 1\ncat Katze 4\ncat Maus. 7\nthe die\n"
                                        "the der\nunknown zebra 3\n")
    out = tmp_path / "lex.npz"
    assert compile_shortlist(table, out, tgt_pipe, d, lowercase_source=True) == (4, 10)
    with pytest.raises(InputError, match=rf"^{re.escape(str(out))}: is a compiled shortlist already"):
        compile_shortlist(out, tmp_path / "again.npz", tgt_pipe, d, lowercase_source=True)
    for k in (1, 2, 3, 50):
        text = Shortlist.load(table, tgt_pipe, d, k=k, frequent=2, lowercase_source=True)
        compiled = Shortlist.load(out, tgt_pipe, d, k=k, frequent=2, lowercase_source=True)
        for key in ("dog", "cat", "the", "unknown", "Dog", "absent"):
            a, b = text.key_ids(key), compiled.key_ids(key)
            assert (a is None and b is None) or (a.tolist() == b.tolist() and b.dtype == a.dtype), (k, key)
        keys = [sentence_keys(["The", "Cat", "dog"], ["the", "cat", "dog"], ["the", "cat", "dog", "ka@@"], lowercase=True)]
        assert torch.equal(text.ids_for(keys), compiled.ids_for(keys))


def _compiled_error(path, tmp_path, model_words="die der maus"):  # noqa: ANN001, ANN202
    with pytest.raises(InputError) as err:
        Shortlist.load(path, TextPipeline("de"), _tgt_dict(model_words), k=5)
    return str(err.value)


def test_a_compiled_shortlist_of_another_model_or_a_damaged_one_is_refused(tmp_path):
    import numpy as np

    table = write(tmp_path / "lex.txt", "cat maus 3\nthe die 2\n")
    good = tmp_path / "lex.npz"
    compile_shortlist(table, good, TextPipeline("de"), _tgt_dict("die der maus"), lowercase_source=False)
    assert Shortlist.load(good, TextPipeline("de"), _tgt_dict("die der maus"), k=5).key_ids("cat").tolist() == [6]
    assert _compiled_error(good, tmp_path, "die der maus hund").startswith(f"{good}: was compiled for another model")
    with pytest.raises(InputError, match="was compiled for another model"):  # the source lowercasing is part of it
        Shortlist.load(good, TextPipeline("de"), _tgt_dict("die der maus"), k=5, lowercase_source=True)
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[:300])
    assert _compiled_error(truncated, tmp_path).startswith(f"{truncated}: not a readable compiled nmtkit shortlist")
    arrays = dict(np.load(good))
    for name, change, message in [
        ("ids", lambda a: a + 100, "is a damaged compiled shortlist"),
        ("key_offsets", lambda a: a[:-1], "is a damaged compiled shortlist"),
        ("ranks", lambda a: a.astype(np.int64), "is a damaged compiled shortlist"),
        ("meta", lambda a: np.frombuffer(b'{"format": "nmtkit-shortlist", "version": 7}', dtype=np.uint8),
         "compiled shortlist version 7 is not supported"),
        ("meta", lambda a: np.frombuffer(b"\xff\xfe", dtype=np.uint8), "not a compiled nmtkit shortlist"),
        ("meta", lambda a: np.frombuffer(b'{"format": "nmtkit-shortlist", "version": true}', dtype=np.uint8),
         "compiled shortlist version True is not supported"),
        ("keys", None, "not a readable compiled nmtkit shortlist (no keys)"),
        ("ids", lambda a: a.astype(np.float32), "not a readable compiled nmtkit shortlist (ids is not a vector of integers)"),
        ("ids", lambda a: a.reshape(1, -1), "not a readable compiled nmtkit shortlist (ids is not a vector of integers)"),
    ]:
        bad = tmp_path / f"bad_{name}.npz"
        changed = {k: v for k, v in arrays.items() if not (k == name and change is None)}
        if change is not None:
            changed[name] = change(arrays[name])
        np.savez(bad, **changed)
        msg = _compiled_error(bad, tmp_path)
        assert msg.startswith(f"{bad}: ") and message in msg and "\n" not in msg, msg


def test_cli_compile_then_translate_gives_the_text_tables_output(tmp_path):
    from nmtkit.cli.shortlist import command as shortlist

    ckpt, inp, table = _cli_case(tmp_path)
    out = tmp_path / "lex.npz"
    res = CliRunner().invoke(shortlist, ["--path", str(ckpt), "--table", str(table), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "compiled 4 source keys" in res.output
    for k in ("2", "5"):
        flags = ["--shortlist-k", k, "--shortlist-frequent", "3"]
        text = _translate(ckpt, inp, "--shortlist", str(table), *flags)
        compiled = _translate(ckpt, inp, "--shortlist", str(out), *flags)
        assert text.exit_code == compiled.exit_code == 0, compiled.output
        assert compiled.stdout == text.stdout
    other = make_checkpoint(tmp_path / "other.pt", "rnnsearch_tiny", seed=5, words="the cat dog die der Katze Hund .")
    res = _translate(other, inp, "--shortlist", str(out))
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [f"nmtkit-translate: error: {out}: was compiled for another model "
                                               "(target dictionary, target text pipeline or source lowercasing differ); "
                                               "compile it again with nmtkit shortlist --path MODEL (and the --data DIR translate is given)"]


def test_cli_compile_refuses_a_bad_table_and_its_own_inputs_writing_nothing(tmp_path, random_ckpt):
    from nmtkit.cli.shortlist import command as shortlist

    table = write(tmp_path / "lex.txt", "the die 3\ncat Katze x\n")
    out = tmp_path / "lex.npz"
    res = CliRunner().invoke(shortlist, ["--path", str(random_ckpt), "--table", str(table), "-o", str(out)])
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        f"nmtkit-shortlist: error: {table}:2: expected 'source target' or 'source target score', got 'cat Katze x'"]
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["lex.txt", "random.pt"]
    res = CliRunner().invoke(shortlist, ["--path", str(random_ckpt), "--table", str(table), "-o", str(table)])
    assert res.exit_code == 1 and "--output" in res.output and "--table" in res.output
    assert table.read_text(encoding="utf-8") == "the die 3\ncat Katze x\n"
    data = tmp_path / "bin"
    data.mkdir()
    codes = write(data / "bpe.codes", "#version: 0.2\nt h\n")
    res = CliRunner().invoke(shortlist, ["--path", str(random_ckpt), "--table", str(table), "--data", str(data),
                                         "-o", str(codes)])
    assert res.exit_code == 1 and "--output" in res.output and "--data" in res.output, res.output
    assert codes.read_text(encoding="utf-8") == "#version: 0.2\nt h\n"


def test_hostile_compiled_shortlists_are_one_line_errors(tmp_path):
    """Compressed members (a zip bomb, inflate errors), object arrays and a header declaring more
    data than the file holds are refused before anything large is read."""
    import io
    import zipfile

    import numpy as np

    table = write(tmp_path / "lex.txt", "cat maus 3\nthe die 2\n")
    good = tmp_path / "lex.npz"
    compile_shortlist(table, good, TextPipeline("de"), _tgt_dict("die der maus"), lowercase_source=False)
    arrays = dict(np.load(good))
    squeezed = tmp_path / "compressed.npz"
    np.savez_compressed(squeezed, **arrays)
    assert "(meta is compressed)" in _compiled_error(squeezed, tmp_path)
    objects = tmp_path / "objects.npz"
    with zipfile.ZipFile(objects, "w") as zf:
        for name, a in arrays.items():
            buf = io.BytesIO()
            np.save(buf, np.array([1, "x"], dtype=object) if name == "ids" else a, allow_pickle=True)
            zf.writestr(f"{name}.npy", buf.getvalue())
    assert "(ids is not a vector of integers)" in _compiled_error(objects, tmp_path)
    huge = tmp_path / "huge.npz"
    with zipfile.ZipFile(huge, "w") as zf:
        for name, a in arrays.items():
            buf = io.BytesIO()
            np.save(buf, a)
            raw = buf.getvalue()
            if name == "ids":  # the header now claims 10**12 ids
                raw = raw.replace(f"({a.size},)".encode(), b"(1000000000000,)").replace(b" \n", b"\n", 1)
            zf.writestr(f"{name}.npy", raw)
    assert _compiled_error(huge, tmp_path) == f"{huge}: not a readable compiled nmtkit shortlist (ids declares more data than it holds)"


def test_a_table_read_from_a_pipe_loses_no_line(tmp_path):
    """--shortlist <(...) or a FIFO: telling a compiled shortlist from text must not consume the
    pipe's first bytes (a buffered read took up to 8 KiB of the table)."""
    import os
    import threading

    lines = "".join(f"w{i} der {i + 1}\n" for i in range(3000)) + "the die 1\n"
    fifo = tmp_path / "table.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(lines, encoding="utf-8"))
    writer.start()
    try:
        sl = Shortlist.load(fifo, TextPipeline("de"), _tgt_dict("die der"), k=5, frequent=0)
    finally:
        writer.join()
    idx = _tgt_dict("die der").index
    assert sl.key_ids("w0").tolist() == [idx["der"]] and sl.key_ids("the").tolist() == [idx["die"]]
