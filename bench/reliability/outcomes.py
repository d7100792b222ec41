"""How a reliability trial can end, and the table that counts the endings.

Every trial (one interrupted training run, one mutated checkpoint, one fuzzed op call) ends in
exactly one category. When several things went wrong in one trial, the worst one is recorded, in
this order (worst first):

* **hang**: something did not finish within the trial's timeout and had to be killed;
* **raw traceback**: an exception that is not a minispore error escaped (a Python traceback on
  stderr, a non-minispore exception in-process, or a process killed by a signal it did not ask
  for) - the user sees the library's insides instead of a sentence;
* **wrong result**: everything "worked", but the result differs from the truth: resumed weights
  that are not bit-identical to an uninterrupted run's, a corrupted checkpoint loaded without
  complaint into values that differ from the original, an exit status other than the documented
  one;
* **lost run**: work that had been saved could no longer be used (`latest` not loadable, or
  `--resume` refused to continue);
* **clean error**: refused with minispore's own one-line error - the right answer for a damaged
  file or a bad call;
* **ok**: behaved as documented (for a mutated checkpoint: loaded, and every value equals the
  original's, i.e. the mutation did not change anything that matters).

The target of the report is zero in the hang, raw traceback, wrong result and lost run columns.
"""
from __future__ import annotations

import dataclasses
import datetime
import platform

HANG, RAW, WRONG, LOST, CLEAN, OK = "hang", "raw", "wrong", "lost", "clean", "ok"
SEVERITY = (HANG, RAW, WRONG, LOST, CLEAN, OK)          # worst first
FAILURES = (HANG, RAW, WRONG, LOST)                     # what the target says must be zero
COLUMN = {OK: "ok", CLEAN: "clean errors", RAW: "raw tracebacks", HANG: "hangs", WRONG: "wrong results",
          LOST: "lost runs"}
MAX_EXAMPLES = 8


def worst(*outcomes: str) -> str:
    """The most severe of `outcomes` (see the module docstring for the order)."""
    return min(outcomes, key=SEVERITY.index)


@dataclasses.dataclass
class Family:
    """The counts of one trial family (a row of the table) and a few examples of each failure."""

    name: str
    counts: dict = dataclasses.field(default_factory=lambda: {k: 0 for k in SEVERITY})
    examples: dict = dataclasses.field(default_factory=dict)     # outcome -> [description]
    notes: list = dataclasses.field(default_factory=list)        # one-line remarks for the table

    @property
    def trials(self) -> int:
        return sum(self.counts.values())

    def add(self, outcome: str, example: str | None = None, count: int = 1):
        if outcome not in self.counts:
            raise ValueError(f"unknown outcome {outcome!r}")
        self.counts[outcome] += count
        if example and outcome != OK:
            bucket = self.examples.setdefault(outcome, [])
            if len(bucket) < MAX_EXAMPLES and example not in bucket:
                bucket.append(example)

    def failures(self) -> int:
        return sum(self.counts[k] for k in FAILURES)

    def to_dict(self) -> dict:
        return {"name": self.name, "trials": self.trials, "counts": dict(self.counts),
                "examples": {k: list(v) for k, v in self.examples.items()}, "notes": list(self.notes)}


def table(families: list[Family]) -> str:
    """The Markdown table of the report: one row per family and a total row."""
    cols = [OK, CLEAN, RAW, HANG, WRONG, LOST]
    head = "| trial family | trials | " + " | ".join(COLUMN[c] for c in cols) + " | notes |"
    rule = "|---|" + "---:|" * (len(cols) + 1) + "---|"
    rows = [head, rule]
    for f in families:
        rows.append(f"| {f.name} | {f.trials:,} | " + " | ".join(f"{f.counts[c]:,}" for c in cols)
                    + f" | {'; '.join(f.notes)} |")
    total = {c: sum(f.counts[c] for f in families) for c in cols}
    rows.append(f"| **total** | **{sum(f.trials for f in families):,}** | "
                + " | ".join(f"**{total[c]:,}**" for c in cols) + " | |")
    return "\n".join(rows)


def failure_listing(families: list[Family]) -> str:
    """Every failure category that occurred, with its examples, grouped by family (for routing)."""
    lines = []
    for f in families:
        # the failure columns, then any other group of examples a family keeps (e.g. the op fuzz's
        # clean errors that carry NumPy's text); clean refusals themselves are the right answer
        for key in [*FAILURES, *(k for k in f.examples if k not in SEVERITY)]:
            if not f.examples.get(key):
                continue
            count = f" ({f.counts[key]:,})" if key in f.counts else ""
            lines.append(f"- **{f.name}: {COLUMN.get(key, key)}**{count}")
            lines += [f"    - {e}" for e in f.examples[key]]
    return "\n".join(lines) if lines else "(none)"


def header() -> str:
    """Date and machine, printed above the table (results depend on both)."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{platform.machine()} ({platform.system()})"
    return f"Reliability report, {now}, Python {platform.python_version()} on {machine}"
