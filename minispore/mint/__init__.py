"""`minispore.mint`: the PyTorch-style API that MindSpore 2.3 added alongside its own
(`mint.optim.AdamW`, ...). Same engine underneath; only names and conventions follow PyTorch."""
from . import optim  # noqa: F401
