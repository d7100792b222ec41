"""The checkpoint mutation fuzz: thousands of damaged copies of a real checkpoint, each loaded
through a public path, each load classified (outcomes.py).

The loads run in a worker process (load_worker.py) under an address-space limit, so a load that
reads without bound fails with MemoryError instead of taking the machine with it. The worker
answers each mutant within its own SIGALRM limit (a hang); if it stops answering altogether - a
system call the alarm cannot interrupt, or a crash of the interpreter - the harness kills it,
records that mutant as a hang or a raw failure, and starts a fresh worker for the rest.
"""
from __future__ import annotations

import json
import os
import resource
import select
import subprocess
import sys
import time

from . import mutants
from . import outcomes as oc
from .load_worker import LOAD_TIMEOUT_S

WORKER_ADDRESS_SPACE = 6 << 30      # the worker's RLIMIT_AS
ANSWER_TIMEOUT_S = LOAD_TIMEOUT_S + 20
START_TIMEOUT_S = 120
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Worker:
    def __init__(self, base_run, scratch, seed):
        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (WORKER_ADDRESS_SPACE, resource.RLIM_INFINITY))

        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), REPO) if p)
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        self.err_path = os.path.join(scratch, f"worker-{time.monotonic_ns()}.stderr")
        self._err = open(self.err_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.reliability.load_worker", base_run, scratch,
                                      str(seed)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     env=env, cwd=scratch, preexec_fn=limit, text=True, bufsize=1)
        ready = self.answer(START_TIMEOUT_S)
        if not ready or not ready.get("ready"):
            self.stop()
            raise RuntimeError(f"the checkpoint fuzz worker did not start:\n{self.stderr_tail()}")

    def answer(self, timeout: float):
        """The worker's next JSON line, None on timeout, or {"died": returncode} if it exited."""
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return None
        line = self.proc.stdout.readline()
        if not line:
            return {"died": self.proc.wait()}
        return json.loads(line)

    def ask(self, index: int, kind: str):
        try:
            self.proc.stdin.write(f"{index} {kind}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return {"died": self.proc.wait()}
        return self.answer(ANSWER_TIMEOUT_S)

    def stderr_tail(self) -> str:
        self._err.flush()
        with open(self.err_path, "rb") as f:
            return f.read()[-2000:].decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._err.close()


def fuzz_checkpoints(base_run: str, scratch: str, n: int, seed: int = 0, progress=None) -> tuple[oc.Family, list]:
    """Make and load `n` mutants of the checkpoint in `base_run`; (the family's counts, every result)."""
    os.makedirs(scratch, exist_ok=True)
    family = oc.Family("checkpoint mutation fuzz")
    results = []
    worker = _Worker(base_run, scratch, seed)
    try:
        for index, kind in enumerate(mutants.schedule(n)):
            got = worker.ask(index, kind)
            if got is None or "died" in got:
                if got is None:
                    outcome, detail = oc.HANG, f"the worker gave no answer within {ANSWER_TIMEOUT_S:.0f} s"
                else:
                    outcome, detail = oc.RAW, (f"the loading process died ({_status(got['died'])}): "
                                               f"{worker.stderr_tail().strip().splitlines()[-1:]}")
                worker.stop()
                got = {"index": index, "kind": kind, "what": "(see the kept mutant)", "path": "?",
                       "outcome": outcome, "detail": detail}
                worker = _Worker(base_run, scratch, seed)
            results.append(got)
            family.add(got["outcome"], f"[{got['kind']}: {got['what']}] via {got['path']}: {got['detail']}"
                                       + (f" (kept in {got['kept']})" if got.get("kept") else ""))
            if progress:
                progress(index + 1, n)
    finally:
        worker.stop()
    accepted = sum(1 for r in results if r["outcome"] == oc.OK)
    family.notes.append(f"{accepted} mutants loaded with every value equal to the original or a legal change")
    return family, results


def _status(rc) -> str:
    return f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"


def by_kind(results: list) -> dict:
    """{kind: {outcome: count}}: where the failures are (for the report's detail table)."""
    out = {}
    for r in results:
        row = out.setdefault(r["kind"], {k: 0 for k in oc.SEVERITY})
        row[r["outcome"]] += 1
    return out


__all__ = ["fuzz_checkpoints", "by_kind"]
