"""Plots draw what they should (axes, series, labels, data) and write real PNG files
atomically; the HTML page references and escapes them."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from nmtkit.evaluate.plots import (
    HeatmapEntry,
    plot_attention,
    plot_learning_curve,
    plot_length_buckets,
    write_attention_html,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the IHDR chunk (checks the file is a PNG at all)."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def no_temp_files(directory: Path) -> bool:
    return not any(p.name.endswith(".tmp") for p in directory.iterdir())


def test_attention_heatmap_png(tmp_path: Path) -> None:
    src = ["the", "cat", "sat", "</s>"]
    tgt = ["le", "chat", "<assis>", "</s>"]
    attn = np.eye(4) * 0.7 + 0.075
    out = tmp_path / "a.png"
    fig = plot_attention(out, attn, src, tgt, gold={(0, 0), (1, 1), (9, 9)}, title="example")
    w, h = png_size(out)
    assert w > 100 and h > 100
    assert no_temp_files(tmp_path)
    (ax,) = fig.axes
    assert ax.get_title() == "example"
    assert [t.get_text() for t in ax.get_xticklabels()] == src  # source across the top
    assert [t.get_text() for t in ax.get_yticklabels()] == tgt  # target down the side
    (image,) = ax.get_images()
    np.testing.assert_allclose(image.get_array(), attn)
    (gold,) = ax.collections  # gold links circled; (9, 9) lies outside the matrix and is left out
    assert sorted(map(tuple, gold.get_offsets().tolist())) == [(0.0, 0.0), (1.0, 1.0)]


def test_heatmap_grows_with_sentence_length(tmp_path: Path) -> None:
    short = plot_attention(tmp_path / "short.png", np.full((3, 3), 1 / 3), list("abc"), list("xyz"))
    long_src = [f"w{i}" for i in range(30)]
    long = plot_attention(tmp_path / "long.png", np.full((3, 30), 1 / 30), long_src, list("xyz"))
    assert png_size(tmp_path / "long.png")[0] > png_size(tmp_path / "short.png")[0]
    assert long.get_figwidth() > short.get_figwidth()
    assert not short.axes[0].collections and not short.axes[0].get_title()  # no gold, no title: none drawn


def test_attention_shape_must_match_words(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"shape \(3, 2\), expected \(2, 3\)"):
        plot_attention(tmp_path / "x.png", np.ones((3, 2)), ["a", "b", "c"], ["x", "y"])
    assert not (tmp_path / "x.png").exists()


def test_html_page_references_images_relatively_and_escapes(tmp_path: Path) -> None:
    img_dir = tmp_path / "img"
    images = []
    for k in range(2):
        p = img_dir / f"sent {k}.png"
        plot_attention(p, np.full((2, 2), 0.5), ["a", "b"], ["c", "d"])
        images.append(p)
    page = tmp_path / "html" / "index.html"
    write_attention_html(page, [
        HeatmapEntry(str(images[0]), ["<b>", "&", "x"], ["y"], title="first <pair>"),
        HeatmapEntry(str(images[1]), ["a"], ['"q"']),
    ])
    text = page.read_text(encoding="utf-8")
    srcs = re.findall(r'<img src="([^"]+)"', text)
    assert srcs == ["../img/sent%200.png", "../img/sent%201.png"]
    for s in srcs:  # the links resolve to the PNGs from the page's folder
        assert (page.parent / s.replace("%20", " ")).resolve() == (img_dir / Path(s).name.replace("%20", " "))
    assert "&lt;b&gt; &amp; x" in text and "first &lt;pair&gt;" in text and "&quot;q&quot;" in text
    assert "<b>&" not in text


def test_learning_curve_png(tmp_path: Path) -> None:
    out = tmp_path / "curve.png"
    fig = plot_learning_curve(out, [120.0, 40.0, 12.5, 9.8], train_ppl=[150.0, 45.0, 11.0, 7.5], title="run")
    assert png_size(out)[0] > 100
    (ax,) = fig.axes  # no BLEU given: no second y axis
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("epoch", "perplexity", "run")
    assert ax.get_yscale() == "log"  # perplexity spans more than a factor of 10
    valid, train = ax.get_lines()
    assert list(valid.get_xdata()) == [1, 2, 3, 4] and list(valid.get_ydata()) == [120.0, 40.0, 12.5, 9.8]
    assert list(train.get_ydata()) == [150.0, 45.0, 11.0, 7.5]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["validation", "train"]
    with pytest.raises(ValueError, match="3 epochs but 2 training"):
        plot_learning_curve(out, [3.0, 2.0, 1.5], train_ppl=[1.0, 2.0])


def test_length_bucket_plot_png(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "buckets.png"
    fig = plot_length_buckets(out, ["<10", "10-19", "20+"], {"attn": [30.1, 25.0, None], "no-attn": [28.0, 20.5, 10.0]})
    assert png_size(out)[0] > 100
    assert no_temp_files(out.parent)
    (ax,) = fig.axes
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("source sentence length (words)", "BLEU")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["<10", "10-19", "20+"]
    attn, no_attn = ax.get_lines()
    assert np.isnan(attn.get_ydata()[2])  # an empty bucket is a gap in the line
    assert list(attn.get_ydata()[:2]) == [30.1, 25.0] and list(no_attn.get_ydata()) == [28.0, 20.5, 10.0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["attn", "no-attn"]
    with pytest.raises(ValueError, match="has 2 scores for 3 buckets"):
        plot_length_buckets(out, ["a", "b", "c"], {"s": [1.0, 2.0]})
