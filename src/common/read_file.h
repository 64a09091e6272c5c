/* read_file.h - reads a whole (small) file into memory. */
#ifndef HFQ_SRC_COMMON_READ_FILE_H
#define HFQ_SRC_COMMON_READ_FILE_H

#include <stddef.h>

#include "formats/error.h"

/* Reads path into a malloc'd buffer with a NUL byte appended (not counted in
 * *len). Files larger than max bytes are refused. Returns 0, or -1 with err
 * naming the file. */
int hfq_read_file(const char *path, size_t max, char **data, size_t *len, hfq_error *err);

#endif
