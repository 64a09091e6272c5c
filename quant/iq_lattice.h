/* iq_lattice.h - the search structures of ggml's grid quantizers (IQ3,
 * IQ2, IQ1): the codebook in lattice form and, for every lattice point that
 * is not in the codebook, the codebook entries nearest to it.
 *
 * A group of `dim` weights (4 for IQ3, 8 for IQ2/IQ1) is first rounded to
 * levels l in [0, 2^bits); the point index is sum l_k << (bits * k). The
 * codebook's entries are such points (coordinate 2 l + 1, as ggml's
 * quantizers see them). map[index] is the entry's position when the point
 * is in the codebook, else -(o + 1) with neighbours[o] the count c and
 * neighbours[o + 1 .. o + c] the entries whose squared lattice distance is
 * among the `nwant` smallest, ordered by (distance, position): exactly the
 * lists of ggml's iq2xs_init_impl / iq3xs_init_impl, whose quantizers take
 * the first best candidate in that order.
 *
 * The tables are computed at build time from quant/iq_grids.h by
 * quant/iq_lattice_gen.c (a pure function of the codebooks), so they are
 * constant data: no initialisation call, nothing shared that changes.
 */
#ifndef HFQ_QUANT_IQ_LATTICE_H
#define HFQ_QUANT_IQ_LATTICE_H

#include <float.h>
#include <stdint.h>

typedef struct hfq_iq_lattice {
    int dim;                    /* weights per codebook entry */
    int bits;                   /* bits per level in a point index */
    int grid_size;              /* codebook entries */
    int map_size;               /* point indices covered by map */
    const int8_t *coords;       /* grid_size * dim lattice coordinates 2 l + 1 */
    const int32_t *map;         /* map_size entries, see above */
    const uint16_t *neighbours; /* the lists map points into */
} hfq_iq_lattice;

extern const hfq_iq_lattice hfq_iq_lattice_iq3xxs; /* nwant 2 */
extern const hfq_iq_lattice hfq_iq_lattice_iq3s;   /* nwant 3 */
extern const hfq_iq_lattice hfq_iq_lattice_iq2xxs; /* nwant 2 */
extern const hfq_iq_lattice hfq_iq_lattice_iq2xs;  /* nwant 2 */
extern const hfq_iq_lattice hfq_iq_lattice_iq2s;   /* nwant 1 */
extern const hfq_iq_lattice hfq_iq_lattice_iq1s;   /* nwant 3; IQ1_S and IQ1_M */

/* The neighbour list of the off-codebook point whose map entry is m (< 0). */
static inline const uint16_t *hfq_iq_neighbours(const hfq_iq_lattice *lat, int32_t m) {
    return lat->neighbours - m - 1;
}

/* ggml's iq2/iq3_find_best_neighbour: the listed entry minimising
 * sum w_i (scale * coord_i - x_i)^2 (the first on ties); its levels go to L.
 * Returns the entry's position. */
static inline int hfq_iq_best_neighbour(const hfq_iq_lattice *lat, const uint16_t *nb, const float *x,
                                        const float *w, float scale, int8_t *L) {
    const int dim = lat->dim;
    float best_d2 = FLT_MAX;
    int best = nb[1];
    for (int j = 1; j <= nb[0]; ++j) {
        const int8_t *pg = lat->coords + (int)nb[j] * dim;
        float d2 = 0;
        for (int i = 0; i < dim; ++i) {
            float q = pg[i];
            float diff = scale * q - x[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = nb[j];
        }
    }
    const int8_t *pg = lat->coords + best * dim;
    for (int i = 0; i < dim; ++i) L[i] = (int8_t)((pg[i] - 1) / 2);
    return best;
}

#endif
