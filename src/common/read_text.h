/* read_text.h - a whole text file into memory, plain or gzip-compressed
 * (zlib reads either transparently): the one text reader of every tool
 * (ppl-eval --text, calibration), with one rule: the text must be valid,
 * non-empty UTF-8. */
#ifndef HFQ_SRC_COMMON_READ_TEXT_H
#define HFQ_SRC_COMMON_READ_TEXT_H

#include <stddef.h>

#include "formats/error.h"

/* Reads path (decompressing gzip) into a malloc'd buffer with a NUL byte
 * appended (not counted in *len); more than max bytes of text, an empty
 * text and invalid UTF-8 (named by its byte offset: a binary file) are
 * refused. Returns 0, or -1 with err naming the file. */
int hfq_read_text(const char *path, size_t max, char **data, size_t *len, hfq_error *err);

#endif
