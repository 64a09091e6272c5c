/* chat_template.h - one user message in a model's chat template, for
 * calibrating on prompts the way a chat model sees them.
 *
 * Not a Jinja interpreter: like llama.cpp's llm_chat_detect_template, the
 * template (tokenizer.chat_template) is recognised by the markers of the
 * common shapes and the message rendered as that shape renders a single user
 * turn followed by the generation prompt:
 *
 *   ChatML (Qwen, ...)  [<|im_start|>system\nDEFAULT<|im_end|>\n]
 *                       <|im_start|>user\nMSG<|im_end|>\n<|im_start|>assistant\n
 *                       (DEFAULT: a literal default system message the
 *                       template inserts when there is none, as Qwen2.5's)
 *   Llama 3             BOS<|start_header_id|>user<|end_header_id|>\n\nMSG<|eot_id|>
 *                       <|start_header_id|>assistant<|end_header_id|>\n\n   (MSG trimmed)
 *   Llama 2 / Mistral   BOS[INST] MSG [/INST]                                (MSG trimmed)
 *
 * BOS is the vocabulary's BOS text, written only when the template uses
 * bos_token. Anything else is refused with a one-line error.
 */
#ifndef HFQ_CALIB_CHAT_TEMPLATE_H
#define HFQ_CALIB_CHAT_TEMPLATE_H

#include <stddef.h>

#include "formats/error.h"

typedef enum hfq_chat_kind {
    HFQ_CHAT_UNSUPPORTED = -1,
    HFQ_CHAT_CHATML,
    HFQ_CHAT_LLAMA3,
    HFQ_CHAT_LLAMA2,
} hfq_chat_kind;

hfq_chat_kind hfq_chat_detect(const char *tmpl);
const char *hfq_chat_kind_name(hfq_chat_kind kind);

/* Renders msg[0..len) as a user turn of template tmpl; returns a malloc'd
 * NUL-terminated string (*out_len bytes), or NULL with err (unsupported
 * template, out of memory). bos_text may be NULL (no BOS token). */
char *hfq_chat_render_user(const char *tmpl, const char *bos_text, const char *msg, size_t len, size_t *out_len,
                           hfq_error *err);

#endif
