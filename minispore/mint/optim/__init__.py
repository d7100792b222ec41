"""`mint.optim`: optimizers with PyTorch's semantics (`SGD`, `Adam`, `AdamW`), called as MindSpore
calls optimizers: `optimizer(grads)` with one gradient per parameter."""
from .adamw import Adam, AdamW
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW"]
