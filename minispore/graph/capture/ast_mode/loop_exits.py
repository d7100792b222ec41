"""`break` / `continue` / `return` under a tensor condition: exits become flag variables.

A graph has no jumps. When an exit happens under a condition known only when the graph runs, the
interpreter cannot stop executing statements; instead it records *whether* each exit happened
in flag variables of the frame, and runs everything the exit would have skipped under a tensor
`if` on those flags (`control_flow.guard`). This is the classic "structured exits" rewrite:

    for i in range(3):                      for i in range(3):           # unrolled at compile time
        x = x + 1                               if not broke:            # (a tensor If per iteration)
        if x.sum() > 10:          ==>               x = x + 1
            break                                   broke = x.sum() > 10
        x = x * 2                                   if not broke:
                                                        x = x * 2

The flags live in `frame.env` under names no Python variable can have, so the If machinery merges
them like any other variable (two different Python bools become a Bool tensor):

* `@return` / `@retval`: the frame returned / its return value (`PENDING` until a path returns).
* `@break<k>` / `@continue<k>`: the k-th enclosing loop of the frame (one pair per loop, so an
  inner `break` never stops the outer loop); `continue` resets at the end of each iteration.

Invariant: a statement only ever starts with every flag a Python False (a guard runs the code
after an exit with the flags set to False, since on that path no exit happened). So a block
yields `MAYBE` only right after a tensor `if`, a guard or a loop; `resolve` then turns flags that
are constants back into ordinary signals (both branches broke: a plain BREAK), and otherwise the
block guards the rest of itself. A tensor `while` carries `@break` and `@return`/`@retval` in
its loop state and adds `not broke and not returned` to its condition.

Values are exactly PyNative's; the price is that a variable a skipped path never assigns must keep
its type, shape and dtype across the paths (as for any tensor `if`), and that a return value must
have the same type, shape and dtype on every path that returns.
"""
from __future__ import annotations

from ....common.tensor import Tensor
from .signals import BREAK, CONTINUE, MAYBE, PENDING, RETURN

RET = "@return"
RETVAL = "@retval"
BROKE = "@broke"          # a finished loop's break flag, while its `else:` is guarded


class LoopFlags:
    """The flag names of one loop of a frame."""

    __slots__ = ("brk", "cont")

    def __init__(self, depth):
        self.brk, self.cont = f"@break{depth}", f"@continue{depth}"


def is_flag(name) -> bool:
    return name.startswith("@")


def display_name(label) -> str:
    """How an error message names a merged variable."""
    if label == RETVAL:
        return "the return value"
    if label == RET or label.startswith(("@break", "@continue")):
        return f"the exit flag '{label}'"
    return f"variable '{label}'"


def enter_loop(frame) -> LoopFlags:
    loop = LoopFlags(len(frame.loops) + 1)
    frame.loops.append(loop)
    frame.env[loop.brk] = False
    frame.env[loop.cont] = False
    return loop


def leave_loop(frame, loop):
    """Drop the loop's flags; returns the final break flag (a bool or a Bool tensor)."""
    frame.loops.remove(loop)
    frame.env.pop(loop.cont, None)
    return frame.env.pop(loop.brk, False)


def flag_names(frame) -> list:
    """The flags an exit in the current block can have set: the return flag and the innermost loop's."""
    if frame.loops:
        loop = frame.loops[-1]
        return [RET, loop.brk, loop.cont]
    return [RET]


def pending(frame, names) -> list:
    """The flags among `names` that are tensors (set on some paths only)."""
    env = frame.env
    return [n for n in names if isinstance(env.get(n), Tensor)]


def to_flags(frame, sig):
    """At the end of a region (a branch, a guarded block, a while body), turn a static exit into
    flag values: the region's outputs then say that this path exited."""
    env = frame.env
    if sig is BREAK:
        env[frame.loops[-1].brk] = True
    elif sig is CONTINUE:
        env[frame.loops[-1].cont] = True
    elif sig is RETURN:
        env[RET] = True
        env[RETVAL] = frame.return_value
        frame.return_value = None
    else:
        return sig
    return MAYBE


def resolve(frame):
    """After a statement yielded MAYBE: a static signal where the flags are constants, MAYBE if some
    flag is a tensor, None if no exit happened on any path."""
    env = frame.env
    if env.get(RET, False) is True:                    # every path returned
        env[RET] = False
        frame.return_value = env.pop(RETVAL, None)
        return RETURN
    if frame.loops:
        loop = frame.loops[-1]
        if env.get(loop.brk) is True:
            env[loop.brk] = False
            return BREAK
        if env.get(loop.cont) is True:
            env[loop.cont] = False
            return CONTINUE
    return MAYBE if pending(frame, flag_names(frame)) else None


def end_iteration(frame, loop, sig):
    """The signal of one loop iteration as the loop sees it: `continue` ends here."""
    if sig is CONTINUE:
        return None
    if sig is MAYBE:
        frame.env[loop.cont] = False
        return resolve(frame)
    return sig


def ensure_retval(frame):
    frame.env.setdefault(RETVAL, PENDING)
    frame.env.setdefault(RET, False)


__all__ = ["RET", "RETVAL", "BROKE", "LoopFlags", "is_flag", "display_name", "enter_loop", "leave_loop", "flag_names",
           "pending", "to_flags", "resolve", "end_iteration", "ensure_retval"]
