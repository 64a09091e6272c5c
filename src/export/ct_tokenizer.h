/* ct_tokenizer.h - the tokenizer files of a compressed-tensors folder,
 * rebuilt from a GGUF's tokenizer.* keys (when no --tokenizer-from folder
 * is given), in the layout Hugging Face tokenizers / transformers read:
 *   tokenizer.json: model BPE with the GGUF's vocabulary and merges;
 *     - "gpt2" with pre llama-bpe (llama3, llama-v3) or qwen2
 *       (deepseek-r1-qwen): the Split regex of that family's own
 *       tokenizer.json then ByteLevel, NFC normalizer for qwen2,
 *       ignore_merges for llama-bpe (as llama.cpp and Llama 3's file);
 *       control / user-defined tokens are added tokens, not in model.vocab;
 *     - "llama" (SentencePiece-style): byte_fallback BPE with the GGUF's merges,
 *       or, without any (a tokenizer.model source), merges derived as
 *       transformers' generate_merges derives them; Metaspace "\u2581"
 *       pre-tokenizer (prepend_scheme first when add_space_prefix, no split)
 *       and the decoder transformers 5's LlamaTokenizer builds, which
 *       tokenizer_config.json names (legacy false: the GGUF does not keep
 *       legacy); every token in model.vocab, control / unknown /
 *       user-defined ones also added tokens;
 *     post-processor: TemplateProcessing with BOS / EOS as add_bos_token /
 *     add_eos_token say, else none (ByteLevel for gpt2);
 *   tokenizer_config.json: PreTrainedTokenizerFast (LlamaTokenizer for "llama"), bos/eos/unk/pad tokens,
 *     add_bos_token / add_eos_token, added_tokens_decoder, chat_template
 *     from tokenizer.chat_template when present;
 *   special_tokens_map.json.
 * Any other model or pre type, a GGUF without tokenizer, a token holding a
 * NUL byte, is refused with one line naming the folder and what is not
 * rebuilt: the caller fails the export (give --tokenizer-from or
 * --no-tokenizer).
 */
#ifndef HFQ_SRC_EXPORT_CT_TOKENIZER_H
#define HFQ_SRC_EXPORT_CT_TOKENIZER_H

#include "formats/error.h"
#include "formats/gguf.h"

/* Writes the files into folder dir; messages name out_dir (the folder dir becomes). */
int ct_write_tokenizer(const gguf_file *f, const char *dir, const char *out_dir, hfq_error *err);

#endif
