/* measure_file.c - the measurement file (JSON); see measure.h and
 * docs/mixed.md:
 *
 *   {"hfq_measurements": 1, "source": "...", "formats": ["q4_K", "int8:g64"],
 *    "tensors": [{"name": "blk.0.attn_q.weight", "ne": [256, 256],
 *                 "errors": [0.0123, null]}]}
 *
 * errors[k] belongs to formats[k]; null: the format cannot hold the rows. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/atomic_file.h"
#include "src/common/json_file.h"
#include "src/quantize/measure.h"

#define FILE_VERSION 1
#define MAX_FORMATS 64

static cJSON *to_json(const hfq_measurements *m) {
    cJSON *root = cJSON_CreateObject();
    bool ok = root && cJSON_AddNumberToObject(root, "hfq_measurements", FILE_VERSION) &&
              cJSON_AddStringToObject(root, "source", m->source);
    cJSON *fmts = ok ? cJSON_AddArrayToObject(root, "formats") : NULL;
    cJSON *tensors = fmts ? cJSON_AddArrayToObject(root, "tensors") : NULL;
    ok = tensors != NULL;
    for (int k = 0; k < m->n_specs && ok; k++) {
        char s[64];
        hfq_fmt_spec_str(&m->specs[k], s, sizeof s);
        ok = cJSON_AddItemToArray(fmts, cJSON_CreateString(s));
    }
    for (int64_t i = 0; i < m->n_tensors && ok; i++) {
        const hfq_measured_tensor *t = &m->tensors[i];
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(tensors, o);
        if (!ok) {
            cJSON_Delete(o);
            break;
        }
        ok = cJSON_AddStringToObject(o, "name", t->name) != NULL;
        cJSON *ne = ok ? cJSON_AddArrayToObject(o, "ne") : NULL, *errs = ne ? cJSON_AddArrayToObject(o, "errors") : NULL;
        ok = errs != NULL;
        if (ok && t->kl_ref >= 0) {
            char s[64];
            hfq_fmt_spec_str(&m->specs[t->kl_ref], s, sizeof s);
            ok = cJSON_AddStringToObject(o, "kl_format", s) && cJSON_AddNumberToObject(o, "kld", t->kl);
        }
        int nd = 4;
        while (nd > 1 && t->ne[nd - 1] == 1) nd--;
        for (int d = 0; d < nd && ok; d++) ok = cJSON_AddItemToArray(ne, cJSON_CreateNumber((double)t->ne[d]));
        for (int k = 0; k < m->n_specs && ok; k++)
            ok = cJSON_AddItemToArray(errs, isnan(t->err[k]) ? cJSON_CreateNull() : cJSON_CreateNumber(t->err[k]));
    }
    if (ok) return root;
    cJSON_Delete(root);
    return NULL;
}

int hfq_measurements_save(const hfq_measurements *m, const char *path, hfq_error *err) {
    cJSON *root = to_json(m);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return hfq_fail(err, path, "out of memory");
    hfq_atomic_file af;
    int rc = hfq_atomic_open(&af, path, err);
    if (rc == 0 && (hfq_atomic_write(&af, text, strlen(text), err) < 0 || hfq_atomic_write(&af, "\n", 1, err) < 0)) {
        hfq_atomic_abort(&af);
        rc = -1;
    }
    if (rc == 0) rc = hfq_atomic_commit(&af, err);
    free(text);
    return rc;
}

static int parse_tensor(const cJSON *o, const hfq_fmt_spec *specs, int n_specs, hfq_measured_tensor *t,
                        const char *path, int64_t i, hfq_error *err) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *ne = cJSON_GetObjectItemCaseSensitive(o, "ne");
    const cJSON *errs = cJSON_GetObjectItemCaseSensitive(o, "errors");
    if (!cJSON_IsString(name) || !cJSON_IsArray(ne) || !cJSON_IsArray(errs))
        return hfq_fail(err, path, "tensor %" PRId64 ": needs \"name\", \"ne\" and \"errors\"", i);
    int nd = cJSON_GetArraySize(ne);
    if (nd < 1 || nd > 4) return hfq_fail(err, path, "tensor %s: \"ne\" must hold 1 to 4 sizes", name->valuestring);
    if (cJSON_GetArraySize(errs) != n_specs)
        return hfq_fail(err, path, "tensor %s: %d errors for %d formats", name->valuestring, cJSON_GetArraySize(errs),
                        n_specs);
    for (int d = 0; d < 4; d++) {
        const cJSON *v = d < nd ? cJSON_GetArrayItem(ne, d) : NULL;
        if (v && (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 1e15 ||
                  v->valuedouble != (double)(int64_t)v->valuedouble))
            return hfq_fail(err, path, "tensor %s: bad size in \"ne\"", name->valuestring);
        t->ne[d] = v ? (int64_t)v->valuedouble : 1;
    }
    size_t len = strlen(name->valuestring) + 1;
    if (!(t->name = malloc(len)) || !(t->err = malloc((size_t)(n_specs > 0 ? n_specs : 1) * sizeof *t->err)))
        return hfq_fail(err, path, "out of memory");
    memcpy(t->name, name->valuestring, len);
    t->kl_ref = -1;
    const cJSON *klf = cJSON_GetObjectItemCaseSensitive(o, "kl_format"), *kld = cJSON_GetObjectItemCaseSensitive(o, "kld");
    if (klf || kld) {
        hfq_fmt_spec spec;
        if (!cJSON_IsString(klf) || !cJSON_IsNumber(kld) || !isfinite(kld->valuedouble) || kld->valuedouble < 0 ||
            hfq_fmt_spec_parse(klf->valuestring, &spec) < 0)
            return hfq_fail(err, path, "tensor %s: \"kl_format\" and \"kld\" must be a format and a number >= 0",
                            name->valuestring);
        for (int k = 0; k < n_specs; k++)
            if (specs[k].fmt == spec.fmt && specs[k].scale_group == spec.scale_group) t->kl_ref = k;
        if (t->kl_ref < 0) return hfq_fail(err, path, "tensor %s: kl_format %s is not among the formats", name->valuestring,
                                           klf->valuestring);
        t->kl = kld->valuedouble;
    }
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, errs) {
        if (cJSON_IsNull(e)) t->err[k++] = NAN;
        else if (cJSON_IsNumber(e) && isfinite(e->valuedouble) && e->valuedouble >= 0) t->err[k++] = e->valuedouble;
        else return hfq_fail(err, path, "tensor %s: error %d is not a number >= 0 or null", name->valuestring, k);
    }
    return 0;
}

int hfq_measurements_load(hfq_measurements *m, const char *path, hfq_error *err) {
    memset(m, 0, sizeof *m);
    cJSON *root = hfq_json_load(path, err);
    if (!root) return -1;
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "hfq_measurements");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(root, "source");
    const cJSON *fmts = cJSON_GetObjectItemCaseSensitive(root, "formats");
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    int rc = 0;
    if (!cJSON_IsNumber(ver) || ver->valuedouble != FILE_VERSION) {
        rc = hfq_fail(err, path, "not a measurement file of version %d (key hfq_measurements)", FILE_VERSION);
        goto done;
    }
    int n_specs = cJSON_IsArray(fmts) ? cJSON_GetArraySize(fmts) : -1;
    if (n_specs < 1 || n_specs > MAX_FORMATS || !cJSON_IsArray(tensors)) {
        rc = hfq_fail(err, path, "needs \"formats\" (1 to %d) and \"tensors\" lists", MAX_FORMATS);
        goto done;
    }
    if (cJSON_IsString(src)) snprintf(m->source, sizeof m->source, "%s", src->valuestring);
    int64_t n = cJSON_GetArraySize(tensors);
    m->specs = malloc((size_t)n_specs * sizeof *m->specs);
    m->tensors = calloc((size_t)(n > 0 ? n : 1), sizeof *m->tensors);
    if (!m->specs || !m->tensors) {
        rc = hfq_fail(err, path, "out of memory");
        goto done;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, fmts) {
        if (!cJSON_IsString(e) || hfq_fmt_spec_parse(e->valuestring, &m->specs[m->n_specs]) < 0) {
            rc = hfq_fail(err, path, "format %d: '%s' is not a format", m->n_specs,
                          cJSON_IsString(e) ? e->valuestring : "(not a string)");
            goto done;
        }
        m->n_specs++;
    }
    cJSON_ArrayForEach(e, tensors) {
        int64_t i = m->n_tensors++;
        if ((rc = parse_tensor(e, m->specs, n_specs, &m->tensors[i], path, i, err)) < 0) goto done;
        for (int64_t j = 0; j < i; j++)
            if (strcmp(m->tensors[j].name, m->tensors[i].name) == 0) {
                rc = hfq_fail(err, path, "tensor %s is listed twice", m->tensors[i].name);
                goto done;
            }
    }
done:
    cJSON_Delete(root);
    if (rc < 0) hfq_measurements_free(m);
    return rc;
}
