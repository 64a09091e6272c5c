/* cli.h - command-line numbers for the tools: whole strings only, in range,
 * with one-line messages naming the option. */
#ifndef HFQ_SRC_CLI_CLI_H
#define HFQ_SRC_CLI_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"
#include "kernels/ops.h"

/* True (after printing usage to stdout) when -h or --help is among the arguments. */
bool hfq_cli_help(int argc, char **argv, const char *usage);

/* Seconds on a monotonic clock, for throughput figures. */
double hfq_cli_seconds(void);

/* Parses s as a decimal integer in [min, max]; -1 with err naming opt. */
int hfq_cli_int(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out, hfq_error *err);

/* Parses s as a finite number in [min, max]; -1 with err naming opt. */
int hfq_cli_float(const char *opt, const char *s, double min, double max, double *out, hfq_error *err);

/* Parses s as an activation quantization mode: "auto" (what the model file
 * says), "none", "dynamic" or "static"; -1 with err naming opt. */
int hfq_cli_act_quant(const char *opt, const char *s, hfq_act_quant *out, hfq_error *err);

/* The name hfq_cli_act_quant parses for a mode. */
const char *hfq_cli_act_quant_name(hfq_act_quant aq);

#endif
