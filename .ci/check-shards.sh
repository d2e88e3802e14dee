#!/usr/bin/env bash
# Split runs must merge into the whole run, trial by trial:
# 1. the conformance suite in four cargo-nextest partitions, each writing
#    one record per trial (ONNX_RECORD_DIR), merged by `xtask report --merge`,
#    against one plain `cargo test` run of the suite; and the merge failing
#    when a record is lost or an expected failure explained nothing;
# 2. a differential campaign in four shards merged by `xtask diff --merge`,
#    against the same campaign run whole.
set -euo pipefail
cd "$(dirname "$0")/.."
d="$PWD/target/check-shards"
rm -rf "$d"
mkdir -p "$d"

ONNX_REPORT="$d/whole.json" cargo test --test conformance -q > "$d/whole.log" 2>&1
start=$(date +%s)
for k in 1 2 3 4; do
    ONNX_RECORD_DIR="$d/part-$k" cargo nextest run --test conformance --no-fail-fast \
        --partition "hash:$k/4" > "$d/part-$k.log" 2>&1
done
echo "the suite under cargo nextest, in 4 partitions: $(( $(date +%s) - start )) s"
cargo xtask report --merge "$d"/part-{1,2,3,4} --out "$d/merged" > "$d/merge.log" 2>&1
if ! cmp -s "$d/whole.json" "$d/merged/trials.json"; then
    diff <(grep -v '^$' "$d/whole.json") <(grep -v '^$' "$d/merged/trials.json") | head -40
    echo "the merged partitions differ from the whole run" >&2
    exit 1
fi
echo "merged partitions equal the whole run: $(grep -c '"trial"' "$d/whole.json") trial records"
# The merge holds the parts to what the whole run is held to (the folders'
# _suite.json lists every trial and expected failure): a lost record, or an
# expected failure that explained nothing, fails it.
cp -r "$d/part-1" "$d/lost"
rm "$(ls "$d"/lost/*%2F*.json | head -1)"
if cargo xtask report --merge "$d"/lost "$d"/part-{2,3,4} --out "$d/lost-out" > "$d/lost.log" 2>&1 \
    || ! grep -q "have no record" "$d/lost.log"; then
    echo "merging partitions with a record lost did not fail as it should:" >&2
    tail -5 "$d/lost.log" >&2
    exit 1
fi
for k in 1 2 3 4; do
    mkdir -p "$d/stale"
    cp -r "$d/part-$k" "$d/stale/$k"
    python3 - "$d/stale/$k/_suite.json" <<'PY'
import json, sys
listing = json.load(open(sys.argv[1]))
listing["expected_failures"].append("expected_failure #999 (planted): explains nothing")
json.dump(listing, open(sys.argv[1], "w"))
PY
done
if cargo xtask report --merge "$d"/stale/{1,2,3,4} --out "$d/stale-out" > "$d/stale.log" 2>&1 \
    || ! grep -q "#999 (planted)" "$d/stale.log"; then
    echo "merging partitions with an unused expected failure did not fail as it should:" >&2
    tail -5 "$d/stale.log" >&2
    exit 1
fi
echo "merging fails on a lost record and on an expected failure that explained nothing"

args=(--against onnxruntime --count 40 --seed 5 --strict)
cargo xtask diff "${args[@]}" > "$d/diff-whole.log" 2>&1
for k in 1 2 3 4; do
    cargo xtask diff "${args[@]}" --shard "$k/4" > "$d/diff-$k.log" 2>&1
done
cargo xtask diff --strict --merge target/differential/onnxruntime-shard-{1,2,3,4}-of-4 > "$d/diff-merged.log" 2>&1
python3 - "$PWD/target/differential" <<'PY'
import json, sys
root = sys.argv[1]
whole = json.load(open(f"{root}/onnxruntime/summary.json"))
merged = json.load(open(f"{root}/onnxruntime-merged/summary.json"))
assert merged["shards"] == {"parts": [1, 2, 3, 4], "of": 4}, merged["shards"]
whole.pop("shards"); merged.pop("shards")
if whole != merged:
    sys.exit("the merged diff shards differ from the whole campaign")
print(f"merged diff shards equal the whole campaign: {sum(sum(r['kinds'].values()) for r in whole['rows'])} cases, {whole['disagreements']} disagreements")
PY
