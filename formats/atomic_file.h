/* atomic_file.h - write an output file so that it appears only when complete.
 *
 * Data goes to a temporary file in the destination folder ("<path>.tmp.XXXXXX");
 * hfq_atomic_commit flushes, fsyncs and renames it over <path>. On any failure,
 * or on hfq_atomic_abort, the temporary file is removed and <path> is untouched.
 */
#ifndef HFQ_FORMATS_ATOMIC_FILE_H
#define HFQ_FORMATS_ATOMIC_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "formats/error.h"

typedef struct hfq_atomic_file {
    FILE *fp;          /* open for writing while the file is in progress */
    char *path;        /* final destination */
    char *tmp_path;    /* temporary file beside it */
} hfq_atomic_file;

int hfq_atomic_open(hfq_atomic_file *af, const char *path, hfq_error *err);
/* Writes n bytes; on a short write fills err (naming the final path). */
int hfq_atomic_write(hfq_atomic_file *af, const void *buf, size_t n, hfq_error *err);
int hfq_atomic_commit(hfq_atomic_file *af, hfq_error *err);
void hfq_atomic_abort(hfq_atomic_file *af);

#endif
