/* Exhaustive checks of the fp16/bf16 conversions against the compiler's own
 * IEEE conversions (_Float16 on x86-64 rounds to nearest even). */
#include <stdint.h>

#include "quant/half.h"
#include "check.h"

int main(void) {
    /* every fp16 value decodes to the same float as the compiler's conversion */
    for (uint32_t h = 0; h < 65536; h++) {
        _Float16 hv;
        uint16_t hb = (uint16_t)h;
        memcpy(&hv, &hb, 2);
        float want = (float)hv, got = hfq_fp16_to_f32(hb);
        if (want != want) CHECK(got != got);
        else CHECK_MSG(hfq_f32_bits(want) == hfq_f32_bits(got), "h=%04x", h);
    }
    /* encoding agrees with the compiler for a dense sweep of float bit patterns */
    int bad = 0;
    for (uint64_t u = 0; u < 0x100000000ull; u += 4093) {
        float f = hfq_bits_f32((uint32_t)u);
        _Float16 hv = (_Float16)f;
        uint16_t want;
        memcpy(&want, &hv, 2);
        uint16_t got = hfq_f32_to_fp16(f);
        if (f != f) { if ((got & 0x7c00) != 0x7c00 || !(got & 0x3ff)) bad++; }
        else if (got != want) { if (bad++ < 5) fprintf(stderr, "f32 %08x: %04x vs %04x\n", (unsigned)u, got, want); }
    }
    CHECK(bad == 0);
    /* bf16: exact ties to even, NaN stays NaN */
    CHECK(hfq_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(hfq_f32_to_bf16(hfq_bits_f32(0x3f808000u)) == 0x3f80); /* tie -> even */
    CHECK(hfq_f32_to_bf16(hfq_bits_f32(0x3f818000u)) == 0x3f82); /* tie -> even (up) */
    CHECK(hfq_f32_to_bf16(hfq_bits_f32(0x3f808001u)) == 0x3f81);
    uint16_t nb = hfq_f32_to_bf16(hfq_bits_f32(0x7f800001u));
    CHECK((nb & 0x7f80) == 0x7f80 && (nb & 0x7f));
    CHECK(hfq_bf16_to_f32(0xc040) == -3.0f);
    return check_exit();
}
