#include <stdlib.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "formats/atomic_file.h"
#include "check.h"

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    return n;
}

int main(void) {
    char dir[] = "/tmp/hfq_atomic_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    hfq_error err = {{0}};

    /* commit: the file appears with the written bytes, nothing else remains */
    hfq_atomic_file af;
    CHECK(hfq_atomic_open(&af, path, &err) == 0);
    CHECK(access(path, F_OK) != 0);
    CHECK(hfq_atomic_write(&af, "hello", 5, &err) == 0);
    CHECK(hfq_atomic_commit(&af, &err) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 5);
    CHECK(count_entries(dir) == 1);

    /* abort: the old file is untouched and the temporary is gone */
    CHECK(hfq_atomic_open(&af, path, &err) == 0);
    CHECK(hfq_atomic_write(&af, "xxxxxxxxxx", 10, &err) == 0);
    hfq_atomic_abort(&af);
    CHECK(stat(path, &st) == 0 && st.st_size == 5);
    CHECK(count_entries(dir) == 1);

    /* a folder that does not exist: a one-line error naming the path */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/missing/out.bin", dir);
    CHECK(hfq_atomic_open(&af, bad, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, bad);
    CHECK(strchr(err.msg, '\n') == NULL);

    /* error helper formatting */
    hfq_error e2;
    CHECK(hfq_fail(&e2, "f.gguf", "bad %s", "magic") == -1);
    CHECK(strcmp(e2.msg, "f.gguf: bad magic") == 0);
    hfq_error_prefix(&e2, "outer");
    CHECK(strcmp(e2.msg, "outer: f.gguf: bad magic") == 0);

    unlink(path);
    rmdir(dir);
    return check_exit();
}
