/* cli.h - command-line numbers for the tools: whole strings only, in range,
 * with one-line messages naming the option. */
#ifndef HFQ_SRC_CLI_H
#define HFQ_SRC_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"

/* True (after printing usage to stdout) when -h or --help is among the arguments. */
bool hfq_cli_help(int argc, char **argv, const char *usage);

/* Seconds on a monotonic clock, for throughput figures. */
double hfq_cli_seconds(void);

/* Parses s as a decimal integer in [min, max]; -1 with err naming opt. */
int hfq_cli_int(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out, hfq_error *err);

/* Parses s as a finite number in [min, max]; -1 with err naming opt. */
int hfq_cli_float(const char *opt, const char *s, double min, double max, double *out, hfq_error *err);

#endif
