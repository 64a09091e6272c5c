/* overlap.h - does an evaluation text overlap the calibration text?
 *
 * Scoring a calibrated model on its own calibration text flatters it. The
 * calibration sequences are summarised as a set of token windows: the
 * XXH3-64 hashes of their consecutive, non-overlapping windows of
 * HFQ_OVERLAP_WINDOW tokens (a sequence's first token is skipped: chunks
 * replace it by BOS), sorted, duplicates removed, at most
 * HFQ_OVERLAP_MAX_WINDOWS kept (the smallest hashes: a uniform sample, so a
 * large calibration set is still detected, with fewer windows). An
 * evaluation text of the same tokenizer is then checked at every position:
 * a window of it whose hash is in the set was (almost surely) calibration
 * text. Exact token matches only: the same text tokenized differently (other
 * chunk starts give the same tokens, so chunking does not matter) or a
 * paraphrase is not seen.
 *
 * The quantize tool stores the set as hfq.calib.token_windows (UINT64
 * array) with hfq.calib.token_window (the window length); ppl-eval warns.
 */
#ifndef HFQ_CALIB_OVERLAP_H
#define HFQ_CALIB_OVERLAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calib/calibrate.h"
#include "formats/error.h"
#include "formats/gguf.h"

#define HFQ_OVERLAP_WINDOW 32
#define HFQ_OVERLAP_MAX_WINDOWS 65536

/* The window set of seqs into *out (malloc'd, ascending; NULL when *n is 0).
 * -1 when out of memory. */
int hfq_overlap_windows(const hfq_calib_seqs *seqs, uint64_t **out, size_t *n);

/* How many of the windows starting at tokens[0 .. n_tokens - window] have
 * their hash in set[0..n_set) (ascending; window tokens long each). */
int64_t hfq_overlap_count(const uint64_t *set, size_t n_set, int64_t window, const int32_t *tokens,
                          int64_t n_tokens);

/* Writes seqs' window set as the two keys (nothing when it is empty). */
int hfq_overlap_write(gguf_writer *w, const hfq_calib_seqs *seqs);

/* Checks tokens[0..n_tokens) against the window set model f stores: *hits
 * the windows found there (0 when f has none: *stored false). Fails, naming
 * f, when the keys are malformed. */
int hfq_overlap_check(const gguf_file *f, const int32_t *tokens, int64_t n_tokens, bool *stored, int64_t *hits,
                      hfq_error *err);

#endif
