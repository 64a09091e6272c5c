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
