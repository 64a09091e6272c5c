#include "src/hf/pyregex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hf_pyregex_compile(regex_t *re, const char *before, const char *pattern, const char *after) {
    for (const char *p = pattern; *p; p++) {
        if (p[0] == '\\' && ((p[1] >= 'a' && p[1] <= 'z') || (p[1] >= 'A' && p[1] <= 'Z'))) return -1;
        if (p[0] == '(' && p[1] == '?') return -1;
    }
    size_t n = strlen(before) + strlen(pattern) + strlen(after) + 3;
    char *expr = malloc(n);
    if (!expr) return -1;
    snprintf(expr, n, "%s(%s)%s", before, pattern, after);
    int rc = regcomp(re, expr, REG_EXTENDED | REG_NOSUB);
    free(expr);
    return rc == 0 ? 0 : -1;
}
