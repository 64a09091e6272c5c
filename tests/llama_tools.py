"""Running llama.cpp's reference tools (scripts/build_reference.sh) from the
tests. llama.cpp's logger is asynchronous and, unpatched, drops the lines
still queued at exit on a busy machine (its issue 22142); the reference
build carries scripts/llama-log-flush.patch, which prints them first."""
import subprocess


def run_llama(argv, marker):
    """The run of argv (a CompletedProcess, text mode). A run that exits 0
    without printing marker is an error (the tool was built unpatched)."""
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
    if p.returncode == 0 and marker not in p.stdout + p.stderr:
        raise AssertionError(f"{argv[0]} exited 0 without printing {marker!r}: was it built by "
                             f"scripts/build_reference.sh (llama-log-flush.patch)? Its output ends: "
                             f"{(p.stdout + p.stderr)[-300:]}")
    return p
