"""Running llama.cpp's reference tools (scripts/build_reference.sh) from the
tests. Their logger is asynchronous and may drop its last lines at exit
(llama.cpp issue 22142): a run that exits 0 without printing `marker` is run
again, up to three times."""
import subprocess


def run_llama(argv, marker):
    """The last run of argv (a CompletedProcess, text mode); stdout + stderr
    hold marker unless the tool failed three times."""
    for _ in range(3):
        p = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
        if p.returncode != 0 or marker in p.stdout + p.stderr:
            break
    return p
