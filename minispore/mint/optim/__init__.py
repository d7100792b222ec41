"""`mint.optim`: optimizers with PyTorch's semantics (`mint.optim.AdamW`)."""
from .adamw import AdamW

__all__ = ["AdamW"]
