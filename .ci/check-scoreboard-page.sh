#!/usr/bin/env bash
# Opens the scoreboard page (written by `cargo xtask scoreboard`) in headless
# Chromium from file:// and checks what the browser rendered against
# scoreboard.json: the per-runtime counts and known failures, and that a URL-fragment filter
# shows only matching rows, all of them (up to the page's row limit). Then
# takes the screenshot the README shows (docs/scoreboard.png).
#
#   .ci/check-scoreboard-page.sh [SCOREBOARD_DIR]   (default target/scoreboard)
#
# FILTER_RUNTIME / FILTER_OUTCOME pick the fragment filter (ours / pass).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(realpath "${1:-target/scoreboard}")
page="$dir/index.html"
json="$dir/scoreboard.json"
[ -f "$page" ] && [ -f "$json" ] || { echo "no scoreboard in $dir: run cargo xtask scoreboard" >&2; exit 1; }
runtime=${FILTER_RUNTIME:-ours}
outcome=${FILTER_OUTCOME:-pass}

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  browser=$(command -v chromium)
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Every switch that would reach the network or a profile elsewhere is off:
# the page must render from the file alone.
run() {
  "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$(mktemp -d -p "$scratch")" "$@" 2>/dev/null
}
run --dump-dom "file://$page" >"$scratch/all.html"
run --dump-dom "file://$page#runtime=$runtime&outcome=$outcome" >"$scratch/filtered.html"

python3 - "$json" "$scratch/all.html" "$scratch/filtered.html" "$runtime" "$outcome" <<'PY'
import json, sys
from collections import Counter
from html.parser import HTMLParser

board_path, all_path, filtered_path, runtime, outcome = sys.argv[1:]
board = json.load(open(board_path))

class Dom(HTMLParser):
    """The data- attributes the page puts on what it rendered."""
    def __init__(self):
        super().__init__()
        self.rendered = False
        self.summary_row = None
        self.summary = {}
        self.cases = []
        self.case_count = None
        self.in_summary = False
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body" and a.get("data-rendered") == "1":
            self.rendered = True
        if tag == "table":
            self.in_summary = a.get("id") == "summary-table"
        if self.in_summary and tag == "tr" and "data-runtime" in a:
            self.summary_row = a["data-runtime"]
            self.summary[self.summary_row] = {"total": int(a["data-total"])}
        if self.in_summary and tag == "td" and "data-outcome" in a:
            self.summary[self.summary_row][a["data-outcome"]] = int(a["data-count"])
        if self.in_summary and tag == "td" and "data-known" in a:
            self.summary[self.summary_row]["known"] = int(a["data-known"])
        if tag == "tr" and a.get("class") == "case":
            self.cases.append(a)
        if a.get("id") == "case-count":
            self.case_count = (int(a["data-total"]), int(a["data-shown"]))

def parse(path):
    d = Dom()
    d.feed(open(path, encoding="utf-8").read())
    if not d.rendered:
        sys.exit(f"{path}: the page's script did not finish rendering")
    return d

errors = []
whole = parse(all_path)
for rt in board["runtimes"]:
    from_rows = Counter(r["outcome"] for r in board["results"] if r["runtime"] == rt["name"])
    shown = whole.summary.get(rt["name"])
    if shown is None:
        errors.append(f"runtime {rt['name']} has no summary row")
        continue
    for o in board["outcomes"]:
        want = rt["counts"].get(o, 0)
        if want != from_rows.get(o, 0):
            errors.append(f"{rt['name']} {o}: counts {want} but {from_rows.get(o, 0)} results in the JSON")
        if shown.get(o) != want:
            errors.append(f"{rt['name']} {o}: page shows {shown.get(o)}, JSON has {want}")
    known = sum(1 for r in board["results"] if r["runtime"] == rt["name"] and r.get("known"))
    if rt.get("known", 0) != known or shown.get("known") != known:
        errors.append(f"{rt['name']} known failures: JSON counts {rt.get('known')}, page shows "
                      f"{shown.get('known')}, {known} results are known")
    if shown["total"] != sum(from_rows.values()):
        errors.append(f"{rt['name']}: page total {shown['total']} != {sum(from_rows.values())}")

filtered = parse(filtered_path)
want = sum(1 for r in board["results"] if r["runtime"] == runtime and r["outcome"] == outcome)
total, shown_n = filtered.case_count
if total != want:
    errors.append(f"#runtime={runtime}&outcome={outcome}: page counts {total} rows, JSON has {want}")
if shown_n != len(filtered.cases) or shown_n != min(want, 2000):
    errors.append(f"filtered table shows {len(filtered.cases)} rows (says {shown_n}) of {want}")
bad = [c for c in filtered.cases if c["data-runtime"] != runtime or c["data-outcome"] != outcome]
if bad:
    errors.append(f"{len(bad)} rows do not match the filter, e.g. {bad[0]}")
if want == 0:
    errors.append(f"no {runtime}/{outcome} results: the filter check proved nothing")

if errors:
    sys.exit("scoreboard page check failed:\n  " + "\n  ".join(errors))
print(f"scoreboard page: counts of {len(board['runtimes'])} runtimes match the JSON; "
      f"#runtime={runtime}&outcome={outcome} shows {len(filtered.cases)} matching rows of {want}")
PY

mkdir -p docs
run --screenshot="$PWD/docs/scoreboard.png" --window-size=1400,1000 "file://$page" >/dev/null
echo "wrote docs/scoreboard.png"
