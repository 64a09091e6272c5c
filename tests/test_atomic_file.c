#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "formats/atomic_file.h"
#include "check.h"

/* Entries of dir whose name holds `part` (all entries for ""). */
static int count_entries(const char *dir, const char *part) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strstr(de->d_name, part)) n++;
    closedir(d);
    return n;
}

static void touch(const char *dir, const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (f) fclose(f);
}

static bool exists_in(const char *dir, const char *name) {
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return lstat(p, &st) == 0;
}

/* The child's status after it ended; -1 if waiting failed. */
static int wait_child(pid_t pid) {
    int status;
    return waitpid(pid, &status, 0) == pid ? status : -1;
}

static void basics(const char *dir) {
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
    CHECK(count_entries(dir, "") == 1);

    /* abort: the old file is untouched and the temporary is gone */
    CHECK(hfq_atomic_open(&af, path, &err) == 0);
    CHECK(hfq_atomic_write(&af, "xxxxxxxxxx", 10, &err) == 0);
    hfq_atomic_abort(&af);
    CHECK(stat(path, &st) == 0 && st.st_size == 5);
    CHECK(count_entries(dir, "") == 1);

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
}

static void temp_names(void) {
    CHECK(hfq_atomic_is_temp_name("m.gguf.tmp.aZ09xQ", "m.gguf"));
    CHECK(!hfq_atomic_is_temp_name("m.gguf.tmp.aZ09x", "m.gguf"));    /* 5 characters */
    CHECK(!hfq_atomic_is_temp_name("m.gguf.tmp.aZ09xQQ", "m.gguf"));  /* 7 */
    CHECK(!hfq_atomic_is_temp_name("m.gguf.tmp.aZ-9xQ", "m.gguf"));   /* not mkstemp's alphabet */
    CHECK(!hfq_atomic_is_temp_name("m.gguf.tmp.aZ.9xQ", "m.gguf"));
    CHECK(!hfq_atomic_is_temp_name("x.gguf.tmp.aZ09xQ", "m.gguf"));   /* another output's */
    CHECK(!hfq_atomic_is_temp_name("mm.gguf.tmp.aZ09xQ", "m.gguf"));
    CHECK(!hfq_atomic_is_temp_name("m.gguf.TMP.aZ09xQ", "m.gguf"));
    CHECK(!hfq_atomic_is_temp_name("m.gguf", "m.gguf"));
    CHECK(!hfq_atomic_is_temp_name(".tmp.aZ09xQ", ""));
}

/* A child that opens `path`, writes to it and reports on `ready`, then waits
 * for a byte on `go` (or for a signal) and aborts; with go < 0 it is killed
 * by SIGKILL instead, as a crash would. */
static pid_t writer_child(const char *path, int ready, int go) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    hfq_atomic_file af;
    hfq_error err;
    if (hfq_atomic_open(&af, path, &err) != 0 || hfq_atomic_write(&af, "partial", 7, &err) != 0) _exit(3);
    if (go < 0) kill(getpid(), SIGKILL);
    char c = 1;
    if (write(ready, &c, 1) != 1) _exit(4);
    if (read(go, &c, 1) != 1) _exit(5);
    hfq_atomic_abort(&af);
    _exit(0);
}

/* Stale temporaries: a dead writer's is removed by the next writer of the
 * same output; a live writer's, other outputs', look-alikes and symbolic
 * links stay. */
static void stale(const char *dir) {
    char path[256];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    int ready[2], go[2];
    CHECK(pipe(ready) == 0 && pipe(go) == 0);
    pid_t live = writer_child(path, ready[1], go[0]);
    /* the child's ends closed here: a child that fails reads as EOF, not a hang */
    close(ready[1]);
    close(go[0]);
    char c;
    CHECK_MSG(read(ready[0], &c, 1) == 1, "the live writer failed: status %#x", wait_child(live));
    int status = wait_child(writer_child(path, -1, -1));
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* a crash leaves its temporary; its open left the live writer's alone */
    CHECK(count_entries(dir, "out.bin.tmp.") == 2);

    const char *keep[] = {"out.bin.tmp.abc12", "out.bin.tmp.abc1234", "out.bin.tmp.ab-123", "other.bin.tmp.ABCDEF",
                          "out.bin.tmpXabcdef"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) touch(dir, keep[i]);
    touch(dir, "target");
    char target[300], link[300];
    snprintf(target, sizeof target, "%s/target", dir);
    snprintf(link, sizeof link, "%s/out.bin.tmp.LINK01", dir);
    CHECK(symlink(target, link) == 0);

    hfq_atomic_file af;
    hfq_error err = {{0}};
    CHECK(hfq_atomic_open(&af, path, &err) == 0);
    /* the live one, ours, and the link */
    CHECK(count_entries(dir, "out.bin.tmp.") == 3 + 3);
    CHECK(hfq_atomic_write(&af, "done", 4, &err) == 0);
    CHECK(hfq_atomic_commit(&af, &err) == 0);
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) CHECK_MSG(exists_in(dir, keep[i]), "%s", keep[i]);
    CHECK(exists_in(dir, "out.bin.tmp.LINK01") && exists_in(dir, "target"));

    c = 1;
    CHECK(write(go[1], &c, 1) == 1);
    status = wait_child(live);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the live writer's temporary stayed until it aborted */
    CHECK(count_entries(dir, "out.bin.tmp.") == 3 + 1);
    close(ready[0]);
    close(go[1]);
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, keep[i]);
        unlink(p);
    }
    unlink(link);
    unlink(target);
    unlink(path);
    CHECK(count_entries(dir, "") == 0);
}

/* A signal removes the temporaries in progress and ends the process with
 * that signal; committed files stay. Every signal the handler is installed
 * for (SIGQUIT and SIGXFSZ dump core by default: the child allows no core). */
static void signals(const char *dir) {
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ};
    for (size_t s = 0; s < sizeof sigs / sizeof sigs[0]; s++) {
        char path[256], done[256];
        snprintf(path, sizeof path, "%s/sig.bin", dir);
        snprintf(done, sizeof done, "%s/done.bin", dir);
        int ready[2], go[2];
        CHECK(pipe(ready) == 0 && pipe(go) == 0);
        pid_t pid = fork();
        if (pid == 0) {
            hfq_atomic_file a, b, c;
            hfq_error err;
            setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0});
            if (hfq_atomic_open(&a, done, &err) || hfq_atomic_write(&a, "ok", 2, &err) ||
                hfq_atomic_commit(&a, &err) || hfq_atomic_open(&b, path, &err) ||
                hfq_atomic_open(&c, path, &err))
                _exit(3);
            char x = 1;
            if (write(ready[1], &x, 1) != 1) _exit(4);
            if (read(go[0], &x, 1) != 1) _exit(5);
            _exit(6);
        }
        close(ready[1]);   /* as in stale(): a failed child reads as EOF */
        close(go[0]);
        char x;
        if (read(ready[0], &x, 1) != 1) {
            CHECK_MSG(false, "signal %d: the child failed before it was ready: status %#x", sigs[s], wait_child(pid));
            close(ready[0]);
            close(go[1]);
            continue;
        }
        CHECK(count_entries(dir, ".tmp.") == 2);
        kill(pid, sigs[s]);
        int status = wait_child(pid);
        CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == sigs[s], "signal %d: status %#x", sigs[s], status);
        CHECK_MSG(count_entries(dir, ".tmp.") == 0, "signal %d left a temporary", sigs[s]);
        CHECK(exists_in(dir, "done.bin"));
        unlink(done);
        close(ready[0]);
        close(go[1]);
    }

    /* a forked child's signal leaves the parent's temporaries alone */
    char path[256];
    snprintf(path, sizeof path, "%s/parent.bin", dir);
    hfq_atomic_file mine;
    hfq_error err;
    CHECK(hfq_atomic_open(&mine, path, &err) == 0);
    pid_t child = fork();
    if (child == 0) {
        for (;;) pause();
    }
    kill(child, SIGTERM);
    int child_status = wait_child(child);
    CHECK(WIFSIGNALED(child_status) && WTERMSIG(child_status) == SIGTERM);
    CHECK_MSG(count_entries(dir, "parent.bin.tmp.") == 1, "a child's signal removed the parent's temporary");
    hfq_atomic_abort(&mine);
    CHECK(count_entries(dir, "") == 0);

    /* a signal ignored before the first open stays ignored (nohup): a fresh
     * process, since this one has installed the handler already */
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGHUP, SIG_IGN);
        execl("/proc/self/exe", "test_atomic_file", "--nohup-child", dir, (char *)NULL);
        _exit(7);
    }
    int status = wait_child(pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "nohup child: status %#x", status);
    CHECK(exists_in(dir, "nohup.bin") && count_entries(dir, "") == 1);
    char p[256];
    snprintf(p, sizeof p, "%s/nohup.bin", dir);
    unlink(p);
}

/* The nohup child: SIGHUP arrives while a file is in progress and is ignored. */
static int nohup_child(const char *dir) {
    char path[256];
    snprintf(path, sizeof path, "%s/nohup.bin", dir);
    hfq_atomic_file a;
    hfq_error err;
    if (hfq_atomic_open(&a, path, &err)) return 3;
    raise(SIGHUP);
    return hfq_atomic_write(&a, "ok", 2, &err) || hfq_atomic_commit(&a, &err) ? 4 : 0;
}

/* Threads opening, writing and committing while the process is signalled:
 * the registry stays consistent and nothing is left. */
typedef struct thread_arg {
    const char *dir;
    int id;
    atomic_int *started;
} thread_arg;

static void *churn(void *p) {
    const thread_arg *a = p;
    char path[256];
    snprintf(path, sizeof path, "%s/t%d.bin", a->dir, a->id);
    for (unsigned i = 0;; i++) {
        hfq_atomic_file af;
        hfq_error err;
        if (hfq_atomic_open(&af, path, &err) || hfq_atomic_write(&af, path, strlen(path), &err)) _exit(3);
        atomic_fetch_add(a->started, 1);
        if (i % 3 == 0) hfq_atomic_abort(&af);
        else if (hfq_atomic_commit(&af, &err)) _exit(4);
    }
    return NULL;
}

static void threads(const char *dir) {
    for (int round = 0; round < 4; round++) {
        pid_t pid = fork();
        if (pid == 0) {
            enum { N = 4 };
            pthread_t t[N];
            atomic_int started = 0;
            thread_arg args[N];
            for (int i = 0; i < N; i++) {
                args[i] = (thread_arg){dir, i, &started};
                if (pthread_create(&t[i], NULL, churn, &args[i])) _exit(5);
            }
            for (;;) pause();
        }
        struct timespec ts = {0, (10 + 20 * round) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, round % 2 ? SIGINT : SIGTERM);
        int status = wait_child(pid);
        CHECK_MSG(WIFSIGNALED(status), "round %d: status %#x", round, status);
        CHECK_MSG(count_entries(dir, ".tmp.") == 0, "round %d left %d temporaries", round,
                  count_entries(dir, ".tmp."));
        for (int i = 0; i < 4; i++) {
            char p[256];
            snprintf(p, sizeof p, "%s/t%d.bin", dir, i);
            unlink(p);
        }
    }
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--nohup-child") == 0) return nohup_child(argv[2]);
    /* The handler is installed only for signals not ignored (nohup, below):
     * start from the default dispositions, whatever this test inherited (a
     * shell's background job ignores SIGINT and SIGQUIT, and the signalled
     * children then never ended: the suite's hangs). */
    const int sigs[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGXFSZ};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
    char dir[] = "/tmp/hfq_atomic_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    /* each phase named on stderr: a hang (the suite's timeout) shows where */
    fprintf(stderr, "basics\n");
    basics(dir);
    temp_names();
    fprintf(stderr, "stale\n");
    stale(dir);
    fprintf(stderr, "signals\n");
    signals(dir);
    fprintf(stderr, "threads\n");
    threads(dir);
    CHECK(count_entries(dir, "") == 0);
    rmdir(dir);
    return check_exit();
}
