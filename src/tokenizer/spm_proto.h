/* spm_proto.h - reader for SentencePiece's tokenizer.model (a serialized
 * sentencepiece.ModelProto protobuf), written by hand: only the fields the
 * tokenizer needs are kept, every other field is skipped by its wire type.
 *
 * Fields read (field numbers from sentencepiece_model.proto):
 *   ModelProto.pieces (1): piece (1), score (2), type (3, default NORMAL)
 *   ModelProto.trainer_spec (2): model_type (3), treat_whitespace_as_suffix
 *     (24), byte_fallback (35), unk_id (40), bos_id (41), eos_id (42), pad_id (43)
 *   ModelProto.normalizer_spec (3): name (1), precompiled_charsmap (2),
 *     add_dummy_prefix (3), remove_extra_whitespaces (4), escape_whitespaces (5)
 * Absent fields take the proto defaults. Hostile input (truncation, lengths
 * past the end, bad wire types, invalid UTF-8 in pieces, counts) fails with a
 * one-line error naming the file.
 */
#ifndef HFQ_SRC_TOKENIZER_SPM_PROTO_H
#define HFQ_SRC_TOKENIZER_SPM_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"

/* Piece types, as in sentencepiece (and llama.cpp's token types). */
enum { SPM_NORMAL = 1, SPM_UNKNOWN = 2, SPM_CONTROL = 3, SPM_USER_DEFINED = 4,
       SPM_UNUSED = 5, SPM_BYTE = 6 };
/* TrainerSpec.model_type */
enum { SPM_MODEL_UNIGRAM = 1, SPM_MODEL_BPE = 2, SPM_MODEL_WORD = 3, SPM_MODEL_CHAR = 4 };

typedef struct hfq_spm_piece {
    char *text;      /* NUL-terminated, valid UTF-8, non-empty */
    uint32_t len;
    float score;
    int32_t type;    /* SPM_* */
} hfq_spm_piece;

typedef struct hfq_spm_model {
    int64_t n_pieces;
    hfq_spm_piece *pieces;
    int32_t model_type;
    bool byte_fallback, treat_whitespace_as_suffix;
    int32_t unk_id, bos_id, eos_id, pad_id;   /* -1 when disabled */
    char *normalizer_name;                    /* "" when absent */
    uint64_t precompiled_charsmap_len;
    bool add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
} hfq_spm_model;

/* Parses a serialized ModelProto; path names the source in errors. */
int hfq_spm_parse(const void *data, size_t len, const char *path, hfq_spm_model *out,
                  hfq_error *err);
/* Reads and parses the file at path. */
int hfq_spm_load(const char *path, hfq_spm_model *out, hfq_error *err);
void hfq_spm_free(hfq_spm_model *m);

#endif
