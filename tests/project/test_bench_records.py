"""The benchmark records and the code that writes and reads them (bench/): one line per run, no
hand-written lines among the measurements, every record names a host, RESULTS.md is what the
records generate and stays short; the host fingerprint, FLOP counts, peer checks and statistics."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import benchlib  # noqa: E402
import flops  # noqa: E402
import host  # noqa: E402
import peers  # noqa: E402
import records  # noqa: E402
import report  # noqa: E402
import stats  # noqa: E402


def _records() -> list[dict]:
    return records.read(records.RESULTS_JSONL)


# -- results.jsonl -------------------------------------------------------------------------------
def test_results_have_no_repeated_runs():
    dropped = records.duplicates(_records())
    assert not dropped, f"{len(dropped)} records repeat an earlier run: `python -m bench records --fix`"


def test_results_have_no_hand_written_records_and_the_archive_marks_them():
    assert not [r for r in _records() if records.hand_written(r)]
    archived = records.read(records.ARCHIVE)
    assert archived and all(r.get("hand_written") for r in archived)
    assert {r["bench"] for r in archived} >= {"m30k_sweep", "ablation"}


def test_every_record_names_a_host():
    for r in _records():
        assert records.host_label(r) != "unknown host (before fingerprints)", r


def test_run_key_ignores_only_the_stamp():
    a = {"bench": "aer", "system": "eflomal", "aer": 0.08, "date": "d1", "commit": "c1", "load": "x"}
    b = {**a, "date": "d2", "commit": "c2", "load": "y", "host": {"id": "h"}}
    assert records.run_key(a) == records.run_key(b)
    assert records.run_key(a) != records.run_key({**a, "aer": 0.081})
    kept, archived, dropped = records.split([a, b, {"bench": "m30k_sweep", "x": 1}])
    assert kept == [a] and dropped == [b] and archived[0]["hand_written"]


def test_append_jsonl_refuses_the_same_run_twice(tmp_path, monkeypatch):
    monkeypatch.setattr(benchlib, "git_commit", lambda: "abc1234")
    path = tmp_path / "r.jsonl"
    h = {"id": "h1", "label": "test host"}
    new = benchlib.append_jsonl([{"system": "s", "v": 1}], {"bench": "x", "host": h}, path=path, regenerate=False)
    assert len(new) == 1
    monkeypatch.setattr(benchlib, "git_commit", lambda: "def5678")  # re-stamped under a later commit
    again = benchlib.append_jsonl([{"system": "s", "v": 1}, {"system": "s", "v": 2}], {"bench": "x", "host": h},
                                  path=path, regenerate=False)
    assert [r["v"] for r in again] == [2]
    assert len(path.read_text().splitlines()) == 2


# -- RESULTS.md ------------------------------------------------------------------------------------
def test_results_md_is_generated_and_short():
    text = report.render(_records(), host.read_hosts())
    assert len(text.splitlines()) <= report.MAX_LINES
    assert (BENCH / "RESULTS.md").read_text(encoding="utf-8") == text, "RESULTS.md is stale: `python -m bench report`"
    older = (BENCH / report.RESULTS_UNPROBED_MD.name).read_text(encoding="utf-8")
    assert older == report.render_unprobed(_records()), "RESULTS-unprobed-hosts.md is stale: `python -m bench report`"


def test_unprobed_hosts_records_are_kept_apart_from_the_probed_ones():
    probed = {"bench": "score_memory", "commit": "abc", "date": "2026-11-28 10:00 UTC", "lines": 7, "maxrss_mb": 11.0,
              "wall_s": 1.0, "host": {"label": "AMD EPYC (family 26, model 2: Zen 5)", "peak_gflops": {"fp32": 1.0}}}
    unprobed = {**probed, "lines": 9, "maxrss_mb": 22.0, "host": None, "cpu": "AMD EPYC"}
    gpu = {"bench": "gpu_train_speed", "commit": "abc", "date": "2026-11-28 10:00 UTC", "device": "NVIDIA H200", "amp": "none",
           "system": "nmtkit-eager", "arch": "luong_wmt_en_de", "tok_s": 5.0}
    main, other = report.render([probed, unprobed, gpu], []), report.render_unprobed([probed, unprobed, gpu])
    assert "| 11 |" in main and "| 22 |" not in main and "NVIDIA H200" in main and "The 1 records" in main
    assert "| 22 |" in other and "| 11 |" not in other and "NVIDIA H200" not in other


def test_every_table_has_a_host_column_and_uncommitted_is_never_hidden():
    text = (BENCH / "RESULTS.md").read_text(encoding="utf-8")
    headers = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line and line.split("|")[1].strip()
               in ("what", "host")]
    assert headers and all("host" in h for h in headers)
    rec = {"bench": "score_memory", "commit": "abc (nmtkit/ has uncommitted changes)", "date": "2026-11-27 10:00 UTC",
           "lines": 1, "maxrss_mb": 1.0, "wall_s": 1.0, "cpu": "AMD EPYC (family 26, model 2)"}
    assert "uncommitted" in report.stamp(rec)
    import glance

    assert "uncommitted" in glance.stamp(rec)[1]


def test_recipe_rows_of_different_presets_do_not_supersede_each_other():
    base = {"bench": "quality", "pair": "en-de", "toolkit": "nmtkit-bf16", "system": "single", "seed": 1, "bleu": 39.0,
            "chrf": 63.0, "cpu": "AMD EPYC (family 26, model 2)", "commit": "abc"}
    older = {**base, "date": "2026-11-24 10:00 UTC"}  # before the recipe took ARCH: no arch field, luong_m30k
    newer = {**base, "date": "2026-11-27 10:00 UTC", "arch": "transformer_tiny", "bleu_lc_tok": 39.5}
    groups, folded = report.newest_by_host([older, newer], "quality", next(s[2] for s in report.SECTIONS if s[0] == "quality"))
    assert folded == 0 and sorted(r.get("arch", "") for _, rows in groups for r in rows) == ["", "transformer_tiny"]
    text = report.render_unprobed([older, newer])  # no host probe in either: the unprobed hosts' file
    assert "| luong_m30k |" in text and "| transformer_tiny |" in text and "| 39.50 |" in text
    groups, folded = report.newest_by_host([older, {**older, "date": "2026-11-25 10:00 UTC", "arch": "luong_m30k"}], "quality",
                                           ("pair", "toolkit", "arch", "system", "seed"))
    assert folded == 1


# -- host -------------------------------------------------------------------------------------------
CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse avx2 fma avx512f avx512bw avx512_bf16 amx_tile

processor\t: 1
vendor_id\t: AuthenticAMD
"""


def test_fingerprint_reads_the_cpu_and_its_kernel_deciding_flags():
    fp = host.fingerprint(None, CPUINFO)
    assert (fp["vendor"], fp["family"], fp["model"], fp["stepping"]) == ("AuthenticAMD", 26, 2, 1)
    assert fp["flags"] == ["avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "amx_tile"]
    assert fp["label"] == "AMD EPYC (family 26, model 2: Zen 5)"
    assert fp["torch"] and fp["blas"] and "id" in fp
    assert host.fingerprint(None, CPUINFO.replace("cpu family\t: 26", "cpu family\t: 25"))["id"] != fp["id"]


def test_labels_of_old_records():
    assert host.label_of_record({"cpu": "AMD EPYC (family 25, model 17)"}) == "AMD EPYC (family 25, model 17)"
    assert host.label_of_record({"host_derived": "AMD EPYC, 2 cores (derived: x)"}) == "AMD EPYC (family not recorded)"
    assert host.label_of_record({"device": "NVIDIA H100 80GB HBM3 (device tool: 16 CPU cores)"}) == "NVIDIA H100 80GB HBM3"
    assert host.label_of_record({}) == "unknown host (before fingerprints)"


def test_probe_cache_is_per_host(tmp_path):
    path = tmp_path / "hosts.jsonl"
    fp = host.fingerprint(None, CPUINFO)
    assert host.cached_peak(fp["id"], path) is None
    host.record_probe(fp, {"fp32": {"gflops": 100.0}, "bf16": {"gflops": 300.0}}, path)
    assert host.cached_peak(fp["id"], path)["fp32"]["gflops"] == 100.0
    assert host.host_for_record(fp, path)["peak_gflops"] == {"fp32": 100.0, "bf16": 300.0}
    assert host.cached_peak("other", path) is None


def test_probe_runs_small():
    got = host.probe(seconds=0.01, n=64)
    assert got["fp32"]["gflops"] > 0 and got["threads"] == 1


# -- FLOPs ------------------------------------------------------------------------------------------
def test_flops_cover_every_architecture():
    s, r, t = 13.0, 1.0, 14.0
    from nmtkit.models import registry

    archs = ["luong_small", "luong_m30k", "rnnsearch_small", "rnnencdec_small", "rnnencdec_50", "luong_wmt_en_de"]
    archs += [a for a in registry.list_archs() if a.startswith("transformer")]  # the Transformer's presets, where registered
    for arch in archs:
        model, cfg = flops.arch_config(arch)
        assert flops.model_macs(model, cfg, 10000, s, r, t) > 0
    # the output layer dominates a small model: luong_small's forward MACs per token are within 10 % of
    # a hand count (decoder 2 LSTM layers, attention, W_c, output layer, encoder)
    model, cfg = flops.arch_config("luong_small")
    h, e, v = 256, 256, 10000
    hand = (4 * h * (e + h) + 4 * h * 2 * h) * r + h * h * r + (4 * h * (e + 2 * h) + 4 * h * 2 * h) + 2 * s * h + 2 * h * h + h * v
    assert flops.model_macs(model, cfg, v, s, r, t) == pytest.approx(hand, rel=1e-9)


def test_transformer_flops_standard_count():
    cfg = {"embed_dim": 512, "ffn_dim": 2048, "heads": 8, "encoder_layers": 6, "decoder_layers": 6}
    d, f, v = 512, 2048, 32000
    # about 2 x the non-embedding parameters per token (Kaplan et al.) plus attention over lengths
    params = 6 * (4 * d * d + 2 * d * f) + 6 * (8 * d * d + 2 * d * f)
    macs = flops.transformer_macs(cfg, v, s=1.0, r=1.0, t=1.0)
    assert macs == pytest.approx(params + d * v + 6 * 2 * d + 6 * (2 * d + 2 * d), rel=1e-9)
    assert flops.transformer_macs({**cfg, "encoder_layers": 12}, v, 20, 1, 20) > flops.transformer_macs(cfg, v, 20, 1, 20)


def test_share_of_peak():
    fields = flops.speed_fields(5000, 5e6, {"fp32": 100.0, "bf16": 300.0}, "bf16")
    assert fields["flops_per_tok"] == 30_000_000 and fields["achieved_gflops"] == 150.0
    assert fields["peak_precision"] == "bf16" and fields["share_of_peak"] == 0.5
    assert "share_of_peak" not in flops.speed_fields(5000, 5e6, None, "none")


# -- peers ------------------------------------------------------------------------------------------
def test_onmt_count_matches_what_opennmt_printed():
    # shared/peers/README.md: OpenNMT-py's smoke model (emb 128, hidden 256, 2 layers, vocab ~195) has 2.40 M
    assert peers.onmt_rnn_params(195, 195, 128, 256, 2, brnn=False) == 2_401_987


def test_same_shape_pairs_and_the_refusal():
    v = 8000
    # luong_small against OpenNMT-py's unidirectional rnn: the same model, parameter for parameter
    assert peers.nmtkit_params("luong_small", v, v) == peers.onmt_rnn_params(v, v, 256, 256, 2, brnn=False)
    # luong_m30k's default bidirectional encoder (128 per direction) against OpenNMT-py's brnn 256 with shared
    # embeddings: the same but for the bridge (OpenNMT-py's maps the per-direction states: 2 x (256^2 + 256)
    # against nmtkit's 2 x (512 x 512 + 512))
    onmt = peers.onmt_rnn_params(v, v, 256, 256, 2, brnn=True, bridge=True, share_embeddings=True, share_decoder_embeddings=True)
    assert peers.nmtkit_params("luong_m30k", v, v) - onmt == 2 * (512 * 512 + 512) - 2 * (256 * 256 + 256)
    no_bridge = peers.onmt_rnn_params(v, v, 256, 256, 2, brnn=True, bridge=False, share_embeddings=True,
                                      share_decoder_embeddings=True)
    assert onmt - no_bridge == 2 * (256 * 256 + 256)
    # brnn with hidden_size 512 is not nmtkit's 256 per direction: its decoder is 512 wide
    wide = peers.onmt_rnn_params(v, v, 256, 512, 2, brnn=True, bridge=True, share_embeddings=True, share_decoder_embeddings=True)
    with pytest.raises(peers.CheckFailed):
        peers.check_shape(peers.nmtkit_params("luong_m30k", v, v, encoder_hidden_size=256), wide, "same", "qph")
    assert "closest" in peers.check_shape(100, 150, "closest", "x")


def test_onmt_transformer_count_matches_what_opennmt_printed():
    # OpenNMT-py 3.5.1 printed "* number of parameters: 2144976" for quality_per_hour's Transformer
    # config (onmt_yaml(transformer=True)) with a shared vocabulary of 6,352 (a 2-step dry run)
    assert peers.onmt_transformer_params(6352, 128, 256, 4, 4) == 2144976
    tiny = peers.nmtkit_params("transformer_tiny", 6352, 6352)
    peers.check_shape(tiny, 2144976, "same", "opennmt-transformer")  # within 1 %: its generator bias and final norms


def test_noam_peaks_where_the_recipe_does():
    scale, d, warmup = benchlib.noam_scale(0.005, 128, 2000), 128, 2000
    noam = lambda step: scale * d ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)  # noqa: E731 - OpenNMT-py's formula
    assert abs(noam(warmup) - 0.005) < 1e-12
    assert abs(noam(8000) - 0.005 * (warmup / 8000) ** 0.5) < 1e-12  # the same inverse square root as fairseq's after warm-up


def test_every_decoder_searches_alike():
    import quality_per_hour as qph

    peers.check_decoding({qph.toolkit(s): qph.decoding(s, 5) for s in qph.SYSTEMS})
    assert "--normalize" in [str(a) for a in qph.decoding("marian", 5)]
    bad = {"marian": ["--beam-size", 5, "--normalize", 0, "--max-length-factor", 1.5]}
    with pytest.raises(peers.CheckFailed):
        peers.check_decoding(bad)


def test_an_interrupted_run_starts_again_and_a_finished_one_is_kept(tmp_path):
    import quality_per_hour as qph

    assert qph.set_aside_interrupted(tmp_path / "fairseq") is None  # never started: nothing to move
    run = tmp_path / "fairseq.seed2"
    (run / "ckpt").mkdir(parents=True)
    (run / "ckpt" / "checkpoint_last.pt").write_text("x")
    aside = qph.set_aside_interrupted(run)
    assert aside is not None and not run.exists() and (aside / "ckpt" / "checkpoint_last.pt").is_file()
    assert aside.name.startswith("fairseq.seed2.interrupted-")
    (tmp_path / "opennmt" / "eval.json").parent.mkdir()
    (tmp_path / "opennmt" / "eval.json").write_text("{}")
    assert qph.runs_in(tmp_path) == ["opennmt"]  # the set-aside run is not a run of the report


def test_fairseq_is_evaluated_with_its_average_and_its_own_weights_and_keeps_the_better(tmp_path, monkeypatch):
    """A fairseq checkpoint's valid BLEU is the better of its --store-ema average and its own
    weights (the average has no warm-up), each checkpoint timed by the run's own file; others
    are evaluated once."""
    import os
    import types

    import quality_per_hour as qph

    run = tmp_path / "tune" / "fairseq.tune0"
    (run / "ckpt").mkdir(parents=True)
    (run / "ckpt" / "checkpoint1.pt").write_text("x")
    (run / "ckpt" / "checkpoint2.pt").write_text("x")
    start = 1_000_000.0
    for k, t in ((1, 600), (2, 1200)):
        os.utime(run / "ckpt" / f"checkpoint{k}.pt", (start + t, start + t))
    (run / "train.json").write_text(json.dumps({"system": "fairseq", "start": start}))
    monkeypatch.setattr(qph, "fairseq_ema_weights", lambda args, ck: ck.parent.parent / "ema" / ck.name)
    bleu = {"checkpoint1.pt": {"ema": 0.4, "raw": 9.0}, "checkpoint2.pt": {"ema": 21.0, "raw": 20.0}}
    translated = []

    def fake_translate(args, system, ck, src, beam, w, hyp, core):  # noqa: ANN001
        translated.append(hyp.name)
        hyp.write_text(json.dumps(bleu[ck.name]["ema" if ck.parent.name == "ema" else "raw"]))

    monkeypatch.setattr(qph, "translate", fake_translate)
    monkeypatch.setattr(qph, "scores", lambda hyp, ref: {"bleu": json.loads(hyp.read_text())})
    monkeypatch.setattr(qph, "sources", lambda args, split, txt: {False: tmp_path / "valid.en"})
    monkeypatch.setattr(qph, "fresh_output", lambda hyp, ck, src: False)
    args = types.SimpleNamespace(data=tmp_path)
    result = qph.eval_one(args, "tune/fairseq.tune0", 0, tmp_path, tmp_path, test=False)
    assert sorted(translated) == ["valid.1.ema.de", "valid.1.raw.de", "valid.2.ema.de", "valid.2.raw.de"]
    assert [(c["checkpoint"], c["weights"], c["valid_bleu"], c["wall_s"]) for c in result["curve"]] == [
        ("1", "raw", 9.0, 600.0), ("2", "ema", 21.0, 1200.0)]
    assert result["best"]["path"].endswith("ema/checkpoint2.pt")


def test_each_group_of_side_by_side_systems_trains_all_its_seeds_before_the_next():
    import quality_per_hour as qph

    runs = qph.training_runs(["nmtkit-transformer", "fairseq-transformer", "opennmt-transformer"], [1, 2], 2)
    waves = [runs[i:i + 2] for i in range(0, len(runs), 2)]
    assert waves == [["nmtkit-transformer", "fairseq-transformer"],
                     ["nmtkit-transformer.seed2", "fairseq-transformer.seed2"],
                     ["opennmt-transformer", "opennmt-transformer.seed2"]]
    assert qph.training_runs(["a", "b"], [1, 2], 1) == ["a", "a.seed2", "b", "b.seed2"]


def test_a_wave_that_would_outlast_the_deadline_is_not_started(tmp_path, capsys):
    import time

    import quality_per_hour as qph

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "train.json").write_text("{}")
    assert qph.wave_seconds(tmp_path, ["a", "b"], 1.0) == 3600 + qph.WAVE_MARGIN_S  # b has not trained
    assert qph.wave_seconds(tmp_path, ["a"], 1.0) == qph.WAVE_MARGIN_S  # trained, not evaluated
    (tmp_path / "a" / "eval.json").write_text("{}")
    assert qph.wave_seconds(tmp_path, ["a"], 1.0) == 0.0
    soon = time.time() + 600
    benchlib.stop_before_deadline(soon, 60, "a short part")  # fits: returns
    benchlib.stop_before_deadline(None, 10 ** 9, "no deadline")
    with pytest.raises(SystemExit) as stop:
        benchlib.stop_before_deadline(soon, 3600, "the wave x")
    assert stop.value.code == benchlib.DEADLINE_EXIT and "not starting the wave x" in capsys.readouterr().out
    assert benchlib.parse_deadline("2026-11-28T16:20") == pytest.approx(
        __import__("datetime").datetime(2026, 11, 28, 16, 20).timestamp())
    assert time.localtime(benchlib.parse_deadline("07:05"))[3:5] == (7, 5)
    assert time.time() < benchlib.parse_deadline("07:05") <= time.time() + 86400  # the next 07:05, never one gone by
    with pytest.raises(SystemExit):
        benchlib.stop_before_deadline(time.time() - 60, 10, "a wave after the deadline")
    benchlib.stop_before_deadline(time.time() - 60, 0, "a finished wave")  # nothing left to run: never stops
    with pytest.raises(Exception, match="not a time"):
        benchlib.parse_deadline("soon")


def test_both_re_measuring_lists_name_every_suite():
    """RESULTS.md's "Re-measuring every headline" (report.REMEASURE) and bench/README.md's list
    name every suite of ``python -m bench``, so neither leaves a headline out."""
    import importlib.util
    import re

    spec = importlib.util.spec_from_file_location("bench_main", BENCH / "__main__.py")
    main = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(main)
    in_report = {suite for suite, _ in report.REMEASURE if not suite.startswith("(")}
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    in_readme = set(re.findall(r"python -m bench run ([a-z0-9-]+) --record", readme))
    assert in_report == set(main.SUITES), set(main.SUITES) ^ in_report
    assert in_readme == set(main.SUITES), set(main.SUITES) ^ in_readme


def test_score_memory_reports_the_sacrebleu_peer_and_whether_the_scores_agree():
    import score_memory as sm

    ok = {"peer": "sacrebleu 2.6.0", "peer_cap_gib": 16.0, "peer_rc": 0, "peer_maxrss_mb": 900.0, "peer_wall_s": 60.0,
          "peer_scores": {"BLEU": 68.86, "chrF2": 80.89}}
    assert "(the same scores)" in sm.peer_line(ok, {"BLEU": 68.861, "chrF2": 80.888})
    assert "(the same scores)" in sm.peer_line({**ok, "peer_scores": {"BLEU": 68.865}}, {"BLEU": 68.86})  # a rounding tie
    assert "DIFFER" in sm.peer_line(ok, {"BLEU": 68.9, "chrF2": 80.89})
    capped = {**ok, "peer_rc": 1, "peer_scores": {}, "peer_failure": "its 16 GiB address-space cap"}
    assert "did not finish (status 1; its 16 GiB address-space cap)" in sm.peer_line(capped, {})
    assert sm.peer_line({}, {}) == ""


def test_score_memory_runs_sacrebleu_and_tells_the_cap_from_other_failures(tmp_path, monkeypatch):
    import score_memory as sm

    (tmp_path / "ref.txt").write_text("The cat sits on the mat .\nA dog runs .\n")
    (tmp_path / "sys.txt").write_text("The cat sat on the mat .\nA dog runs .\n")
    ok = sm.sacrebleu_run(tmp_path, tmp_path / "sys.txt", tmp_path / "ref.txt", 8.0)
    assert set(ok["peer_scores"]) == {"BLEU", "chrF2"} and ok["peer_rc"] == 0 and "peer_failure" not in ok
    missing = sm.sacrebleu_run(tmp_path, tmp_path / "nothing.txt", tmp_path / "ref.txt", 8.0)
    assert missing["peer_scores"] == {} and missing["peer_rc"] != 0 and "cap" not in missing["peer_failure"]

    def out_of_memory(cmd, log, stdout=None, **kw):  # what a run that hits the cap leaves behind
        Path(log).write_text("Traceback (most recent call last):\nMemoryError\n")
        Path(stdout).write_text("")
        return benchlib.Run(cmd=cmd, wall=3.0, user=2.0, sys=1.0, maxrss_mb=900.0, tree_rss_mb=900.0, rc=1)

    monkeypatch.setattr(benchlib, "run_cmd", out_of_memory)
    capped = sm.sacrebleu_run(tmp_path, tmp_path / "sys.txt", tmp_path / "ref.txt", 16.0)
    assert capped["peer_scores"] == {} and capped["peer_failure"] == "its 16 GiB address-space cap"


def test_translate_speed_shares_of_peak_cover_same_shape_peers_but_not_shortlists(monkeypatch, tmp_path):
    import flops
    import translate_speed as ts

    monkeypatch.setattr(flops, "checkpoint_shape", lambda ckpt: ("transformer", {}, 100))
    monkeypatch.setattr(flops, "data_stats", lambda *a: {"s": 10, "t": 10})
    monkeypatch.setattr(flops, "sentence_decode_macs", lambda *a: 1)
    monkeypatch.setattr(flops, "decode_flops", lambda macs: 1e9)  # 1 GFLOP a sentence
    monkeypatch.setattr(benchlib, "this_host", lambda peers=None: {"peak_gflops": {"fp32": 100.0, "bf16": 200.0}})
    rows = [{"toolkit": "nmtkit", "path": "fp32", "model": "nmtkit-transformer"},
            {"toolkit": "nmtkit", "path": "bf16", "model": "nmtkit-transformer"},
            {"toolkit": "nmtkit", "path": "int8", "model": "nmtkit-transformer"},
            {"toolkit": "nmtkit", "path": "int8+shortlist", "model": "nmtkit-transformer"},
            {"toolkit": "ctranslate2", "path": "fp32", "model": "ctranslate2-transformer"},
            {"toolkit": "opennmt", "path": "fp32", "model": "opennmt"}]
    for r in rows:
        r.update(threads=1, sent_s_net=50.0)
    ts.add_flop_shares(rows, tmp_path / "x.pt", tmp_path, tmp_path)
    assert [r.get("share_of_peak") for r in rows] == [0.5, 0.25, None, None, 0.5, None]
    assert [r.get("gflops_net") for r in rows] == [50.0, 50.0, 50.0, None, 50.0, None]  # int8: FLOP/s, no int8 peak


def test_an_unfinished_aer_round_is_redone_from_the_round_before(tmp_path, monkeypatch):
    import aer_hansards as aer

    save = tmp_path / "ckpt-en-fr"
    save.mkdir()
    (save / "checkpoint_round1.pt").write_text("end of round 1")
    (save / "checkpoint_round1.train_log.jsonl").write_text('{"event": "start"}\n')
    (save / "checkpoint_last.pt").write_text("half of round 2")  # a session ended inside round 2
    (save / "train_log.jsonl").write_text('{"event": "start"}\n{"event": "start"}\n')

    class Steps:  # round 2's step never finished; running it writes the round's end
        runs: dict = {}

        def done(self, name):  # noqa: ANN001, ANN201
            return None

        def parallel(self, jobs):  # noqa: ANN001, ANN201
            assert (save / "checkpoint_last.pt").read_text() == "end of round 1"
            assert (save / "train_log.jsonl").read_text() == '{"event": "start"}\n'
            (save / "checkpoint_last.pt").write_text("end of round 2")
            self.runs = {n: type("Run", (), {"rc": 124})() for n in jobs}

    monkeypatch.setattr(aer, "train_cmd", lambda *a, **k: ["true"])
    aer.train_pair(Steps(), None, tmp_path, {"train-en-fr-round2": (tmp_path, save, "x", 60)}, fresh=False,
                   snapshot="checkpoint_round2.pt", previous="checkpoint_round1.pt")
    assert (save / "checkpoint_round2.pt").read_text() == "end of round 2"
    assert (save / "checkpoint_round2.train_log.jsonl").is_file()


def test_gpu_report_reads_the_toolkit_peer_beside_nmtkit(tmp_path):
    """bench/gpu_onmt.py's rows join gpu_speed.py's: nmtkit's training rows get their ratio to the
    fastest OpenNMT-py run of the same model, and OpenNMT-py's pieces are scored as text."""
    import gpu_speed

    d = tmp_path / "out"
    d.mkdir()
    base = {"device": "GPU", "torch": "2", "commit": "abc", "arch": "luong_wmt_en_de", "bench": "gpu_train_speed"}
    mine = [{**base, "system": "nmtkit-graphs", "amp": "bf16", "tok_s": 120.0},
            {**base, "system": "plain-lstmcell", "amp": "bf16", "tok_s": 80.0},
            {**base, "system": "nmtkit-transformer", "arch": "transformer_base", "amp": "bf16", "tok_s": 750.0}]
    theirs = [{**base, "system": "opennmt-lstm", "amp": "none", "tok_s": 50.0},
              {**base, "system": "opennmt-lstm", "amp": "fp16", "tok_s": 60.0},
              {**base, "system": "opennmt-transformer", "arch": "transformer_base", "amp": "fp16", "tok_s": 500.0},
              {**base, "bench": "gpu_translate_command", "system": "opennmt-transformer", "arch": "transformer_base",
               "amp": "none", "sent_s": 100.0, "hyp_pieces": "/there/opennmt-transformer.test.hyp"}]
    (d / "gpu_rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mine))
    (d / "gpu_onmt_rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in theirs))
    (d / "opennmt-transformer.test.hyp").write_text("Ein Hund l@@ äuft .\nZwei Männer .\n")
    ref = tmp_path / "ref.de"
    ref.write_text("Ein Hund läuft.\nZwei Männer.\n")
    rows = {(r["system"], r["amp"], r["bench"]): r for r in gpu_speed._read_rows([str(d)], str(ref))}
    graphs = rows["nmtkit-graphs", "bf16", "gpu_train_speed"]
    assert graphs["ratio_vs_toolkit"] == 2.0 and graphs["toolkit_peer"] == "opennmt-lstm fp16"
    assert graphs["ratio_vs_peer"] == 1.5 and "ratio_vs_toolkit" not in rows["opennmt-lstm", "fp16", "gpu_train_speed"]
    assert rows["opennmt-transformer", "none", "gpu_translate_command"]["bleu"] == 100.0
    t = rows["nmtkit-transformer", "bf16", "gpu_train_speed"]  # against OpenNMT-py's Transformer, not the LSTM loop
    assert t["ratio_vs_toolkit"] == 1.5 and t["toolkit_peer"] == "opennmt-transformer fp16" and "ratio_vs_peer" not in t


def test_recipe_training_time_counts_a_run_killed_without_an_end_record(tmp_path):
    import quality

    log = tmp_path / "train_log.jsonl"
    events = [{"time": 0, "event": "start"}, {"time": 1500, "event": "valid", "update": 1795},
              {"time": 1504, "event": "train", "update": 1800, "superseded": True},  # redone after the resume
              {"time": 2000, "event": "start"}, {"time": 7000, "event": "end", "update": 8000}]
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert quality.read_log(log)["train_wall_s"] == 1500 + 5000


def test_check_flags_against_help():
    peers.check_flags(Path("tool"), ["--beam", 5, "--lenpen", 1.0, "-1"], help_text="usage: --beam N --lenpen X")
    with pytest.raises(peers.CheckFailed):
        peers.check_flags(Path("tool"), ["--beam", 5, "--normalise"], help_text="usage: --beam N")
    with pytest.raises(peers.CheckFailed):  # a prefix of a listed flag is not the flag
        peers.check_flags(Path("tool"), ["--max-len"], help_text="usage: --max-len-a A --max-len-b B")


def test_onmt_count_of_the_quality_per_hour_config():
    # OpenNMT-py 3.5.1 printed "* number of parameters: 4483368" for quality_per_hour's onmt_yaml
    # (brnn 256, bridge, shared embeddings) at a 7,976-word shared vocabulary (a 2-step dry run)
    assert peers.onmt_rnn_params(7976, 7976, 256, 256, 2, brnn=True, bridge=True, share_embeddings=True,
                                 share_decoder_embeddings=True) == 4_483_368


def test_every_setup_names_its_source():
    for s in peers.SETUPS:
        assert s.source and s.shape in ("same", "closest") and s.averaging and s.schedule


# -- statistics -------------------------------------------------------------------------------------
def test_mean_spread_and_paired_bootstrap():
    assert stats.mean_spread([38.0, 39.0]) == {"n": 2, "mean": 38.5, "sd": 0.71, "min": 38.0, "max": 39.0}
    refs = [f"a small cat number {i} sits on the mat ." for i in range(60)]
    worse = [r if i % 2 else "a dog ." for i, r in enumerate(refs)]
    out = stats.paired_bootstrap(worse, refs, refs, n_samples=100)
    assert out["BLEU"]["delta"] > 0 and out["chrF"]["delta"] > 0 and out["BLEU"]["p"] < 0.05


# -- the entry point ---------------------------------------------------------------------------------
def test_every_suite_plans_and_record_refuses_a_dirty_tree(monkeypatch, capsys):
    import importlib

    sys.path.insert(0, str(BENCH.parent))
    main = importlib.import_module("bench.__main__")
    for suite in main.SUITES:
        steps = main.plan(suite, None, ["--record"], [], smoke=False)
        # every step records, except a step that only measures for a later one (the GPU machine's)
        assert steps and all(("--record" in argv) != ((m, argv[0]) in main.NO_RECORD) for m, argv in steps)
        assert steps[-1][1].count("--record") == 1
    monkeypatch.setattr(benchlib, "uncommitted_changes", lambda: ["nmtkit/x.py"])
    with pytest.raises(SystemExit, match="committed tree"):
        main.refuse_record(smoke=False)
    with pytest.raises(SystemExit, match="never records"):
        main.refuse_record(smoke=True)


def test_steps_select_a_suites_steps_by_their_plan_numbers(capsys):
    import argparse
    import importlib

    sys.path.insert(0, str(BENCH.parent))
    main = importlib.import_module("bench.__main__")
    assert main.parse_steps("1-3,7") == {1, 2, 3, 7} and main.parse_steps("4") == {4}
    for bad in ("0", "3-2", "a", "1,,2"):
        with pytest.raises(argparse.ArgumentTypeError):
            main.parse_steps(bad)
    main.main(["plan", "train-speed", "--steps", "2,5"])
    lines = [ln for ln in capsys.readouterr().out.splitlines() if not ln.startswith("#")]
    every = main.plan("train-speed", None, [], [], smoke=False)
    assert [ln.split()[0] for ln in lines] == ["2", "5"]
    assert lines[1].endswith(" ".join(every[4][1]))
    with pytest.raises(SystemExit):
        main.main(["plan", "train-speed", "--steps", f"{len(every) + 1}"])


def test_a_tree_with_only_records_and_report_pictures_changed_is_its_commit():
    status = ("?? nmtkit/new_module.py\n M bench/quality_per_hour_transformer.png\n M bench/results.jsonl\n"
              " M nmtkit/models/luong.py\n?? notes.txt\n M bench/RESULTS.md\n M bench/history/old.png\n"
              "R  bench/a.py -> bench/b.py\n")
    assert benchlib.code_changes(status) == ["nmtkit/new_module.py", "nmtkit/models/luong.py", "bench/history/old.png",
                                             "bench/b.py"]


def test_quality_per_hour_runs_and_the_same_tuning_grid_for_all(tmp_path):
    import quality_per_hour as qph

    assert qph.run_name("opennmt", 1) == "opennmt" and qph.run_name("opennmt", 2) == "opennmt.seed2"
    assert [qph.system_of(r) for r in ("nmtkit-bf16", "nmtkit-bf16.seed2", "tune/fairseq.tune3")] == ["nmtkit-bf16"] * 2 + ["fairseq"]
    assert qph.seed_of("marian.seed2") == 2 and qph.seed_of("marian") == 1
    assert qph.hp_of_run(tmp_path, "tune/marian.tune1") == qph.TUNING_GRID[1]
    assert qph.hp_of_run(tmp_path, "marian") == qph.DEFAULT_HP["marian"]  # not tuned: documented settings
    (tmp_path / "tune").mkdir()
    (tmp_path / "tune" / "marian.choice.json").write_text(json.dumps({"hp": {"dropout": 0.3, "lr": 0.002}}))
    assert qph.hp_of_run(tmp_path, "marian.seed2") == {"dropout": 0.3, "lr": 0.002}
    assert set(qph.DEFAULT_HP) == set(qph.SYSTEMS)
    assert qph.usable_cores()


def test_the_transformer_pair_averages_the_last_epoch_checkpoints_with_each_toolkits_own_tool(tmp_path, monkeypatch):
    """Both averages are the mean of the last N epoch checkpoints' weights: nmtkit-average for nmtkit,
    the fairseq snippet (run here with this Python: it needs only torch) for fairseq's layout."""
    import torch

    import quality_per_hour as qph
    from tests.helpers import make_checkpoint

    assert set(qph.AVERAGE_LAST) == {"nmtkit-transformer", "fairseq-transformer", "opennmt-transformer"}
    monkeypatch.setattr(qph, "peer_bin", lambda args, venv, tool: Path(sys.executable))
    fair, ours = tmp_path / "fairseq-transformer", tmp_path / "nmtkit-transformer"
    (fair / "ckpt").mkdir(parents=True)
    for epoch in range(1, 5):  # fairseq's layout: {"model": state dict, ...}; an int tensor stays the newest's
        torch.save({"model": {"w": torch.full((2,), float(epoch)), "version": torch.tensor([epoch])}, "epoch": epoch},
                   fair / "ckpt" / f"checkpoint{epoch}.pt")
    (fair / "ckpt" / "checkpoint_last.pt").write_bytes((fair / "ckpt" / "checkpoint4.pt").read_bytes())
    label, out, epochs = qph.average_last(None, "fairseq-transformer", fair, 3)
    got = torch.load(out, weights_only=False)
    assert (label, epochs) == ("avg3", ["2", "3", "4"]) and got["model"]["w"].tolist() == [3.0, 3.0]
    assert got["model"]["version"].tolist() == [4] and got["epoch"] == 4
    (ours / "ckpt").mkdir(parents=True)
    for epoch in (1, 2):
        make_checkpoint(ours / "ckpt" / f"checkpoint{epoch}.pt", "transformer_test", seed=epoch)
    label, out, epochs = qph.average_last(None, "nmtkit-transformer", ours, 10)
    states = [torch.load(ours / "ckpt" / f"checkpoint{e}.pt", weights_only=False)["model"] for e in (1, 2)]
    avg = torch.load(out, weights_only=False)["model"]
    key = next(k for k, v in states[0].items() if v.is_floating_point() and not torch.equal(v, states[1][k]))
    assert (label, epochs) == ("avg2", ["1", "2"]) and torch.allclose(avg[key], (states[0][key] + states[1][key]) / 2)
    (ours / "ckpt" / "checkpoint2.pt").unlink()
    assert qph.average_last(None, "nmtkit-transformer", ours, 10) is None  # one checkpoint: nothing to average
    onmt = tmp_path / "opennmt-transformer" / "ckpt"  # OpenNMT-py counts steps: model_step_N.pt, averaged by its own tool
    onmt.mkdir(parents=True)
    for step in (117, 234, 351):
        (onmt / f"model_step_{step}.pt").write_text("x")
    ran = []
    monkeypatch.setattr(qph.bl, "run_cmd", lambda cmd, *a, **k: ran.append([str(c) for c in cmd]))
    label, out, epochs = qph.average_last(None, "opennmt-transformer", onmt.parent, 2)
    assert (label, epochs) == ("avg2", ["234", "351"])
    assert ran[0][1:] == ["-models", str(onmt / "model_step_234.pt"), str(onmt / "model_step_351.pt"), "-output", str(out)]


def test_fairseq_transformer_layout_is_nmtkits():
    """The same-shape claim of the Transformer peer rests on this count (bench/peers.py)."""
    for v in (1000, 8008):
        assert peers.fairseq_transformer_params(v, 128, 256, 4, 4) == peers.nmtkit_params("transformer_tiny", v, v)
    # fairseq 0.12.2 logs 4 x 131,968 more for the tiny shape: untrained fused copies of the encoder weights
    assert peers.fairseq_unused_encoder_copies(128, 256, 4) == 4 * 131_968


def test_fairseq_train_inner_lines_give_tokens_per_second():
    import train_speed

    log = "\n".join([
        "2026-11-27 20:45:01 | INFO | fairseq_cli.train | num. shared model params: 1,938,944 (num. trained: 1,938,944)",
        '2026-11-27 20:45:29 | INFO | train_inner | {"epoch": 1, "wps": "1000", "wpb": "3000", "num_updates": "50", "wall": "28"}',
        '2026-11-27 20:46:03 | INFO | train_inner | {"epoch": 1, "wps": "2000", "wpb": "4000", "num_updates": "100", "wall": "62"}',
    ])
    st = train_speed.fairseq_loop_stats(log)
    assert st["params"] == 1_938_944 and st["measured_updates"] == 100
    assert st["loop_tokens"] == 50 * 3000 + 50 * 4000
    assert st["steady_tok_s"] == 2000.0  # the second window alone: 200,000 tokens in 100 s
    assert abs(st["loop_tok_s"] - 350_000 / 250) < 1e-9


def test_a_record_without_a_host_takes_the_host_of_its_runs_other_records():
    fingerprinted = {"bench": "quality_per_hour", "log": "logs/run.md", "host": {"label": "Host X"}}
    bare = {"bench": "quality_per_hour_significance", "log": "logs/run.md"}
    other_run = {"bench": "quality_per_hour_significance", "log": "logs/other.md"}
    found = [fingerprinted, bare, other_run]
    assert records.derive_from_run(bare, found).startswith("Host X (derived")
    assert records.derive_from_run(other_run, found) is None  # nothing of its own run says
    assert records.derive_from_run(fingerprinted, found) is None  # has its own


def test_recipe_choice_reads_its_candidates_and_the_recipes_valid_scores(tmp_path):
    import recipe_choice as rc

    assert rc.parse_candidate("tiny16k:ARCH=transformer_tiny,MAX_UPDATE=16000") == (
        "tiny16k", {"ARCH": "transformer_tiny", "MAX_UPDATE": "16000"})
    assert rc.parse_candidate("sa:ARCH=luong_m30k,TRAIN_ARGS=--encoder-self-attention")[1]["TRAIN_ARGS"] == "--encoder-self-attention"
    for bad in ("noarch:MAX_UPDATE=1", "x:HOURS=3,ARCH=a", ":ARCH=a", "x y:ARCH=a", "x:ARCH"):
        with pytest.raises(SystemExit):
            rc.parse_candidate(bad)
    sig = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.5.1"
    (tmp_path / "scores.txt").write_text(
        f"valid.tiny16k-avg5\tvalid.tiny16k-avg5.hyp.de\tBLEU\t40.12\t{sig}\tvalid.tiny16k-avg5.hyp.de\tchrF2\t64.00\t{sig}\t\n"
        f"valid.tiny16k-best\tvalid.tiny16k-best.hyp.de\tBLEU\t39.50\t{sig}\t\n"
        f"test2016.seed1-best\tx\tBLEU\t1.00\t{sig}\t\n"
        f"valid.t-avg10-avg10\tx\tBLEU\t41.00\t{sig}\t\nvalid.t-avg10-best\tx\tBLEU\t40.00\t{sig}\t\n")
    assert rc.valid_scores(tmp_path, "tiny16k") == {"avg": 40.12, "best": 39.5}
    assert rc.valid_scores(tmp_path, "t-avg10") == {"avg": 41.0, "best": 40.0}  # "-avg" in the label itself
    with pytest.raises(SystemExit, match="no valid scores of m30k"):
        rc.valid_scores(tmp_path, "m30k")


def test_glance_recipe_rows_keep_the_newest_of_each_model_precision_and_system():
    import glance

    def rec(arch, system, bleu, date):
        r = {"bench": "quality", "pair": "en-de", "toolkit": "nmtkit-bf16", "system": system, "bleu": bleu, "chrf": 60.0,
             "train_wall_s": 7200, "date": date, "commit": "abc1234"}
        return {**r, "arch": arch} if arch else r

    records = [rec(None, "single", 39.0, "2026-11-24"), rec("transformer_tiny", "single", 38.0, "2026-11-27"),
               rec("transformer_tiny", "single", 40.0, "2026-11-28"), rec("transformer_tiny", "averaged", 40.5, "2026-11-28")]
    rows = list(glance.quality_rows(records))
    labels = [row[0] for row in rows]
    assert len(rows) == 3 and sum("recipe transformer_tiny, bf16, single" in lab for lab in labels) == 1
    assert any("recipe luong_m30k, bf16, single" in lab for lab in labels)  # no arch: before the recipe took ARCH
    assert "BLEU 40.00" in next(row[1] for row in rows if "transformer_tiny, bf16, single" in row[0])  # the newest
    # a run of two seeds: each seed's figure and their mean, not only the seed recorded last
    two = [{**rec("transformer_tiny", "single", bleu, "2026-11-29"), "seed": seed, "chrf": chrf, "bleu_lc_tok": bleu + 0.5}
           for seed, bleu, chrf in ((2, 39.0, 63.0), (1, 41.0, 65.0))]
    row = next(r for r in glance.quality_rows(records + two) if "transformer_tiny, bf16, single" in r[0])
    assert row[1] == ("mean BLEU 40.00 (seeds 41.00, 39.00), chrF 64.00 (seeds 65.00, 63.00), "
                      "lc-tok BLEU 40.50 (seeds 41.50, 39.50)")


def test_glance_aer_rows_take_the_best_reading_of_the_last_round_beside_eflomal():
    import glance

    base = {"bench": "aer", "arch": "transformer_tiny", "date": "2026-11-28 07:00 UTC", "commit": "abc",
            "host": {"label": "AMD EPYC (family 26, model 2: Zen 5)", "peak_gflops": {"fp32": 1.0}}, "train_wall_s": 2400}
    records = [{**base, "system": "eflomal", "symmetrization": "grow-diag-final-and", "aer": 0.084},
               {**base, "system": "nmtkit-guided", "round": 1, "symmetrization": "intersect", "aer": 0.05},  # an earlier round
               {**base, "system": "nmtkit-guided", "round": 2, "symmetrization": "intersect", "aer": 0.11, "alignment_layer": 2},
               {**base, "system": "nmtkit-guided", "round": 2, "symmetrization": "grow-diag-final-and", "aer": 0.09,
                "alignment_layer": 2}]
    (row,) = list(glance.aer_rows(records))
    assert "round 2" in row[0] and row[1] == "AER 0.090 (grow-diag-final-and, layer 2)"
    assert row[2] == "eflomal grow-diag-final-and 0.084"


def test_aer_section_shows_one_symmetrization_per_extra_layer_reading():
    base = {"bench": "aer", "system": "nmtkit-attention", "arch": "transformer_tiny", "round": 1, "align_shift": 0,
            "links_from": "attention", "commit": "abc", "date": "2026-11-28 07:00 UTC",
            "host": {"label": "AMD EPYC (family 26, model 2: Zen 5)", "peak_gflops": {"fp32": 1.0}}}
    recs = [{**base, "symmetrization": "none (en->fr)", "aer": 0.111},
            {**base, "alignment_layer": 3, "symmetrization": "none (en->fr)", "aer": 0.222},
            {**base, "alignment_layer": 3, "symmetrization": "grow-diag-final-and", "aer": 0.333}]
    text = report.render(recs, [])
    assert "| 0.111 |" in text and "| 0.333 |" in text and "| 0.222 |" not in text


def test_every_opennmt_command_runs_with_its_torch_load_setting(tmp_path, monkeypatch):
    """OpenNMT-py 3.5.1 loads checkpoints with torch.load's old default: each of its tools needs
    ONMT_ENV under torch>=2.6 (its averaging failed without it after an hour of training)."""
    import argparse

    import quality_per_hour as qph

    ck = tmp_path / "run" / "ckpt"
    ck.mkdir(parents=True)
    for step in (117, 234, 351):
        (ck / f"model_step_{step}.pt").write_bytes(b"x")
    seen = []
    monkeypatch.setattr(benchlib, "run_cmd", lambda cmd, log=None, **kw: seen.append((cmd, kw.get("env") or {})))
    label, _, epochs = qph.average_last(argparse.Namespace(peers=str(tmp_path / "peers")), "opennmt-transformer",
                                        tmp_path / "run", 10)
    assert label == "avg3" and epochs == ["117", "234", "351"]
    (cmd, env), = seen
    assert Path(cmd[0]).name == "onmt_average_models" and env == benchlib.ONMT_ENV


def test_a_training_leaves_no_process_behind(tmp_path):
    """end_session removes the children a stopped training left (OpenNMT-py's data-loader workers
    outlived its SIGTERM), which would otherwise run beside the next suite's timings."""
    import os
    import signal
    import subprocess
    import time

    import quality_per_hour as qph

    pidfile = tmp_path / "child"
    script = f"import subprocess, sys, time; p = subprocess.Popen(['sleep', '300']); open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(300)"
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    for _ in range(200):
        if pidfile.is_file() and pidfile.read_text():
            break
        time.sleep(0.05)
    child = int(pidfile.read_text())
    proc.send_signal(signal.SIGTERM)  # the parent stops; its child would stay
    proc.wait(timeout=30)
    os.kill(child, 0)  # still there
    qph.end_session(proc)

    def running(pid: int) -> bool:  # a zombie (killed, not yet reaped by init) is not running
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    for _ in range(100):
        if not running(child):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the child outlived end_session")


def test_a_transformer_record_without_ctranslate2_is_refused(tmp_path):
    """CTranslate2 is the fastest decoder of the Transformer pair: a recorded run without it (not
    installed in the fairseq venv) would leave nmtkit's rows without their strongest peer."""
    import argparse

    import translate_speed as ts

    with pytest.raises(SystemExit, match="install ctranslate2"):
        ts.ct2_model(argparse.Namespace(peers=str(tmp_path), record=True), tmp_path, tmp_path, tmp_path)
    assert ts.ct2_model(argparse.Namespace(peers=str(tmp_path), record=False), tmp_path, tmp_path, tmp_path) is None
