"""Small values shared by the interpreter and the control-flow lowering.

* Statement signals: executing a block returns None, or one of BREAK, CONTINUE, RETURN (the value
  is in the frame) and RAISED (the rest of the block is unreachable: a `raise` runs at run time).
  MAYBE: a break/continue/return may have happened under a tensor condition; the frame's exit
  flags say on which paths (see loop_exits.py).
* `PENDING`: the frame's return value before any path has returned (loop_exits.py).
* `Undefined`: what a variable holds after a tensor `if` that assigns it on one path only, or after
  a tensor `while` whose body creates it; reading it raises a clear error instead of a NameError.
"""


class Signal:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


BREAK, CONTINUE, RETURN, RAISED = Signal("break"), Signal("continue"), Signal("return"), Signal("raised")
MAYBE = Signal("maybe")
PENDING = Signal("pending return value")


class Undefined:
    __slots__ = ("name", "why")

    def __init__(self, name, why):
        self.name, self.why = name, why

    def __repr__(self):
        return f"<undefined '{self.name}': {self.why}>"


MISSING = object()

__all__ = ["Signal", "BREAK", "CONTINUE", "RETURN", "RAISED", "MAYBE", "PENDING", "Undefined", "MISSING"]
