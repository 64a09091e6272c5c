/* stats_file.h - activation statistics on disk, in llama.cpp's GGUF imatrix
 * layout (tools/imatrix/imatrix.cpp), so files interchange with llama-imatrix
 * and llama-quantize --imatrix in both directions.
 *
 * Keys: general.type = "imatrix"; imatrix.datasets (array of strings: the
 * calibration texts), imatrix.chunk_count (u32), imatrix.chunk_size (u32);
 * ours: hfq.calib.version (u32 1), hfq.calib.mode, hfq.calib.n_tokens (u64),
 * hfq.calib.text_xxh3 (u64), hfq.calib.hist.min_log2 / max_log2 /
 * per_octave (i32, the histogram's bins); with KV-cache maxima (calib/
 * kv_stats.h) hfq.calib.kv.n_head_kv (u32) and hfq.calib.kv.k_amax /
 * v_amax (F32 arrays, [n_layer][n_head_kv]): keys, which llama.cpp ignores.
 *
 * Tensors, by weight name in byte order, each weight's in this order (all
 * F32; shapes as ggml writes them: a trailing dimension of 1 is dropped):
 *   <w>.in_sum2       [n_in, n_mats]  sum of x^2            (llama.cpp's)
 *   <w>.counts        [1, n_mats]     tokens                (llama.cpp's)
 *   <w>.in_sum_abs    [n_in, n_mats]  sum of |x|            (ours)
 *   <w>.in_max        [n_in, n_mats]  max |x|               (ours)
 *   <w>.tok_max_hist  [bins, n_mats]  per-token max|x| histogram (ours)
 *   <w>.in_sample     [n_in, rows]    reservoir of activation rows (ours, leaders only)
 * llama.cpp reads only in_sum2 and counts and ignores the rest.
 *
 * Loading accepts files from llama-imatrix (in_sum2/counts only) and checks
 * everything a hostile file can lie about: pairs complete, F32, consistent
 * shapes, finite non-negative values, integral counts. Errors are one line
 * naming the file and the tensor or key.
 */
#ifndef HFQ_CALIB_STATS_FILE_H
#define HFQ_CALIB_STATS_FILE_H

#include "calib/stats.h"
#include "formats/error.h"

/* Writes finished statistics to path (temporary file + rename). */
int hfq_calib_stats_save(const hfq_calib_stats *s, const char *path, hfq_error *err);

/* Reads path into s (initialised here; free with hfq_calib_stats_free). */
int hfq_calib_stats_load(hfq_calib_stats *s, const char *path, hfq_error *err);

#endif
