"""Interrupting `minispore train` the ways the world does: kill -9, SIGTERM, SIGHUP, Ctrl-C twice.

One trial starts a tiny training run as a child process, waits until its first checkpoint is
complete (`latest` exists: training is under way, the signal handlers are installed), waits a
random moment more, and interrupts it:

* **kill -9 during a save**: checkpoints every iteration, and the SIGKILL is sent the moment a
  save's temporary directory (`.tmp-ckpt-*`) is seen, so it lands inside the save protocol.
  Nothing can run after SIGKILL; what is on disk must still be a usable run;
* **SIGTERM**, **SIGHUP** (a scheduler's preemption notice, a closed terminal) and **double
  SIGINT** (Ctrl-C, then Ctrl-C again a few milliseconds later, often inside the save the first one
  started): the run must save, stop, and exit with the documented status (128 + the signal).
  One case is accepted and noted apart: a second Ctrl-C that arrives after the run has saved,
  reported and returned, while the interpreter is exiting, ends the process by SIGINT (status -2
  to Python, 130 to a shell, as documented) - the work is complete by then.

Then, for every kind: `latest` must load through the public path (`load_for_generation`, what
`minispore generate` uses), `minispore train --resume` must continue to the planned end, and its
final checkpoint - every weight and optimizer moment, and the loss history - must equal an
uninterrupted run's bit for bit. Each child runs under a timeout (a hang), its stderr is searched
for a Python traceback (a raw traceback), and the classification is outcomes.py's.
"""
from __future__ import annotations

import os
import random
import shutil
import signal

from . import outcomes as oc
from .train_runs import (TRACEBACK, Child, bit_equal, describe_status, final_state, last_line, run,
                         train_command, wait_for)

MAX_ITERS = 120            # long enough that no interrupted run finishes before its signal
START_TIMEOUT_S = 90       # start-up (imports, data) until the first checkpoint
STOP_TIMEOUT_S = 60        # signal until exit
RESUME_TIMEOUT_S = 240
LOAD_TIMEOUT_S = 30
DELAY_S = (0.0, 0.4)       # the random moment after the first checkpoint
RESUME_INTERVAL = 50       # the resumed run and the reference checkpoint rarely (the end is always saved)

# kind -> (checkpoint interval, the exit status the docs promise)
KINDS = {
    "kill -9 during a save": (1, -signal.SIGKILL),
    "SIGTERM": (3, 128 + signal.SIGTERM),
    "SIGHUP": (3, 128 + signal.SIGHUP),
    "double SIGINT": (3, 128 + signal.SIGINT),
}


def _interrupt(kind: str, child: Child, out_dir: str, rnd: random.Random) -> dict:
    """Send the trial's signal(s); returns facts for the notes (did a kill land inside a save)."""
    facts = {}
    if kind == "kill -9 during a save":
        def saving():
            try:
                return any(n.startswith(".tmp-ckpt-") for n in os.listdir(out_dir))
            except OSError:
                return False
        facts["in_save"] = wait_for(saving, child, timeout=2.0, poll=0.0005)
        child.send(signal.SIGKILL)
    elif kind == "double SIGINT":
        child.send(signal.SIGINT)
        wait_for(lambda: False, child, timeout=rnd.uniform(0.0, 0.05), poll=0.002)
        child.send(signal.SIGINT)
    else:
        child.send(getattr(signal, kind))
    return facts


def _load_latest(out_dir: str) -> tuple[str, str]:
    """(outcome, description) of loading `latest` the way `minispore generate` does."""
    from minispore.common.errors import MinisporeError
    from minispore.llm.cli_commands import load_for_generation
    from .alarm import Timeout, time_limit
    try:
        with time_limit(LOAD_TIMEOUT_S):
            load_for_generation(out_dir)
    except Timeout:
        return oc.HANG, f"loading latest took more than {LOAD_TIMEOUT_S} s"
    except MinisporeError as e:
        return oc.LOST, f"latest does not load: {type(e).__name__}: {str(e)[:300]}"
    except Exception as e:                              # noqa: BLE001 - classifying is the point
        return oc.RAW, f"loading latest raised {type(e).__name__}: {str(e)[:300]}"
    return oc.OK, ""


def run_trial(kind: str, index: int, seed: int, work_dir: str, reference_dir: str) -> dict:
    """One trial of `kind`; returns {"outcome", "example", "facts"} (picklable, for a process pool)."""
    rnd = random.Random(f"{seed}-{kind}-{index}")
    interval, expected_rc = KINDS[kind]
    tag = f"{kind.replace(' ', '_').replace('-', '')}-{index:03d}"
    out_dir = os.path.join(work_dir, tag)
    os.makedirs(work_dir, exist_ok=True)
    shutil.rmtree(out_dir, ignore_errors=True)
    who = f"{kind} trial {index}"
    facts = {}

    child = Child(train_command(out_dir, MAX_ITERS, interval), out_dir + "-run")
    started = wait_for(lambda: os.path.exists(os.path.join(out_dir, "latest")), child, START_TIMEOUT_S)
    if not started:
        rc = child.wait(0 if child.proc.poll() is None else STOP_TIMEOUT_S)
        err = child.stderr()
        if rc is None:
            return _result(oc.HANG, f"{who}: no checkpoint within {START_TIMEOUT_S} s of the start", facts)
        outcome = oc.RAW if TRACEBACK in err else oc.WRONG
        return _result(outcome, f"{who}: the run ended before its first checkpoint ({describe_status(rc)}): "
                                f"{last_line(err)}", facts)
    wait_for(lambda: False, child, timeout=rnd.uniform(*DELAY_S))
    if child.proc.poll() is not None:
        facts["missed"] = True          # finished before the signal: MAX_ITERS is too small for this machine
    facts.update(_interrupt(kind, child, out_dir, rnd))
    rc = child.wait(STOP_TIMEOUT_S)
    err = child.stderr()
    if rc is None:
        return _result(oc.HANG, f"{who}: still running {STOP_TIMEOUT_S} s after the signal", facts)
    outcome, notes = oc.OK, []
    if TRACEBACK in err:
        outcome = oc.RAW
        notes.append(f"traceback on stderr of the interrupted run: {last_line(err)}")
    elif rc == -signal.SIGINT and kind == "double SIGINT" and "written" in child.stdout():
        # the second Ctrl-C came after the run had saved, reported and returned, while the
        # interpreter was exiting (its handlers already reset): a shell reports 130 all the same
        facts["late_second_sigint"] = True
    elif rc != expected_rc and not facts.get("missed"):
        outcome = oc.WRONG
        notes.append(f"{describe_status(rc)}, documented: {describe_status(expected_rc)}: {last_line(err)}")

    loaded, why = _load_latest(out_dir)
    if loaded != oc.OK:
        return _result(oc.worst(outcome, loaded), f"{who}: {'; '.join(notes + [why])}", facts)

    resumed_rc, resume_err = run(train_command(out_dir, MAX_ITERS, RESUME_INTERVAL, resume=True),
                                 out_dir + "-resume", RESUME_TIMEOUT_S)
    if resumed_rc is None:
        return _result(oc.HANG, f"{who}: --resume still running after {RESUME_TIMEOUT_S} s", facts)
    if TRACEBACK in resume_err:
        return _result(oc.RAW, f"{who}: traceback on stderr of --resume: {last_line(resume_err)}", facts)
    if resumed_rc != 0:
        return _result(oc.worst(outcome, oc.LOST), f"{who}: --resume failed ({describe_status(resumed_rc)}): "
                                                   f"{last_line(resume_err)}", facts)
    want_tensors, want_history = final_state(reference_dir, MAX_ITERS)
    got_tensors, got_history = final_state(out_dir, MAX_ITERS)
    differ = bit_equal(want_tensors, got_tensors)
    if differ:
        outcome = oc.worst(outcome, oc.WRONG)
        notes.append(f"resumed final weights differ from the uninterrupted run's in {len(differ)} tensors "
                     f"({', '.join(differ[:4])})")
    elif got_history != want_history:
        outcome = oc.worst(outcome, oc.WRONG)
        notes.append("resumed loss history differs from the uninterrupted run's")
    if outcome == oc.OK:
        shutil.rmtree(out_dir, ignore_errors=True)      # keep only the failures' directories
    return _result(outcome, f"{who}: {'; '.join(notes)} (run kept in {out_dir})" if notes else "", facts)


def run_signal_trials(trials: int, seed: int, work_dir: str, jobs: int = 1, progress=None) -> list[oc.Family]:
    """`trials` trials of every kind (after one uninterrupted reference run); a row per kind.
    With `jobs` > 1 the trials run in that many worker processes (each runs one child at a time)."""
    from .train_runs import reference_run
    os.makedirs(work_dir, exist_ok=True)
    reference_run(work_dir, MAX_ITERS, RESUME_INTERVAL)
    reference_dir = os.path.join(work_dir, f"reference-{MAX_ITERS}")
    tasks = [(kind, i) for i in range(trials) for kind in KINDS]
    results = {kind: [] for kind in KINDS}
    if jobs <= 1:
        for n, (kind, i) in enumerate(tasks):
            results[kind].append(run_trial(kind, i, seed, work_dir, reference_dir))
            if progress:
                progress(n + 1, len(tasks))
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [(kind, pool.submit(run_trial, kind, i, seed, work_dir, reference_dir)) for kind, i in tasks]
            for n, (kind, future) in enumerate(futures):
                results[kind].append(future.result())
                if progress:
                    progress(n + 1, len(tasks))
    return [summarize(kind, results[kind]) for kind in KINDS]


def _result(outcome, example, facts):
    return {"outcome": outcome, "example": example, "facts": facts}


def summarize(kind: str, results: list[dict]) -> oc.Family:
    family = oc.Family(kind)
    for r in results:
        family.add(r["outcome"], r["example"])
    if kind == "kill -9 during a save":
        landed = sum(1 for r in results if r["facts"].get("in_save"))
        family.notes.append(f"{landed} of {len(results)} kills landed inside a save")
    late = sum(1 for r in results if r["facts"].get("late_second_sigint"))
    if late:
        family.notes.append(f"{late} runs were ended by the second Ctrl-C after they had finished and "
                            "reported (killed by SIGINT, which a shell shows as 130)")
    missed = sum(1 for r in results if r["facts"].get("missed"))
    if missed:
        family.notes.append(f"{missed} runs finished before the signal")
    return family


__all__ = ["KINDS", "MAX_ITERS", "run_trial", "run_signal_trials", "summarize"]
