"""Interrupted runs leave nothing behind (formats/atomic_file.h, docs/robustness.md).

Each long-running tool (hfconv on a 50M-parameter synthetic checkpoint, quantize of
its GGUF to Q4_K_M, the same with calibration and --save-stats, and with --rotate
(whose rotated model is a temporary too), ppl-eval
--save-logits) is started and interrupted with SIGINT, SIGTERM or SIGHUP at several
points: a fixed time after the start, or once its temporary (OUT.tmp.XXXXXX) has
appeared and a delay after that (polled, so a slow machine moves the points
instead of making the test flaky). Each run must die of the signal (or exit
non-zero) and leave no *.tmp.* file and no output written at the end (the
statistics of --save-stats, complete before quantizing starts, may stay, and
must verify; a signal after the last commit, while the process exits, may find
all its GGUF outputs in place, each verifying, and exit 0 if it lands as the
process ends); a run that finished before the
signal must have succeeded. Each tool must have been caught writing at least once.
The inputs must be byte-identical at the end.

Then SIGKILL, which no process can handle: hfconv's and quantize's temporaries
stay, and the next run of the same command removes them (the dead writer's lock
is gone) and succeeds.

usage: signal_cleanup.py [-v]   (env: HFQ_BUILD, HFQ_SOURCE, HFQ_FIXTURES)
"""
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time

BUILD = os.environ["HFQ_BUILD"]
SOURCE = os.environ.get("HFQ_SOURCE", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.environ.get("HFQ_FIXTURES", os.path.join(SOURCE, "..", "shared", "fixtures"))
TOOLS = os.path.join(BUILD, "src", "tools")
HFCONV, QUANTIZE, PPL_EVAL, MKMODEL, GGUF_INFO = (
    os.path.join(TOOLS, t) for t in ("hfconv", "quantize", "ppl-eval", "mkmodel", "gguf-info"))
TRAIN = os.path.join(FIXTURES, "text", "tinystories-train.txt")
VALID = os.path.join(FIXTURES, "text", "tinystories-valid.txt")
VERBOSE = "-v" in sys.argv
START_TIMEOUT = 120   # seconds for a temporary to appear on a very busy machine

failures = 0


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL " + msg)
    return cond


def must(argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{argv}: exit {r.returncode}: {r.stderr.strip()}")


def temps(folder):
    return sorted(f for f in os.listdir(folder) if ".tmp." in f)


def digests(paths):
    """sha256 of every file under paths (files or folders)."""
    out = {}
    for p in paths:
        files = [p] if os.path.isfile(p) else [os.path.join(p, f) for f in sorted(os.listdir(p))]
        for f in files:
            h = hashlib.sha256()
            with open(f, "rb") as fp:
                for block in iter(lambda: fp.read(1 << 20), b""):
                    h.update(block)
            out[f] = h.hexdigest()
    return out


def default_signals():
    """The tested signals at their default actions in the child: a suite run
    under nohup (or a shell ignoring SIGINT) hands them down ignored, and the
    tools, like any program, keep an inherited ignore."""
    for s in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_DFL)


def start(argv, out_dir, wait_temp, delay):
    """Starts argv; returns (process, saw_temp) once it is time to signal it:
    `delay` seconds after the start, or after its first temporary in out_dir
    appeared (wait_temp)."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=default_signals)
    saw = False
    if wait_temp:
        t0 = time.monotonic()
        while p.poll() is None and time.monotonic() - t0 < START_TIMEOUT:
            if temps(out_dir):
                saw = True
                break
            time.sleep(0.005)
    time.sleep(delay)
    return p, saw or bool(temps(out_dir))


class Tool:
    """outputs: written only at the end, so an interrupted run must not leave
    them; finished: written (complete) earlier in the run, so an interrupted
    run may leave them, verified."""

    def __init__(self, name, argv, outputs, finished=()):
        self.name, self.argv, self.outputs, self.finished = name, argv, outputs, list(finished)
        self.caught = 0   # runs signalled while a temporary existed


def verifies(path):
    v = subprocess.run([GGUF_INFO, path, "--verify", "--no-tensors"], capture_output=True, text=True)
    return v.returncode == 0


def interrupt(tool, sig, wait_temp, delay):
    out_dir = os.path.dirname(tool.outputs[0])
    for o in tool.outputs + tool.finished:
        if os.path.exists(o):
            os.remove(o)
    p, saw = start(tool.argv, out_dir, wait_temp, delay)
    finished_first = p.poll() is not None
    if not finished_first:
        p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        check(False, f"{tool.name} {sig.name}: did not end within 60 s of the signal")
        return
    rc = p.returncode
    when = f"{delay:.1f} s after its temporary" if wait_temp else f"{delay:.1f} s after the start"
    label = f"{tool.name} {sig.name} {when}"
    err = err.decode(errors="replace").strip().splitlines()
    if finished_first:
        check(rc == 0, f"{label}: finished before the signal with exit {rc}: {err[-1:] }")
        check(all(os.path.exists(o) for o in tool.outputs + tool.finished), f"{label}: finished, outputs missing")
    else:
        left = [o for o in tool.outputs if os.path.exists(o)]
        # a signal in the instant between the last commit and the exit (the
        # process tearing down: under ASan its leak check) finds every output
        # renamed into place, complete: that run got past its end. So does one
        # sent after the poll above to a process that exited just then (the
        # kernel drops a signal to a zombie): exit 0, every output complete.
        late = len(left) == len(tool.outputs) and all(verifies(o) for o in left)
        tool.caught += saw and rc != 0
        check(rc == -sig or rc > 0 or (rc == 0 and late),
              f"{label}: exit {rc}, want death by {sig.name}, a failure exit, or success with every output complete")
        check(not left or late, f"{label}: outputs left behind: {left}")
        bad = [o for o in tool.finished if os.path.exists(o) and not verifies(o)]
        check(not bad, f"{label}: an output left behind is incomplete: {bad}")
    left = temps(out_dir)
    check(not left, f"{label}: temporaries left behind: {left}")
    if VERBOSE:
        state = "finished first" if finished_first else f"exit {rc}, temporary {'seen' if saw else 'not yet made'}"
        print(f"     {label}: {state}")


def sigkill_then_rerun(tool):
    """SIGKILL leaves the temporary; the same command run again removes it.
    Killed as soon as the temporary appears: hfconv writes this model in less
    than 0.2 s once outputs no longer wait for the disk (docs/robustness.md)."""
    out_dir = os.path.dirname(tool.outputs[0])
    p, saw = start(tool.argv, out_dir, True, 0.0)
    if p.poll() is not None:
        p.communicate()
        check(False, f"{tool.name} SIGKILL: finished before the signal (too fast to test)")
        return
    p.kill()
    p.communicate()
    check(p.returncode == -signal.SIGKILL, f"{tool.name} SIGKILL: exit {p.returncode}")
    stale = temps(out_dir)
    check(saw and len(stale) >= 1, f"{tool.name} SIGKILL: the temporary should stay, found {stale}")
    r = subprocess.run(tool.argv, capture_output=True, text=True)
    check(r.returncode == 0, f"{tool.name} after SIGKILL: exit {r.returncode}: {r.stderr.strip()[-200:]}")
    check(not temps(out_dir), f"{tool.name} after SIGKILL: stale temporaries not removed: {temps(out_dir)}")
    for o in tool.outputs:
        check(verifies(o), f"{tool.name} after SIGKILL: {o} does not verify")


def main():
    for f in (TRAIN, VALID):
        if not os.path.exists(f):
            print(f"SKIP: fixture {f} missing")
            return 77
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        big = os.path.join(tmp, "big")                  # 50M parameters, bf16: about 100 MB
        must([MKMODEL, big, "--hidden", "1024", "--layers", "4", "--ffn", "2816", "--dtype", "bf16"])
        big_gguf = os.path.join(tmp, "big.gguf")
        must([HFCONV, big, "-o", big_gguf, "-q"])
        small = os.path.join(tmp, "small")              # fast forward passes, 100 MB of logits
        must([MKMODEL, small])
        small_gguf = os.path.join(tmp, "small.gguf")
        must([HFCONV, small, "-o", small_gguf, "-q"])
        inputs = [big, big_gguf, small_gguf, TRAIN, VALID]
        before = digests(inputs)

        out = os.path.join(tmp, "out")
        os.makedirs(out)
        hfconv = Tool("hfconv", [HFCONV, big, "-o", os.path.join(out, "x.gguf"), "-q"], [os.path.join(out, "x.gguf")])
        quant = Tool("quantize", [QUANTIZE, big_gguf, os.path.join(out, "q.gguf"), "Q4_K_M"],
                     [os.path.join(out, "q.gguf")])
        calib = Tool("quantize --calibration-file",
                     [QUANTIZE, big_gguf, os.path.join(out, "c.gguf"), "Q4_K_M", "--calibration-file", TRAIN,
                      "--calib-ctx", "128", "--calib-chunks", "2", "--save-stats", os.path.join(out, "stats.gguf")],
                     [os.path.join(out, "c.gguf")], finished=[os.path.join(out, "stats.gguf")])
        # the rotated model is a kept temporary beside q.gguf until the end (src/quantize/rotate.h)
        rot = Tool("quantize --rotate", [QUANTIZE, big_gguf, os.path.join(out, "r.gguf"), "Q4_K_M", "--rotate"],
                   [os.path.join(out, "r.gguf")])
        ppl = Tool("ppl-eval --save-logits",
                   [PPL_EVAL, small_gguf, "--text", VALID, "--ctx", "128", "--quiet",
                    "--save-logits", os.path.join(out, "logits.bin")], [os.path.join(out, "logits.bin")])

        S = signal.Signals
        plan = [
            (hfconv, S.SIGINT, False, 0.2), (hfconv, S.SIGINT, True, 0.0), (hfconv, S.SIGTERM, True, 0.2),
            (hfconv, S.SIGHUP, True, 0.5),
            (quant, S.SIGTERM, False, 0.2), (quant, S.SIGINT, True, 0.0), (quant, S.SIGTERM, True, 0.5),
            (quant, S.SIGHUP, True, 1.0),
            (calib, S.SIGINT, False, 1.0), (calib, S.SIGTERM, True, 0.0), (calib, S.SIGINT, True, 0.5),
            (rot, S.SIGINT, True, 0.0), (rot, S.SIGTERM, True, 1.0), (rot, S.SIGHUP, False, 3.0),
            (ppl, S.SIGINT, True, 0.2), (ppl, S.SIGTERM, True, 1.0), (ppl, S.SIGHUP, False, 0.5),
        ]
        for tool, sig, wait_temp, delay in plan:
            interrupt(tool, sig, wait_temp, delay)
        for tool in (hfconv, quant, calib, rot, ppl):
            check(tool.caught > 0, f"{tool.name}: never signalled while writing (each run finished first)")

        sigkill_then_rerun(hfconv)
        sigkill_then_rerun(quant)
        sigkill_then_rerun(rot)

        after = digests(inputs)
        changed = [f for f in before if before[f] != after.get(f)]
        check(not changed, f"inputs changed: {changed}")
    print(f"signal_cleanup: {len(plan)} interrupted runs, 3 SIGKILL reruns, {failures} failure(s), "
          f"{time.monotonic() - t_start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
