/* output.c - see output.h. */
#include "src/common/output.h"

#include "formats/gguf.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The folder an output will be created in must exist and be a folder. */
static int check_folder(const hfq_path_role *o, hfq_error *err) {
    const char *slash = strrchr(o->path, '/');
    char dir[PATH_MAX];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == o->path) snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - o->path) >= sizeof dir) return hfq_fail(err, o->path, "%s: path too long", o->what);
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - o->path), o->path);
    struct stat st;
    if (stat(dir, &st) != 0) return hfq_fail(err, o->path, "%s: folder %s does not exist", o->what, dir);
    if (!S_ISDIR(st.st_mode)) return hfq_fail(err, o->path, "%s: %s is not a folder", o->what, dir);
    return 0;
}

static bool same_inode(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Fails when out (existing, st) is a regular file directly inside folder in. */
static int check_folder_files(const hfq_path_role *o, const struct stat *st, const hfq_path_role *in,
                              hfq_error *err) {
    DIR *d = opendir(in->path);
    if (!d) return 0; /* the tool's own open reports an unreadable input */
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        char p[PATH_MAX];
        struct stat fs;
        if (snprintf(p, sizeof p, "%s/%s", in->path, e->d_name) >= (int)sizeof p) continue;
        if (stat(p, &fs) == 0 && S_ISREG(fs.st_mode) && same_inode(st, &fs))
            rc = hfq_fail(err, o->path, "%s would replace %s, a file of %s", o->what, p, in->what);
    }
    closedir(d);
    return rc;
}

/* Fails when out (existing, st) is a later file of a split GGUF whose first
 * file is in (formats/gguf.h: reading the first reads them all). */
static int check_split_files(const hfq_path_role *o, const struct stat *st, const hfq_path_role *in,
                             hfq_error *err) {
    char p[PATH_MAX];
    const int count = gguf_split_path(in->path, 0, p, sizeof p);
    for (int k = 1; k < count; k++) {
        struct stat fs;
        if (gguf_split_path(in->path, k, p, sizeof p) && stat(p, &fs) == 0 && same_inode(st, &fs))
            return hfq_fail(err, o->path, "%s is %s, file %d of the split GGUF %s: refusing to overwrite an input",
                            o->what, p, k + 1, in->what);
    }
    return 0;
}

int hfq_check_outputs(const hfq_path_role *outputs, int n_out, const hfq_path_role *inputs, int n_in,
                      hfq_error *err) {
    for (int i = 0; i < n_out; i++) {
        const hfq_path_role *o = &outputs[i];
        if (!o->path) continue;
        if (!*o->path) return hfq_fail(err, o->what, "empty output path");
        struct stat st;
        const bool exists = stat(o->path, &st) == 0;
        if (exists && S_ISDIR(st.st_mode)) return hfq_fail(err, o->path, "%s is a folder, not a file", o->what);
        /* the rename would replace a device node or FIFO (as root, /dev/null itself) */
        if (exists && !S_ISREG(st.st_mode)) return hfq_fail(err, o->path, "%s is not a regular file", o->what);
        if (check_folder(o, err)) return -1;
        for (int j = 0; j < n_out; j++) {
            struct stat os;
            if (j == i || !outputs[j].path) continue;
            if (strcmp(outputs[j].path, o->path) == 0 || (exists && stat(outputs[j].path, &os) == 0 && same_inode(&st, &os)))
                return hfq_fail(err, o->path, "%s and %s name the same file", o->what, outputs[j].what);
        }
        if (!exists) continue;
        for (int j = 0; j < n_in; j++) {
            const hfq_path_role *in = &inputs[j];
            struct stat is;
            if (!in->path || stat(in->path, &is) != 0) continue;
            if (in->is_dir && S_ISDIR(is.st_mode)) {
                if (check_folder_files(o, &st, in, err)) return -1;
            } else if (same_inode(&st, &is)) {
                return hfq_fail(err, o->path, "%s is %s: refusing to overwrite an input", o->what, in->what);
            } else if (check_split_files(o, &st, in, err)) {
                return -1;
            }
        }
    }
    return 0;
}
