"""How many bytes a job may ask for, and the one check that refuses a request before allocating.

A config file or a CLI flag states sizes (`n_layers`, `vocab_size`, `--batch-size`) whose product
is the memory the job will allocate. Allocating first and failing later gives a raw MemoryError
after minutes of work, or makes the machine swap. So readers compute the bytes a request implies
and call `check_fits` first.

The limit is, in order:

* `MINISPORE_MEMORY_LIMIT` (bytes; suffixes K/M/G/T accepted, e.g. `64G`; `0` or `none` turns the
  check off) - the override for a user who knows better;
* otherwise the smaller of the memory the OS reports available (MemAvailable in /proc/meminfo,
  else physical pages) and the process's address-space limit (RLIMIT_AS), when one is set.
"""
from __future__ import annotations

import os

from .errors import MinisporeError

ENV_VAR = "MINISPORE_MEMORY_LIMIT"
_SUFFIX = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


class MemoryLimitError(MinisporeError, MemoryError):
    """A request would need more memory than the limit; raised before anything is allocated."""

    def __init__(self, what: str, needed: int, limit: int, source: str, hint: str = ""):
        self.what, self.needed, self.limit = what, needed, limit
        msg = (f"{what} would need about {format_bytes(needed)}, more than the {format_bytes(limit)} "
               f"{source}. Nothing was allocated.")
        if hint:
            msg += f" {hint}"
        msg += f" (Set {ENV_VAR}=<bytes> to change the limit.)"
        super().__init__(msg)


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def _parse_limit(text: str) -> int | None:
    t = text.strip().lower()
    if t in ("", "0", "none", "off"):
        return None
    scale = _SUFFIX.get(t[-1], 1)
    digits = t[:-1] if t[-1] in _SUFFIX else t
    if digits.endswith("i"):                 # "64Gi" reads as 64G
        digits = digits[:-1]
    try:
        value = float(digits) * scale
    except ValueError:
        raise MinisporeError(f"{ENV_VAR} must be a byte count such as 17179869184 or 16G, "
                             f"but got {text!r}.") from None
    if not value > 0 or value != value or value == float("inf"):
        raise MinisporeError(f"{ENV_VAR} must be a positive byte count, but got {text!r}.")
    return int(value)


def available_bytes() -> int | None:
    """Memory the OS says a new allocation can get (MemAvailable, else physical memory)."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, AttributeError):
        return None


def address_space_limit() -> int | None:
    """The soft RLIMIT_AS of this process, or None when unlimited / unknown."""
    try:
        import resource
        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    return None if soft in (resource.RLIM_INFINITY, -1) else int(soft)


def memory_limit() -> tuple[int | None, str]:
    """(limit in bytes or None for no check, a phrase saying where the limit came from)."""
    env = os.environ.get(ENV_VAR)
    if env is not None:
        return _parse_limit(env), f"limit set by {ENV_VAR}"
    candidates = []
    avail = available_bytes()
    if avail:
        candidates.append((avail, "memory this machine has available"))
    rlim = address_space_limit()
    if rlim:
        candidates.append((rlim, "address-space limit of this process (ulimit -v)"))
    if not candidates:
        return None, "no known limit"
    return min(candidates)


def check_fits(needed: int, what: str, hint: str = "") -> None:
    """Raise MemoryLimitError when `needed` bytes exceed the limit (see the module docstring)."""
    limit, source = memory_limit()
    if limit is not None and needed > limit:
        raise MemoryLimitError(what, int(needed), limit, source, hint)
