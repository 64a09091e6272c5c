#!/usr/bin/env bash
# Runs the libFuzzer targets built by tests/fuzz/build.sh on the corpora of
# tests/fuzz/corpus.py and writes a summary table (markdown) to
# build-fuzz/summary.md. New corpus entries go to build-fuzz/corpus/TARGET,
# crashes to build-fuzz/crashes/TARGET/, logs to build-fuzz/logs/TARGET.log.
#
# usage: tests/fuzz/run.sh [-n RUNS] [-t SECONDS] [-T SECONDS] [-j JOBS] [-s] [TARGET...]
#   -n RUNS     executions per target (default 10000000)
#   -t SECONDS  also stop each target after this long (default: no limit)
#   -T SECONDS  an input running longer is a finding (default 10; libFuzzer
#               measures wall time, so on a machine busy with other work at
#               higher priority, as nice -n 19 fuzzing is, raise it)
#   -j JOBS     targets run at the same time (default 1)
#   -s          run nothing: only write the summary of the existing logs
#   TARGET      e.g. fuzz_gguf (default: every built build-fuzz/fuzz_*)
# Exit status: 0 when no target found a crash, leak, timeout or OOM.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=10000000 secs=0 unit_timeout=10 jobs=1 summary_only=0
while getopts "n:t:T:j:sh" o; do
  case $o in
    n) runs=$OPTARG ;;
    t) secs=$OPTARG ;;
    T) unit_timeout=$OPTARG ;;
    j) jobs=$OPTARG ;;
    s) summary_only=1 ;;
    *) sed -n '2,16p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
out=build-fuzz
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$out"/fuzz_*; do [ -x "$f" ] && targets+=("$(basename "$f")"); done
fi
[ ${#targets[@]} -gt 0 ] || { echo "run.sh: no targets in $out (run tests/fuzz/build.sh)" >&2; exit 2; }
mkdir -p "$out/logs"
export HFQ_FIXTURES=${HFQ_FIXTURES:-$PWD/../shared/fixtures}

dict_for() {
  case $1 in
    fuzz_gguf|fuzz_gguf_split) echo tests/fuzz/dict/gguf.dict ;;
    fuzz_safetensors|fuzz_st_index|fuzz_hf_config|fuzz_tokenizer_json) echo tests/fuzz/dict/json.dict ;;
    fuzz_spm) echo tests/fuzz/dict/spm.dict ;;
    fuzz_plan_override) echo tests/fuzz/dict/plan_override.dict ;;
  esac
}

run_one() {
  local t=$1 name=${1#fuzz_} args=()
  local corpus=$out/corpus/$name crashes=$out/crashes/$name
  mkdir -p "$corpus" "$crashes"
  local dict; dict=$(dict_for "$t")
  [ -n "$dict" ] && args+=("-dict=$dict")
  [ "$secs" != 0 ] && args+=("-max_total_time=$secs")
  "$out/$t" "$corpus" "${args[@]}" -runs="$runs" -print_final_stats=1 -timeout="$unit_timeout" \
    -rss_limit_mb=2048 -artifact_prefix="$crashes/" >"$out/logs/$t.log" 2>&1 || true
}

running=0
[ "$summary_only" = 1 ] && targets_to_run=() || targets_to_run=("${targets[@]}")
for t in "${targets_to_run[@]}"; do
  [ -x "$out/$t" ] || { echo "run.sh: $out/$t not built" >&2; exit 2; }
  echo "run.sh: $t ..." >&2
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait

# Summary: executions, exec/s, coverage (edges "cov", features "ft"), corpus, findings.
{
  echo "| target | executions | seconds | exec/s | cov | ft | corpus | peak RSS MB | findings |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
  for t in "${targets[@]}"; do
    log=$out/logs/$t.log
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
    took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
    found=$(grep -oE 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer): [a-z -]+|runtime error: .*' "$log" | head -1 || true)
    [ -z "$found" ] && ! grep -q '^Done ' "$log" && found="did not finish (see $log)"
    echo "| ${t#fuzz_} | ${execs:-?} | ${took:-?} | ${eps:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | ${rss:-?} | ${found:-none} |"
  done
} >"$out/summary.md"
cat "$out/summary.md"
echo "run.sh: summary in $out/summary.md; logs in $out/logs" >&2
# a findings column other than "none" fails the run
! tail -n +3 "$out/summary.md" | grep -qv '| none |$'
