/* utf8.h - strict UTF-8: what counts as one valid character. */
#ifndef HFQ_SRC_COMMON_UTF8_H
#define HFQ_SRC_COMMON_UTF8_H

#include <stddef.h>

/* Length in bytes of the well-formed sequence at s (0 if it is not one). */
size_t hfq_utf8_valid_len(const char *s, size_t len);

#endif
