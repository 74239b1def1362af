"""report.html opened offline in headless Chromium: the family table, a filter that filters, the plots.

The URL's fragment (or query) presets the failure table's filters and sort
order; Chromium's --dump-dom gives the document after the page's own script
ran, so what is counted is what a reader sees. Debian's `chromium` is
installed by .ci/run; without it these tests are skipped, saying so.
"""
import base64
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from harness.reports import baseline as gate
from harness.reports.families import families
from harness.reports.known import Known
from harness.reports.write import write_reports
from helpers import entry, record

BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no chromium on this machine (.ci/run installs Debian's)")


def night():
    records = [record(n, "eager", "pass") for n in "abcdef"]
    records += [record("a", "tvm-decompose", "inaccurate"), record("b", "tvm-decompose", "inaccurate"),
                record("d", "tvm", "error", "power only applies to float"),
                record("c", "executorch-recompose", "dtype_mismatch"),
                record("e", "executorch", "inaccurate", "wrong axis"),
                record("f", "executorch", "nonfinite")]
    for i, r in enumerate(records):
        r["max_err_over_tol"] = None if r["verdict"] in ("error", "nonfinite") else [0.1, 250.0, 3.0, 4e4][i % 4]
    baseline = gate.parse_baseline(json.dumps({"format": "normdiff-baseline", "version": 1, "entries": [
        entry("b", "tvm-decompose", "inaccurate", "apache/tvm#20909", "float16 reduction buffers")]}))
    return records, baseline


class _Dom(HTMLParser):
    """Rows of the failure and family tables as the browser left them, and the images."""

    def __init__(self):
        super().__init__()
        self.table = None
        self.failures, self.families, self.images, self.shown = [], [], [], []
        self._in_shown = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.table = a.get("id")
        elif tag == "tr" and self.table == "failures" and "data-path" in a:
            self.failures.append(a)
        elif tag == "tr" and self.table == "families" and "data-family" in a:
            self.families.append(a)
        elif tag == "img":
            self.images.append(a)
        elif tag == "span" and a.get("id") == "shown":
            self._in_shown = True

    def handle_endtag(self, tag):
        if tag == "table":
            self.table = None
        elif tag == "span":
            self._in_shown = False

    def handle_data(self, data):
        if self._in_shown:
            self.shown.append(data)


def chromium(tmp_path, url, *extra):
    profile = tmp_path / "profile"
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}", *extra, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def dom(tmp_path, url) -> _Dom:
    r = chromium(tmp_path, url, "--dump-dom")
    assert r.returncode == 0 and "<html" in r.stdout, r.stderr[-2000:]
    page = _Dom()
    page.feed(r.stdout)
    return page


def visible(page: _Dom) -> list[dict]:
    return [a for a in page.failures if "hidden" not in a]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    records, baseline = night()
    out = tmp_path_factory.mktemp("report")
    write_reports(records, str(out), baseline=baseline)
    return out / "report.html", records, baseline


def test_the_page_shows_the_family_table_and_every_failure_unfiltered(report, tmp_path):
    page_file, records, baseline = report
    page = dom(tmp_path, page_file.as_uri())
    failing = [r for r in records if r["verdict"] != "pass"]
    assert len(page.families) == len(families(records, Known(baseline))) >= 4
    assert len(page.failures) == len(visible(page)) == len(failing)
    assert "".join(page.shown) == str(len(failing))
    plots = {a.get("alt"): a["src"] for a in page.images}
    src = plots["error over bound per path"]  # the err/bound plot, embedded
    assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG")
    assert "verdict heatmap" in plots and "worst cases" in plots


@pytest.mark.parametrize("how", ["#", "?"])
def test_a_filter_from_the_url_hides_every_other_row(report, tmp_path, how):
    page_file, records, baseline = report
    page = dom(tmp_path, f"{page_file.as_uri()}{how}path=executorch&verdict=inaccurate")
    (row,) = visible(page)
    assert (row["data-path"], row["data-verdict"]) == ("executorch", "inaccurate")
    assert "".join(page.shown) == "1"
    assert len(page.failures) == 6  # the others are there, hidden


def test_the_family_link_filters_to_that_family(report, tmp_path):
    page_file, records, baseline = report
    tvm = next(f for f in families(records, Known(baseline)) if f.upstream == "apache/tvm#20909")
    page = dom(tmp_path, f"{page_file.as_uri()}#family={tvm.slug}")
    rows = visible(page)
    assert len(rows) == len(tvm.records) == 1 and rows[0]["data-family"] == tvm.slug
    fam_row = next(a for a in page.families if a["data-family"] == tvm.slug)
    assert fam_row  # the family table links to the very filter used here


def test_sorting_from_the_url_puts_the_largest_error_first(report, tmp_path):
    page_file, records, _ = report
    page = dom(tmp_path, f"{page_file.as_uri()}#sort=6-desc")
    ratios = [r.get("max_err_over_tol") for r in records if r["verdict"] != "pass"]
    top = max(x for x in ratios if x is not None)
    first = visible(page)[0]
    match = [r for r in records if r["verdict"] != "pass" and r["path"] == first["data-path"]
             and r["verdict"] == first["data-verdict"] and r.get("max_err_over_tol") == top]
    assert match, first


def test_a_screenshot_of_the_page_renders(report, tmp_path):
    page_file, _, _ = report
    shot = tmp_path / "page.png"
    r = chromium(tmp_path, page_file.as_uri(), f"--screenshot={shot}", "--window-size=1400,2400")
    assert r.returncode == 0, r.stderr[-2000:]
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000 and os.path.getsize(shot) == len(data)
