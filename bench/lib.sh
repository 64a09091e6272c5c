# bench/lib.sh - helpers the bench scripts share (sourced, not run).

# Numbers on stdin, one per line -> their median: the middle one, or the mean
# of the middle two; "-" when there are none.
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
                                      else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# prompt_for TOKENIZE MODEL TEXT N -> the longest start of TEXT (whole words)
# that MODEL's tokenizer makes at most N tokens, BOS included.
prompt_for() {
  local lo=1 hi=2000 mid
  while [ $((hi - lo)) -gt 1 ]; do
    mid=$(((lo + hi) / 2))
    if [ "$("$1" "$2" -p "$(tr -s ' \n' '  ' <"$3" | cut -d' ' -f1-"$mid")" | wc -w)" -le "$4" ]; then lo=$mid
    else hi=$mid; fi
  done
  tr -s ' \n' '  ' <"$3" | cut -d' ' -f1-"$lo"
}

# Tensors (name, type, shape, bytes) of two GGUFs, compared; prints yes/no.
same_tensors() {  # A.gguf B.gguf
  "${py:-.venv/bin/python}" - "$1" "$2" <<'EOF'
import sys
import numpy as np
from gguf import GGUFReader

def tensors(path):
    return {t.name: (t.tensor_type, [int(x) for x in t.shape], np.asarray(t.data).view(np.uint8).reshape(-1))
            for t in GGUFReader(path).tensors}

a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
differ = sorted(k for k in a.keys() | b.keys()
                if k not in a or k not in b or a[k][0] != b[k][0] or a[k][1] != b[k][1] or not np.array_equal(a[k][2], b[k][2]))
print(f"yes ({len(a)} tensors)" if not differ else f"NO ({len(differ)} of {len(a)} tensors differ, first {differ[0]})")
EOF
}

# bits_per_weight GGUF -> 8 x the bytes of its tensors / their elements
bits_per_weight() {
  "${py:-.venv/bin/python}" - "$1" <<'EOF'
import sys
from gguf import GGUFReader
ts = GGUFReader(sys.argv[1]).tensors
print(f"{8 * sum(int(t.n_bytes) for t in ts) / sum(int(t.n_elements) for t in ts):.2f}")
EOF
}

# llama_eval_tps N LOG WALL -> tokens/s of llama-perplexity's evaluation: N tokens over the
# seconds from its "calculating perplexity" log line (timestamps M.SS.mmm.uuu from its start)
# to the end of the process, WALL s after its start. Not to its "Final estimate" line: its
# logger's thread is not flushed at exit, and the last lines are lost in about one run of three.
llama_eval_tps() {
  awk -v n="$1" -v w="$3" 'function t(s,  a) { split(s, a, "."); return a[1] * 60 + a[2] + a[3] / 1e3 + a[4] / 1e6 }
    /calculating perplexity/ && !start { start = t($1) }
    END { if (start > 0 && w > start) printf "%.1f\n", n / (w - start) }' "$2"
}
