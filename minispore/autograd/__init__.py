"""PyNative autodiff: the tape (tape.py) and the user-facing transforms (grad.py)."""
from .grad import GradOperation, grad, jvp, value_and_grad, vjp
from .tape import backward

__all__ = ["grad", "value_and_grad", "GradOperation", "vjp", "jvp", "backward"]
