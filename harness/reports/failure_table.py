"""report.html's failure table: every failing execution, sortable and filterable in plain JavaScript.

The page stays one offline file: the script is inline, reads nothing from
the network, and works from file://. Filters by path, pattern, dtype,
verdict and family can be preset from the URL (`report.html#family=f-1a2b3c4d&dtype=float16`,
or the same as a ?query), so a link in a chat or a ticket opens the very view;
the family table's links do just that.
"""
from __future__ import annotations

import html
from collections import Counter

from harness.core.verdicts import Verdict
from harness.reports.baseline import case_label
from harness.reports.families import Family, family_label, family_of, family_slug, verdict_shown
from harness.reports.known import Known, badness, fmt, output_views

FILTERS = ("path", "pattern", "dtype", "verdict", "family")
# (header, sort key type); err/bound sorts as a number, missing values last.
COLUMNS = (("path", "text"), ("pattern", "text"), ("dtype", "text"), ("verdict", "text"),
           ("family", "text"), ("case", "text"), ("error / bound", "num"), ("gate", "text"))

_SCRIPT = r"""
(function () {
  var table = document.getElementById("failures");
  if (!table) return;
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var keys = ["path", "pattern", "dtype", "verdict", "family"];
  var sortState = {col: -1, desc: false};
  function select(k) { return document.getElementById("filter-" + k); }
  function apply() {
    var shown = 0;
    rows.forEach(function (tr) {
      var ok = keys.every(function (k) {
        var want = select(k).value;
        return !want || tr.getAttribute("data-" + k) === want;
      });
      tr.hidden = !ok;
      if (ok) shown++;
    });
    document.getElementById("shown").textContent = String(shown);
    table.setAttribute("data-shown", String(shown));
  }
  function cellKey(tr, col, num) {
    var td = tr.cells[col];
    var v = td.getAttribute("data-sort");
    if (v === null) v = td.textContent;
    if (!num) return v.toLowerCase();
    var x = parseFloat(v);
    return isNaN(x) ? null : x;
  }
  function sortBy(col, desc) {
    var th = table.tHead.rows[0].cells[col];
    var num = th.getAttribute("data-type") === "num";
    var decorated = rows.map(function (tr, i) { return [cellKey(tr, col, num), i, tr]; });
    decorated.sort(function (a, b) {
      if (a[0] === b[0]) return a[1] - b[1];
      if (a[0] === null) return 1;
      if (b[0] === null) return -1;
      var c = a[0] < b[0] ? -1 : 1;
      return desc ? -c : c;
    });
    rows = decorated.map(function (d) { return d[2]; });
    rows.forEach(function (tr) { body.appendChild(tr); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h, i) {
      h.setAttribute("aria-sort", i === col ? (desc ? "descending" : "ascending") : "none");
    });
    sortState = {col: col, desc: desc};
  }
  function params() {
    var text = (location.hash || "").replace(/^#/, "") || (location.search || "").replace(/^\?/, "");
    var out = {};
    text.split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) out[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1).replace(/\+/g, " "));
    });
    return out;
  }
  function preset() {
    var p = params();
    keys.forEach(function (k) {
      var s = select(k);
      s.value = "";
      if (p[k] !== undefined) {
        for (var i = 0; i < s.options.length; i++) if (s.options[i].value === p[k]) s.value = p[k];
      }
    });
    if (p.sort) {
      var m = /^(\d+)(-desc)?$/.exec(p.sort);
      if (m) sortBy(parseInt(m[1], 10), !!m[2]);
    }
    apply();
  }
  keys.forEach(function (k) {
    select(k).addEventListener("change", function () {
      var parts = [];
      keys.forEach(function (j) { if (select(j).value) parts.push(j + "=" + encodeURIComponent(select(j).value)); });
      history.replaceState(null, "", "#" + parts.join("&"));
      apply();
    });
  });
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
    th.addEventListener("click", function () { sortBy(i, sortState.col === i ? !sortState.desc : th.getAttribute("data-type") === "num"); });
  });
  window.addEventListener("hashchange", preset);
  preset();
})();
"""


def _options(name: str, values: list[tuple[str, str]]) -> str:
    e = html.escape
    opts = "".join(f'<option value="{e(v)}">{e(label)}</option>' for v, label in values)
    return (f'<label>{name} <select id="filter-{name}"><option value="">all</option>{opts}</select></label> ')


def outputs_html(r) -> str:
    """Each output's score of an execution of several, one line each under its worst ("" for one output)."""
    return "".join(f'<br><span class="output">{html.escape(o.text)}</span>' for o in output_views(r))


def failure_table(records: list[dict], known: Known, groups: list[Family]) -> str:
    """The filter controls, the table of every failing execution (worst first) and its script."""
    e = html.escape
    failing = sorted((r for r in records if r["verdict"] != Verdict.PASS), key=lambda r: (known.is_known(r), badness(r)))
    if not failing:
        return "<p>No failing executions.</p>"
    labels = {f.slug: f"{f.shown[:90]} ({len(f.records)})" for f in groups}
    values = {k: Counter() for k in FILTERS}
    rows = []
    for r in failing:
        slug = family_slug(family_label(*family_of(r, known)))
        attrs = {"path": r["path"], "pattern": r["case"]["pattern"], "dtype": r["case"]["dtype"],
                 "verdict": r["verdict"], "family": slug}
        for k, v in attrs.items():
            values[k][v] += 1
        ratio = r.get("max_err_over_tol")
        status = known.status(r) if known.baseline is not None else ""
        data = " ".join(f'data-{k}="{e(v)}"' for k, v in attrs.items())
        rows.append(f"<tr {data}><td>{e(r['path'])}</td><td>{e(r['case']['pattern'])}</td>"
                    f"<td>{e(r['case']['dtype'])}</td><td>{e(verdict_shown(r))}</td>"
                    f"<td>{e(labels.get(slug, slug))}</td><td>{e(case_label(r['case'], r['case_id']))}</td>"
                    f'<td data-sort="{"" if ratio is None else repr(float(ratio))}">{fmt(ratio, ".3g")}'
                    f"{outputs_html(r)}</td>"
                    f'<td class="{status}">{e(status)}</td></tr>')
    controls = "".join(
        _options(k, [(v, labels.get(v, v) if k == "family" else f"{v} ({n})")
                     for v, n in sorted(values[k].items(), key=lambda kv: (-kv[1], kv[0]) if k == "family" else kv)])
        for k in FILTERS)
    head = "".join(f'<th data-type="{t}" title="click to sort">{e(h)}</th>' for h, t in COLUMNS)
    return (f'<p class="filters">{controls}<span><span id="shown">{len(failing)}</span> of {len(failing)} '
            f'shown</span></p>\n<table id="failures" data-shown="{len(failing)}"><thead><tr>{head}</tr></thead><tbody>\n'
            + "\n".join(rows) + f"\n</tbody></table>\n<script>{_SCRIPT}</script>")
