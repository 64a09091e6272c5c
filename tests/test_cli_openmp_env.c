/* hfq_cli_openmp_env (src/cli/cli.h): with neither OMP_WAIT_POLICY nor
 * GOMP_SPINCOUNT set, the program runs again with GOMP_SPINCOUNT =
 * HFQ_OMP_SPINCOUNT and its own arguments; with either set, it goes on
 * untouched. The child runs are this test itself (argument "child"), which
 * print what they see. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "src/cli/cli.h"

/* Runs this test as "child TAG" with the environment changed by set (NAME=VALUE
 * or NULL) after unsetting both variables; returns what the child printed. */
static void run_child(char *self, const char *set, const char *tag, char *out, size_t cap) {
    int fd[2];
    CHECK(pipe(fd) == 0);
    const pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        unsetenv("OMP_WAIT_POLICY");
        unsetenv("GOMP_SPINCOUNT");
        if (set) putenv((char *)set);
        char *argv[] = {self, "child", (char *)tag, NULL};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t got;
    while (n + 1 < cap && (got = read(fd[0], out + n, cap - 1 - n)) > 0) n += (size_t)got;
    out[n] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %s exited with %d", tag, status);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "child")) {
        /* what a tool's main does first, then what it sees */
        printf("before %s\n", getenv("GOMP_SPINCOUNT") ? "set" : "unset");
        fflush(stdout);
        hfq_cli_openmp_env(argv);
        const char *s = getenv("GOMP_SPINCOUNT"), *w = getenv("OMP_WAIT_POLICY");
        printf("%s spin=%s wait=%s\n", argv[2], s ? s : "-", w ? w : "-");
        return 0;
    }
    if (access("/proc/self/exe", X_OK) != 0) CHECK_SKIP("no /proc/self/exe");
    char out[512];
    run_child(argv[0], NULL, "plain", out, sizeof out);
    /* ran twice: first without, then (re-run) with the spin count; the same arguments */
    CHECK_MSG(strstr(out, "before unset\nbefore set\nplain spin=" HFQ_OMP_SPINCOUNT " wait=-\n") == out,
              "unset: got '%s'", out);
    run_child(argv[0], "GOMP_SPINCOUNT=77", "spin", out, sizeof out);
    CHECK_MSG(!strcmp(out, "before set\nspin spin=77 wait=-\n"), "GOMP_SPINCOUNT set: got '%s'", out);
    run_child(argv[0], "OMP_WAIT_POLICY=passive", "wait", out, sizeof out);
    CHECK_MSG(!strcmp(out, "before unset\nwait spin=- wait=passive\n"), "OMP_WAIT_POLICY set: got '%s'", out);
    return check_exit();
}
