#!/usr/bin/env bash
# Split runs must merge into the whole run, trial by trial:
# 1. the conformance suite in four cargo-nextest partitions, each writing
#    one record per trial (ONNX_RECORD_DIR), merged by `xtask report --merge`,
#    against one plain `cargo test` run of the suite;
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
