/* pyregex.h - a Python regular expression of a Hugging Face config
 * (peft's rank_pattern keys, compressed-tensors' "re:" targets) as a POSIX
 * extended one, for the syntax both read alike. Python-only syntax (\d, \w,
 * (?...)) would mean something else to regcomp: refused. */
#ifndef HFQ_SRC_HF_PYREGEX_H
#define HFQ_SRC_HF_PYREGEX_H

#include <regex.h>

/* Compiles before + "(" + pattern + ")" + after (REG_EXTENDED | REG_NOSUB);
 * -1 on Python-only syntax, an invalid pattern, or no memory. */
int hf_pyregex_compile(regex_t *re, const char *before, const char *pattern, const char *after);

#endif
