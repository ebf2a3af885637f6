"""The report as a reader sees it: report.html opened in a real headless Chromium (Playwright),
every picture loaded, the timelines above the tables, no glyph that needs an emoji font, and a
screenshot whose pixels show the timeline's compute and loading bars.

``./dev test`` installs Chromium's headless shell (Debian's ``chromium-headless-shell``) and
Playwright; elsewhere the test is skipped by name, saying what to install.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from dftpass.analysis.timeline import COLORS
from dftpass.traces import COMPUTE, LOADING

#: browsers tried in order: $DFTPASS_CHROMIUM, then the usual names on PATH
_BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")
#: the width a reader's window has; the page must read at it
VIEWPORT = {"width": 1280, "height": 900}


def _chromium() -> str:
    wanted = os.environ.get("DFTPASS_CHROMIUM")
    found = wanted or next(filter(None, map(shutil.which, _BROWSERS)), None)
    if not found:
        pytest.skip("no headless Chromium: install Debian's chromium-headless-shell (./dev test does), "
                    "or set DFTPASS_CHROMIUM to a Chromium binary")
    return found


@pytest.fixture(scope="module")
def page_of(report_workspace):
    """The report opened in headless Chromium, and a full-page screenshot of it."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (./dev test installs it)")
    ws, _ = report_workspace
    shot = ws / "report-screenshot.png"
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto((ws / "report.html").as_uri())
            page.wait_for_load_state("load")
            images = page.eval_on_selector_all("img", """els => els.map(e => {
                const r = e.getBoundingClientRect();
                return {alt: e.alt, natural: e.naturalWidth, width: r.width, height: r.height,
                        top: r.top + window.scrollY, left: r.left};
            })""")
            headings = page.eval_on_selector_all("h2, h3", """els => els.map(e => (
                {text: e.textContent, top: e.getBoundingClientRect().top + window.scrollY}))""")
            text = page.inner_text("body")
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    return {"images": images, "headings": headings, "text": text, "screenshot": shot}


def test_every_picture_loads_and_fits_the_window(page_of):
    images = page_of["images"]
    assert [i["alt"] for i in images] == [
        "timelines of baseline and opt1 side by side",
        "timeline of baseline", "step time, wait for data per step and throughput of baseline",
        "timeline of opt1", "step time, wait for data per step and throughput of opt1"]
    for image in images:
        assert image["natural"] > 0 and image["height"] > 50, image  # decoded and drawn
        assert image["left"] >= 0 and image["left"] + image["width"] <= VIEWPORT["width"], image  # no sideways scroll


def test_timelines_come_before_the_tables(page_of):
    """The side-by-side picture is on the first screen; each run's timeline comes right after its
    headline figures, above its phase and category tables."""
    images = {i["alt"]: i["top"] for i in page_of["images"]}
    headings = page_of["headings"]
    assert images["timelines of baseline and opt1 side by side"] < VIEWPORT["height"]
    for label in ("baseline", "opt1"):
        run = next(h["top"] for h in headings if h["text"] == f"Run {label}")
        tables = next(h["top"] for h in headings if h["top"] > run and h["text"] == "Time by category")
        assert run < images[f"timeline of {label}"] < images[f"step time, wait for data per step and "
                                                            f"throughput of {label}"] < tables


def test_no_glyph_needs_an_emoji_font(page_of):
    emoji = re.findall(r"[\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff\ufe0f]", page_of["text"])
    assert emoji == []
    assert "(better)" in page_of["text"] or "(worse)" in page_of["text"] or "(same)" in page_of["text"]


def test_the_screenshot_shows_the_timeline_bars(page_of):
    """Inspect the pixels where the browser drew the first run's timeline: the compute and the
    data-loading colours are there, so the picture rendered, not a broken-image box."""
    image_module = pytest.importorskip("PIL.Image", reason="Pillow (a matplotlib dependency) reads the screenshot")
    shot = image_module.open(page_of["screenshot"]).convert("RGB")
    box = next(i for i in page_of["images"] if i["alt"] == "timeline of baseline")
    region = shot.crop((int(box["left"]), int(box["top"]), int(box["left"] + box["width"]),
                        int(box["top"] + box["height"])))
    colours = {colour for _, colour in region.getcolors(maxcolors=1 << 20)}

    def near(hex_colour: str) -> bool:
        want = tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
        return any(all(abs(a - b) <= 8 for a, b in zip(c, want)) for c in colours)

    assert near(COLORS[COMPUTE]) and near(COLORS[LOADING])
    assert len(colours) > 50  # axes, labels, bars: a drawn picture, not a flat box


def test_the_browser_is_found_or_named(monkeypatch, tmp_path):
    """Where no Chromium is installed the tests above are skipped with a reason that says what
    to install, never passed silently."""
    monkeypatch.delenv("DFTPASS_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.skip.Exception, match="chromium-headless-shell"):
        _chromium()
    fake = Path(tmp_path / "chromium")
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert _chromium() == str(fake)
