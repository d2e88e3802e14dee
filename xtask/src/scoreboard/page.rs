//! The scoreboard page: one self-contained HTML file (inline CSS and JS, no
//! network) that opens from file://. The data goes in as JSON in a
//! `<script type="application/json">` tag and the inline script renders it,
//! so the page and scoreboard.json cannot disagree. Rendered elements carry
//! `data-` attributes (counts, row fields) that `.ci/check-scoreboard-page.sh`
//! reads from the headless browser's DOM.

use super::Scoreboard;
use anyhow::Result;

/// The page for `board`.
pub fn render(board: &Scoreboard) -> Result<String> {
    let json = embed_json(&serde_json::to_string(board)?);
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>ONNX conformance scoreboard</title><style>{CSS}</style></head>\n<body>\
         <h1>ONNX conformance scoreboard</h1><p id=\"generated\"></p>\
         <div id=\"filters\"></div><h2>Runtimes</h2><div id=\"summary\"></div>\
         <div id=\"changes\"></div><h2>Operators</h2><div id=\"matrices\"></div>\
         <h2>Cases</h2><div id=\"cases\"></div>\n\
         <script type=\"application/json\" id=\"data\">{json}</script>\n\
         <script>{JS}</script></body></html>\n"
    ))
}

/// JSON made safe inside a script element: no `<` at all, so neither
/// `</script>` nor `<!--` in a message can end or change the element
/// (`\u003c` is the same string to JSON.parse).
fn embed_json(json: &str) -> String {
    json.replace('<', "\\u003c")
}

const CSS: &str = r#"
body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
.o-pass{background:#b7e4b0}.o-wrong{background:#f4a3a3}.o-error{background:#f7c59f}
.o-crash{background:#d26a6a;color:#fff}.o-timeout{background:#c9a0dc}
.o-undefined{background:#d6e4f0}
.known{font-style:italic}
.o-not_applicable{background:#eee;color:#777}.o-skipped{background:#e0e0e0}
.o-cannot_run{background:#bbb}
#filters label{margin-right:1em}
code{font-size:12px;word-break:break-all}
td.msg{max-width:40em;font-size:12px;white-space:pre-wrap}
.failed{color:#a00;font-weight:bold}
"#;

const JS: &str = r##"
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const O = D.outcomes;
const KEYS = ["operator", "version", "element_type", "runtime", "outcome"];
const LIMIT = 2000;
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k instanceof Node ? k : String(k));
  return e;
}
function uniq(xs) { return [...new Set(xs)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)); }
// Trial names hold '#', '~' and '@': quoted, the command pastes as is.
function sh(s) { return /^[A-Za-z0-9_.\/:=@-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'"; }
function field(r, k) { return k === "version" ? String(r.op_version) : r[k]; }
function readHash() {
  const f = {};
  for (const part of location.hash.replace(/^#/, "").split("&")) {
    const [k, v] = part.split("=");
    if (KEYS.includes(k) && v !== undefined) f[k] = decodeURIComponent(v);
  }
  return f;
}
let F = readHash();
function matches(r) { return KEYS.every(k => !F[k] || field(r, k) === F[k]); }
document.getElementById("generated").textContent =
  "Generated " + new Date(D.generated_unix * 1000).toISOString() +
  (D.baseline ? "; baseline " + D.baseline : "");
function filters() {
  const box = document.getElementById("filters");
  box.replaceChildren();
  for (const k of KEYS) {
    const sel = el("select", { "data-filter": k });
    sel.append(el("option", { value: "" }, "all"));
    const vals = k === "outcome" ? O : uniq(D.results.map(r => field(r, k)));
    for (const v of vals) {
      const o = el("option", { value: v }, v);
      if (F[k] === v) o.selected = true;
      sel.append(o);
    }
    sel.onchange = () => {
      F[k] = sel.value;
      const h = KEYS.filter(x => F[x]).map(x => x + "=" + encodeURIComponent(F[x])).join("&");
      history.replaceState(null, "", "#" + h);
      draw();
    };
    box.append(el("label", {}, k.replace("_", " ") + " ", sel));
  }
}
function summary() {
  const t = el("table", { id: "summary-table" });
  const head = el("tr", {}, el("th", {}, "runtime"), el("th", {}, "version"), el("th", {}, "trials"));
  for (const o of O) head.append(el("th", { class: "o-" + o }, o.replace("_", " ")));
  head.append(el("th", { title: "failures listed in cases/expectations.toml, each with its reason" }, "of the failures, known"));
  t.append(head);
  for (const rt of D.runtimes) {
    const total = Object.values(rt.counts).reduce((a, b) => a + b, 0);
    const tr = el("tr", { "data-runtime": rt.name, "data-total": total });
    tr.append(el("th", {}, rt.name));
    tr.append(rt.status === "ran" ? el("td", {}, rt.version)
      : el("td", { class: "failed", title: rt.message || "" }, "could not run: " + (rt.message || "").slice(0, 200)));
    tr.append(el("td", {}, total));
    for (const o of O) {
      const n = rt.counts[o] || 0;
      const share = total ? (100 * n / total).toFixed(1) + "%" : "";
      tr.append(el("td", { class: n ? "o-" + o : "", "data-outcome": o, "data-count": n }, n + (n ? " (" + share + ")" : "")));
    }
    tr.append(el("td", { class: "known", "data-known": rt.known || 0 }, rt.known || 0));
    t.append(tr);
  }
  document.getElementById("summary").replaceChildren(t);
}
function changes() {
  const box = document.getElementById("changes");
  box.replaceChildren();
  if (!D.baseline) return;
  box.append(el("h2", {}, "Changed since the baseline"));
  if (!D.changes.length) { box.append(el("p", {}, "Nothing changed.")); return; }
  const t = el("table", {}, el("tr", {}, el("th", {}, "runtime"), el("th", {}, "change"), el("th", {}, "trial"), el("th", {}, "before"), el("th", {}, "after")));
  for (const c of D.changes.filter(c => !F.runtime || c.runtime === F.runtime)) {
    const kind = c.after === "pass" ? "newly passing" : "newly " + c.after;
    t.append(el("tr", { "data-runtime": c.runtime, "data-change": c.after === "pass" ? "passing" : "failing" },
      el("td", {}, c.runtime), el("td", { class: "o-" + c.after }, kind), el("td", {}, c.trial),
      el("td", { class: "o-" + c.before }, c.before), el("td", { class: "o-" + c.after }, c.after)));
  }
  box.append(t);
}
// The worst outcome in a cell gives its colour, so a cell with one wrong
// result among passes does not look green; trials that were not run at all
// colour a cell only when nothing ran.
const WORST = ["crash", "wrong", "timeout", "error", "cannot_run", "undefined", "pass", "skipped", "not_applicable"];
function matrices(rows) {
  const box = document.getElementById("matrices");
  box.replaceChildren();
  const runtimes = D.runtimes.map(r => r.name).filter(n => !F.runtime || n === F.runtime);
  for (const op of uniq(rows.map(r => r.operator))) {
    const of = rows.filter(r => r.operator === op);
    const versions = uniq(of.map(r => r.op_version)).sort((a, b) => a - b);
    const types = uniq(of.map(r => r.element_type));
    const t = el("table", { "data-operator": op });
    const h1 = el("tr", {}, el("th", { rowspan: 2 }, op));
    const h2 = el("tr", {});
    for (const rt of runtimes) {
      h1.append(el("th", { colspan: types.length }, rt));
      for (const ty of types) h2.append(el("th", {}, ty));
    }
    t.append(h1, h2);
    for (const v of versions) {
      const tr = el("tr", {}, el("th", {}, op + "-" + v));
      for (const rt of runtimes) for (const ty of types) {
        const here = of.filter(r => r.runtime === rt && r.op_version === v && r.element_type === ty);
        const c = {};
        for (const r of here) c[r.outcome] = (c[r.outcome] || 0) + 1;
        const worst = WORST.find(o => c[o]);
        const known = here.filter(r => r.known).length;
        const text = O.filter(o => c[o]).map(o => c[o] + " " + o.replace("_", " ")).join(", ") +
          (known ? "; " + known + " of the failures known" : "");
        tr.append(el("td", { class: worst ? "o-" + worst : "", title: text, "data-runtime": rt, "data-count": here.length },
          here.length ? (c.pass || 0) + "/" + here.length : ""));
      }
      t.append(tr);
    }
    box.append(t);
  }
}
function cases(rows) {
  const box = document.getElementById("cases");
  const repro = Object.fromEntries(D.runtimes.map(r => [r.name, r.repro]));
  const shown = rows.slice(0, LIMIT);
  const note = el("p", { id: "case-count", "data-total": rows.length, "data-shown": shown.length },
    rows.length + " results" + (rows.length > LIMIT ? ", the first " + LIMIT + " shown (filter to see others)" : ""));
  const t = el("table", { id: "case-table" }, el("tr", {}, ...["runtime", "trial", "operator", "version", "element type", "outcome", "max abs", "bound units", "message", "reproduce"].map(h => el("th", {}, h))));
  for (const r of shown) {
    const fig = x => (x === null || x === undefined ? "" : Number(x).toPrecision(3));
    t.append(el("tr", { class: "case", "data-runtime": r.runtime, "data-outcome": r.outcome, "data-known": r.known ? 1 : 0, "data-operator": r.operator, "data-version": r.op_version, "data-element-type": r.element_type },
      el("td", {}, r.runtime), el("td", {}, r.trial), el("td", {}, r.operator), el("td", {}, r.op_version),
      el("td", {}, r.element_type), el("td", { class: "o-" + r.outcome + (r.known ? " known" : "") }, r.outcome + (r.failure ? " (" + r.failure + ")" : "") + (r.known ? ", known" : "")),
      el("td", {}, fig(r.max_abs)), el("td", {}, fig(r.bound_units)), el("td", { class: "msg" }, r.message || ""),
      el("td", {}, el("code", {}, repro[r.runtime] + sh(r.trial)))));
  }
  box.replaceChildren(note, t);
}
function draw() {
  const rows = D.results.filter(matches);
  changes();
  matrices(rows);
  cases(rows);
}
window.addEventListener("hashchange", () => { F = readHash(); filters(); draw(); });
filters();
summary();
draw();
document.body.setAttribute("data-rendered", "1");
"##;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_json_cannot_close_its_script_element() {
        let s = embed_json(r#"{"m":"</script><!--"}"#);
        assert!(!s.contains('<'));
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["m"], "</script><!--");
    }
}
