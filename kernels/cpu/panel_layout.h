/* panel_layout.h - the activation layout the integer panels share (panel.c,
 * panel_int8.c): PANEL_COLS tokens side by side, 4 codes of a token per
 * 32-bit lane, each byte the unsigned a + 128 that vpdpbusd multiplies
 * with a signed weight byte (the panels take the + 128 back from each sum's
 * start, -128 times the weight codes' sum); step k (codes 4 k .. 4 k + 3)
 * of all the tokens in one 64-byte vector (the 256-bit panels read its
 * halves; AVX2's codes beyond 64 flip the bytes back to signed a). */
#ifndef HFQ_KERNELS_CPU_PANEL_LAYOUT_H
#define HFQ_KERNELS_CPU_PANEL_LAYOUT_H

#include <stdint.h>
#include <string.h>

#define PANEL_COLS 16

/* Token c's n codes qs (n a multiple of 4) into the layout at codes. */
static inline void panel_pack_codes(uint32_t *codes, const int8_t *qs, int64_t n, int c) {
    for (int64_t k = 0; k < n / 4; k++) {
        uint32_t v;
        memcpy(&v, qs + 4 * k, 4);
        codes[k * PANEL_COLS + c] = v ^ 0x80808080u;   /* a + 128 in every byte */
    }
}

/* Lane c of n codes' layout as zero activations (a token past the batch). */
static inline void panel_pad_codes(uint32_t *codes, int64_t n, int c) {
    for (int64_t k = 0; k < n / 4; k++) codes[k * PANEL_COLS + c] = 0x80808080u;
}

#endif
