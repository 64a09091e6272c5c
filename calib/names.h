/* names.h - which weights of a Llama-family GGUF share an input.
 *
 * q, k and v multiply the same normalized input, as do gate and up (also
 * their expert forms *_exps); their statistics are equal, so one of them - the
 * input's "leader" (attn_q, ffn_gate, ffn_gate_exps) - keeps the activation
 * sample for all. Every other weight leads its own input.
 */
#ifndef HFQ_CALIB_NAMES_H
#define HFQ_CALIB_NAMES_H

#include <stdbool.h>
#include <stddef.h>

/* Writes the leader of weight `name`'s input to out (cap bytes); returns
 * true when name is its own leader. A name that does not fit is its own
 * leader. */
bool hfq_calib_input_leader(const char *name, char *out, size_t cap);

/* "blk.<il>.<part>.weight" (or ".bias") into out; -1 when it does not fit. */
int hfq_calib_layer_name(char *out, size_t cap, long il, const char *part, const char *suffix);

#endif
