#!/usr/bin/env bash
# prepare.sh [ARCHS] - run HERE, on the machine without a GPU, before a GPU
# session calls tests/gpu/check.sh on the device machine. Fills .gpu/ (git-
# ignored), which the device call carries:
#   .gpu/bin       the tools and test programs check.sh runs, built with
#                  -Dcuda=enabled for gpu_archs ARCHS (default 90: H100/H200)
#   .gpu/lib       the shared libraries they need that a CUDA image may lack
#                  (cJSON, xxHash, OpenMP, the CUDA runtime; cuBLAS is the
#                  image's own)
#   .gpu/fixtures  stories260K, TinyStories-656K and tinystories-valid.txt,
#                  copied from ../shared/fixtures (check.sh itself copies nothing)
# Then, with the device tool: run(command="tests/gpu/check.sh $OUT", carry=[".gpu"]).
# check.sh builds on the device machine itself if these binaries do not run there.
set -euo pipefail
cd "$(dirname "$0")/../.."
archs=${1:-90}
fixtures=${HFQ_FIXTURES:-../shared/fixtures}
tools=(hfconv quantize mkmodel ppl-eval generate)
tests=(test_cuda_plan test_cuda_device test_cuda_backend bench_forward)

if [ ! -f build-gpu/build.ninja ]; then
  meson setup build-gpu -Dcuda=enabled -Dgpu_archs="$archs" --buildtype=release
else
  meson configure build-gpu -Dcuda=enabled -Dgpu_archs="$archs"
fi
targets=()
for t in "${tools[@]}"; do targets+=("src/tools/$t"); done
for t in "${tests[@]}"; do targets+=("tests/$t"); done
ninja -C build-gpu "${targets[@]}" kernels/libhfq_cuda.so

rm -rf .gpu/bin .gpu/lib
mkdir -p .gpu/bin .gpu/lib .gpu/fixtures/models .gpu/fixtures/text
for t in "${tools[@]}"; do cp "build-gpu/src/tools/$t" .gpu/bin/; done
for t in "${tests[@]}"; do cp "build-gpu/tests/$t" .gpu/bin/; done
cp build-gpu/kernels/libhfq_cuda.so .gpu/bin/   # the CUDA backend, found beside the executables
ldd .gpu/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -E '/lib(cjson|xxhash|gomp|cudart)\.so' | while read -r lib; do cp -L "$lib" .gpu/lib/; done

for m in stories260K TinyStories-656K; do
  rm -rf ".gpu/fixtures/models/$m"
  cp -r "$fixtures/models/$m" .gpu/fixtures/models/
done
cp "$fixtures/text/tinystories-valid.txt" .gpu/fixtures/text/
du -sh .gpu/bin .gpu/lib .gpu/fixtures
echo "ready: carry .gpu (under the device tool's 64 MiB) and run tests/gpu/check.sh \$OUT"
