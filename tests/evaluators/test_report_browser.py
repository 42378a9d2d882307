"""report.html with 11 configurations in a real headless Chromium, 1400 px wide: no table, figure
or block runs past the window's right edge, and every configuration's label is on the page.

The page is the report as written, with one probe script appended that measures, once laid out,
the right edge of every table, image and preformatted block against the viewport's width and
writes what it found into the DOM, which Chromium dumps (``--dump-dom``). A screenshot of the
same window goes to ``$SWEVAL_SCREENSHOTS`` when that is set (how docs/report-11-configurations.png
is made). Skipped where Chromium is not installed (``.ci/run`` installs it when apt can).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_report import fake_results, write_output

from sweval.evaluators.report.page import write_report

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        (shutil.which("chromium") or shutil.which("chromium-browser")) is None,
        reason="needs Chromium (apt-get install chromium)"),
]

#: Eleven configurations, the long ones as a user writes them.
ELEVEN = ["pop", "pop-n", "item-knn", "user-knn", "svd", "ease", "decay-pop",
          "item-knn(n_neighbors=50)", 'user-knn(n_neighbors=50,weighting="cosine")',
          "my_pkg.models:CoVisit(days=1)", "cv=my_pkg.models:CoVisit(days=7)"]

PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const width = document.documentElement.clientWidth;
  const wide = [...document.querySelectorAll("table, img, pre, figure, svg")]
    .filter((e) => e.getBoundingClientRect().right > width + 1)
    .map((e) => `${e.tagName} ${e.className || ""} ${Math.round(e.getBoundingClientRect().right)}`);
  const out = document.createElement("pre");
  out.id = "sweval-probe";
  out.textContent = JSON.stringify({width, scroll: document.documentElement.scrollWidth, wide});
  document.body.appendChild(out);
}, 200));
</script>"""


def _chromium(*args: str, timeout: float = 180) -> str:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    done = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1400,1000",
         "--virtual-time-budget=10000", *args],
        capture_output=True, text=True, timeout=timeout, check=False)
    return done.stdout


def test_a_report_of_eleven_configurations_fits_a_1400_px_window(tmp_path: Path) -> None:
    output = write_output(tmp_path / "out", fake_results(algorithms=ELEVEN))
    write_report(output, metrics=["recall", "ndcg", "r_precision"])
    page = (output / "report.html").read_text()
    probe = output / "probe.html"
    probe.write_text(page.replace("</body>", PROBE + "</body>"))
    dom = _chromium("--user-data-dir=" + str(tmp_path / "profile"), "--dump-dom",
                    probe.as_uri())
    found = re.search(r'<pre id="sweval-probe">(.*?)</pre>', dom, flags=re.S)
    assert found, dom[-2000:]
    measured = json.loads(html.unescape(found.group(1)))
    assert measured["width"] >= 1380  # the window is 1400 px wide (no scroll bar)
    assert measured["wide"] == [], measured  # nothing sticks out on the right
    assert measured["scroll"] <= measured["width"], measured  # no horizontal scrolling
    text = html.unescape(re.sub(r"<[^>]+>", "", dom))
    for label in ELEVEN:
        assert label.split("=", 1)[0] if label.startswith("cv=") else label in text
    if os.environ.get("SWEVAL_SCREENSHOTS"):
        shot = Path(os.environ["SWEVAL_SCREENSHOTS"]) / "report-11-configurations.png"
        _chromium("--user-data-dir=" + str(tmp_path / "profile-shot"),
                  f"--screenshot={shot}", (output / "report.html").as_uri())
        assert shot.exists()
