/* output.h - checks that an output path cannot lose a user's file, made by
 * every tool before any work (docs/robustness.md).
 *
 * An output is refused when it is a directory or another non-regular file
 * (a device, a FIFO: the rename would replace the node), when its folder does not
 * exist, or when it is (or links to: stat follows symbolic links, and hard
 * links share the inode) one of the run's inputs or another of its outputs;
 * an input named as the first file of a split GGUF (formats/gguf.h) stands
 * for every file of the split.
 * Outputs are written through formats/atomic_file.h, so a refused check is
 * the only way a run could have replaced an input; a path that does not
 * exist yet cannot be an input.
 */
#ifndef HFQ_SRC_COMMON_OUTPUT_H
#define HFQ_SRC_COMMON_OUTPUT_H

#include <stdbool.h>

#include "formats/error.h"

typedef struct hfq_path_role {
    const char *path;       /* NULL entries are skipped */
    const char *what;       /* how the command line names it: "--save-logits", "the model" */
    bool is_dir;            /* an input folder: every regular file directly inside it is an input */
} hfq_path_role;

/* Checks outputs[0..n_out) against each other and against inputs[0..n_in).
 * Fails with one line naming the output, the option, and what it would
 * have replaced. */
int hfq_check_outputs(const hfq_path_role *outputs, int n_out, const hfq_path_role *inputs, int n_in,
                      hfq_error *err);

#endif
