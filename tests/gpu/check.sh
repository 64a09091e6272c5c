#!/usr/bin/env bash
# check.sh OUT_DIR - the CUDA backend on a GPU machine, in one go (< 8 minutes
# on an H200):
#   1. binaries: .gpu/bin from tests/gpu/prepare.sh when they run here, else a
#      build (meson setup build-gpu -Dcuda=enabled for this GPU's architecture);
#   2. CUDA against the CPU on every weight format (test_cuda_backend), the
#      host-side plan and device choice (test_cuda_plan, test_cuda_device);
#   3. the fixture models (stories260K, TinyStories-656K, converted by hfconv,
#      some quantized): ppl-eval and greedy generate on both devices;
#   4. speed: a synthetic 1B model (mkmodel, hfconv, quantize) in F16, Q8_0,
#      Q4_K_M, FP8_E4M3 and NVFP4: decode tokens/s, the weight bandwidth that
#      implies against the card's peak, prompt-processing tokens/s.
# OUT_DIR gets few small files (the device tool returns at most 8): check.log
# (every step's output), summary.md (the tables), bench.jsonl, gpu.txt.
# Models and build outputs go to $HFQ_GPU_WORK (default /tmp/hfq-gpu).
#
# Environment:
#   HFQ_GPU_FIXTURES  the fixtures (default .gpu/fixtures; filled by prepare.sh:
#                     this script copies nothing from ../shared)
#   HFQ_GPU_WORK      scratch for models (default /tmp/hfq-gpu)
#   HFQ_GPU_PEAK_GBS  the card's memory bandwidth in GB/s (default: from its name,
#                     4800 for an H200)
#   HFQ_GPU_DEVICE    cuda (default); cpu runs the whole script on the CPU, to
#                     try it on a machine without a GPU
#   HFQ_GPU_BENCH_SHAPE  mkmodel options of the speed model (default: the 1B shape)
#   HFQ_GPU_BUDGET_S  seconds after which the remaining speed runs are skipped
#                     (default 420)
# Exit status: 0 when every check passed, 1 otherwise (the tables are written either way).
set -euo pipefail

out=${1:?usage: tests/gpu/check.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
root=$PWD
fixtures=${HFQ_GPU_FIXTURES:-$root/.gpu/fixtures}
work=${HFQ_GPU_WORK:-/tmp/hfq-gpu}
device=${HFQ_GPU_DEVICE:-cuda}
shape=${HFQ_GPU_BENCH_SHAPE:---hidden 2048 --ffn 8192 --layers 16 --heads 32 --kv-heads 8 --vocab 32000}
budget=${HFQ_GPU_BUDGET_S:-420}
text=$fixtures/text/tinystories-valid.txt
log=$out/check.log
summary=$out/summary.md
bench=$out/bench.jsonl
start=$SECONDS
failures=0
mkdir -p "$work"
: >"$log"
: >"$bench"
: >"$summary"

say() { echo "[$((SECONDS - start))s] $*" | tee -a "$log"; }
fail() {
  failures=$((failures + 1))
  say "FAIL: $*"
}
# step NAME SECONDS CMD...: CMD under a time limit, its output in check.log
# (and in $work/NAME.out); the last lines on the console when it fails.
step() {
  local name=$1 limit=$2 rc=0
  shift 2
  say "$name: $*"
  timeout --kill-after=5 "$limit" "$@" >"$work/$name.out" 2>&1 || rc=$?
  { echo "----- $name (exit $rc)"; cat "$work/$name.out"; } >>"$log"
  if [ "$rc" -ne 0 ]; then
    say "$name: exit $rc$([ "$rc" -eq 124 ] && echo " (timed out after ${limit}s)")"
    tail -n 15 "$work/$name.out" | sed 's/^/    /'
  fi
  return "$rc"
}

# ---- the machine
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=$root/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1 ||
  echo "no nvidia-smi" >"$out/gpu.txt"
gpu_name=$(head -n 1 "$out/gpu.txt" | cut -d, -f1)
arch=$(head -n 1 "$out/gpu.txt" | cut -d, -f2 | tr -d ' .')
say "gpu: $(head -n 1 "$out/gpu.txt"); device $device"
peak=${HFQ_GPU_PEAK_GBS:-}
if [ -z "$peak" ]; then
  case "$gpu_name" in
    *H200*) peak=4800 ;;
    *H100*) peak=3350 ;;
    *A100*) peak=2039 ;;
    *) peak=0 ;;
  esac
fi

# ---- 1. binaries
bin=$root/.gpu/bin
# Libraries the binaries miss here: look for them where CUDA images keep them.
find_missing_libs() {
  local missing lib dir
  missing=$(ldd "$1" 2>/dev/null | awk '/not found/ {print $1}' || true)
  for lib in $missing; do
    dir=$(timeout 60 find /usr/local /usr/lib /opt -name "$lib" -print -quit 2>/dev/null | xargs -r dirname)
    if [ -n "$dir" ]; then
      export LD_LIBRARY_PATH=$dir:$LD_LIBRARY_PATH
      say "found $lib in $dir"
    fi
  done
}
chmod +x "$bin"/* 2>/dev/null || true   # in case the copy lost the mode bits
if [ -x "$bin/test_cuda_device" ]; then
  find_missing_libs "$bin/test_cuda_device"
  find_missing_libs "$bin/test_cuda_backend"
  find_missing_libs "$bin/libhfq_cuda.so"
fi
if ! [ -x "$bin/test_cuda_device" ] || ! step prebuilt 60 "$bin/test_cuda_device"; then
  say "the prepared binaries do not run here: building"
  if [ -L .venv ] && [ ! -e .venv ]; then rm .venv; fi
  if [ ! -e .venv/bin/python ]; then   # meson's test setup wants the project's venv; check.sh runs no Python test
    mkdir -p .venv/bin
    ln -sf "$(command -v python3 || echo /bin/true)" .venv/bin/python
  fi
  archs=${arch:-90}
  build=$work/build-gpu
  [ -f "$build/build.ninja" ] ||
    step setup 180 meson setup "$build" -Dcuda=enabled -Dgpu_archs="$archs" --buildtype=release || {
    fail "meson setup (run tests/gpu/prepare.sh on the CPU machine and carry .gpu)"
    exit 1
  }
  step build 300 ninja -C "$build" src/tools/hfconv src/tools/quantize src/tools/mkmodel src/tools/ppl-eval \
    src/tools/generate tests/test_cuda_plan tests/test_cuda_device tests/test_cuda_backend tests/bench_forward \
    kernels/libhfq_cuda.so || {
    fail "build"
    exit 1
  }
  bin=$work/bin
  mkdir -p "$bin"
  cp "$build"/src/tools/{hfconv,quantize,mkmodel,ppl-eval,generate} "$build"/tests/{test_cuda_plan,test_cuda_device,test_cuda_backend,bench_forward} \
    "$build"/kernels/libhfq_cuda.so "$bin/"
fi

# ---- 2. unit checks: plan, device choice, CUDA against the CPU on every format
step test_cuda_plan 60 "$bin/test_cuda_plan" || fail "test_cuda_plan"
step test_cuda_device 60 "$bin/test_cuda_device" || fail "test_cuda_device"
rc=0
step test_cuda_backend 180 "$bin/test_cuda_backend" || rc=$?
if [ "$rc" -eq 77 ] && [ "$device" = cpu ]; then
  say "test_cuda_backend skipped (no device; HFQ_GPU_DEVICE=cpu)"
elif [ "$rc" -ne 0 ]; then
  fail "test_cuda_backend (exit $rc)"
  # diagnostics: every operation waited for (a failure names its operation), then the memory checker
  HFQ_CUDA_SYNC=1 step test_cuda_backend_sync 180 "$bin/test_cuda_backend" || true
  if command -v compute-sanitizer >/dev/null; then
    step test_cuda_backend_memcheck 240 compute-sanitizer --tool memcheck "$bin/test_cuda_backend" || true
  fi
fi

{
  echo "# CUDA backend check on $gpu_name"
  echo
  echo "## CUDA against the CPU, synthetic models (worst relative logit error; test_cuda_backend)"
  echo
  echo '```'
  cat "$work/test_cuda_backend.out"
  echo '```'
  echo
} >>"$summary"

# ---- 3. fixture models on both devices
# ppl_pair LABEL GGUF TOL: perplexity on the CPU and on the device, relative difference within TOL.
fixture_rows=()
ppl_of() { sed -n 's/.*"ppl":[[:space:]]*\([0-9.eE+-]*\).*/\1/p' "$1" | head -n 1; }
check_fixture() {
  local label=$1 gguf=$2 tol=$3 p_cpu p_dev same
  if ! step "ppl_cpu_$label" 120 "$bin/ppl-eval" "$gguf" --text "$text" --ctx 256 --chunks 8 --json --device cpu ||
    ! step "ppl_dev_$label" 120 "$bin/ppl-eval" "$gguf" --text "$text" --ctx 256 --chunks 8 --json --device "$device"; then
    fail "ppl-eval $label"
    fixture_rows+=("| $label | error | error | | |")
    return 0
  fi
  p_cpu=$(ppl_of "$work/ppl_cpu_$label.out")
  p_dev=$(ppl_of "$work/ppl_dev_$label.out")
  # the greedy texts (generate's stdout; its speed line goes to stderr, into check.log)
  local d
  for d in cpu "$device"; do
    timeout 60 "$bin/generate" "$gguf" -p "Once upon a time" -n 64 --temp 0 --device "$d" \
      >"$work/gen_${d}_$label.txt" 2>>"$log" || fail "generate $label --device $d"
  done
  if cmp -s "$work/gen_cpu_$label.txt" "$work/gen_${device}_$label.txt"; then same=yes; else same=NO; fi
  { echo "----- greedy $label on $device:"; cat "$work/gen_${device}_$label.txt"; } >>"$log"
  local rel
  rel=$(awk -v a="$p_cpu" -v b="$p_dev" 'BEGIN { d = (a > b ? a - b : b - a) / a; printf "%.2e", d }')
  fixture_rows+=("| $label | $p_cpu | $p_dev | $rel (bound $tol) | $same |")
  awk -v r="$rel" -v t="$tol" 'BEGIN { exit !(r <= t) }' || fail "$label: ppl $p_dev on $device vs $p_cpu on the cpu"
  [ "$same" = yes ] || say "note: $label: greedy text differs between the devices (see check.log)"
}
for m in stories260K TinyStories-656K; do
  if [ ! -f "$fixtures/models/$m/config.json" ] || [ ! -f "$text" ]; then
    fail "fixture $m missing under $fixtures (run tests/gpu/prepare.sh and carry .gpu)"
    continue
  fi
  g=$work/$m-f32.gguf
  step "hfconv_$m" 60 "$bin/hfconv" "$fixtures/models/$m" -o "$g" --outtype f32 -q || {
    fail "hfconv $m"
    continue
  }
  check_fixture "$m-F32" "$g" 2e-4
  # F16 and BF16 exactly as stored, the rest quantized (formats whose blocks do
  # not fit these tiny rows fall back as llama.cpp's rules say)
  for preset in F16 BF16 Q8_0 Q4_0 Q5_1 INT8 FP8_E4M3 FP8_E5M2; do
    q=$work/$m-$preset.gguf
    if step "quantize_${m}_$preset" 120 "$bin/quantize" "$g" "$q" "$preset"; then
      case $preset in F16 | BF16) tol=2e-4 ;; *) tol=1e-2 ;; esac
      check_fixture "$m-$preset" "$q" "$tol"
    else
      fail "quantize $m $preset"
    fi
  done
done
{
  echo "## Fixture models: ppl-eval (ctx 256, 8 chunks of tinystories-valid.txt) and greedy text"
  echo
  echo "| model | PPL cpu | PPL $device | relative difference | same greedy text (64 tokens) |"
  echo "| --- | --- | --- | --- | --- |"
  printf '%s\n' "${fixture_rows[@]}"
  echo
} >>"$summary"

# ---- 4. speed on the synthetic 1B shape
bench_rows=()
run_bench() {
  local label=$1 gguf=$2 line
  if [ $((SECONDS - start)) -ge "$budget" ]; then
    say "skipping the $label speed run: past the ${budget}s budget"
    bench_rows+=("| $label | skipped (time) | | | | |")
    return 0
  fi
  if step "bench_$label" 180 "$bin/bench_forward" "$gguf" --device "$device" --prompt 512 --decode 64 --reps 3; then
    line=$(grep '^{' "$work/bench_$label.out" | tail -n 1)
    echo "$line" >>"$bench"
    bench_rows+=("$(echo "$line" | awk -v label="$label" -v peak="$peak" '
      function num(key,   m) { if (match($0, "\"" key "\":[0-9.eE+-]+")) { m = substr($0, RSTART, RLENGTH); sub(/.*:/, "", m); return m + 0 } return 0 }
      { gb = num("decode_bytes_per_token") / 1e9; gbs = num("decode_gbs")
        printf "| %s | %.2f | %.1f | %.0f | %s | %.0f |", label, gb, num("decode_tps"), gbs,
               (peak > 0 ? sprintf("%.0f%%", 100 * gbs / peak) : "?"), num("prompt_tps") }')")
  else
    fail "bench $label"
    bench_rows+=("| $label | error | | | | |")
  fi
}
big=$work/bench-1b
read -r -a shape_args <<<"$shape"
if [ $((SECONDS - start)) -ge "$budget" ]; then
  say "skipping the speed runs: past the ${budget}s budget"
  for preset in F16 Q8_0 Q4_K_M FP8_E4M3 NVFP4; do bench_rows+=("| $preset | skipped (time) | | | | |"); done
elif step mkmodel 240 "$bin/mkmodel" "$big" "${shape_args[@]}" --dtype bf16 --ctx 2048 &&
  step hfconv_1b 240 "$bin/hfconv" "$big" -o "$work/1b-F16.gguf" --outtype f16 -q; then
  rm -rf "$big"
  run_bench F16 "$work/1b-F16.gguf"
  for preset in Q8_0 Q4_K_M FP8_E4M3 NVFP4; do
    if [ $((SECONDS - start)) -ge "$budget" ]; then
      bench_rows+=("| $preset | skipped (time) | | | | |")
      continue
    fi
    if step "quantize_1b_$preset" 240 "$bin/quantize" "$work/1b-F16.gguf" "$work/1b-$preset.gguf" "$preset"; then
      run_bench "$preset" "$work/1b-$preset.gguf"
      rm -f "$work/1b-$preset.gguf"
    else
      fail "quantize 1B $preset"
    fi
  done
else
  fail "the 1B model (mkmodel, hfconv)"
fi
{
  echo "## Speed, synthetic 1B model (mkmodel $shape), --device $device"
  echo
  echo "Decoding: 64 tokens one at a time after a 512-token prompt; bandwidth = weight bytes read per"
  echo "token x tokens/s, against the card's $([ "$peak" -gt 0 ] && echo "${peak} GB/s" || echo "(unknown)") peak"
  echo "($gpu_name; HFQ_GPU_PEAK_GBS sets it). Prompt: 512 tokens in one batch, 3 runs."
  echo
  echo "| format | GB read per token | decode tokens/s | GB/s | of peak | prompt tokens/s |"
  echo "| --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${bench_rows[@]}"
  echo
  echo "$failures failure(s); $((SECONDS - start)) s"
} >>"$summary"

cat "$summary"
say "done: $failures failure(s)"
[ "$failures" -eq 0 ]
