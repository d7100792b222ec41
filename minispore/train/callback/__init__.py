"""Callbacks for `Model.train` / `Model.eval` (MindSpore's `mindspore.train.callback`).

Read `_callback.py` first (the hook protocol, `RunContext`, `cb_params`), then the callbacks:
LossMonitor, TimeMonitor, ModelCheckpoint + CheckpointConfig, EarlyStopping, History, LambdaCallback,
and minispore's tqdm `ProgressBar`.
"""
from ._callback import Callback, RunContext
from ._callback import CallbackManager as _CallbackManager              # noqa: F401  (used by Model)
from ._callback import InternalCallbackParam as _InternalCallbackParam  # noqa: F401
from ._checkpoint import CheckpointConfig, ModelCheckpoint
from ._early_stop import EarlyStopping
from ._history import History
from ._lambda_callback import LambdaCallback
from ._loss_monitor import LossMonitor
from ._progress_bar import ProgressBar
from ._time_monitor import TimeMonitor

__all__ = ["Callback", "RunContext", "LossMonitor", "TimeMonitor", "ModelCheckpoint", "CheckpointConfig",
           "EarlyStopping", "History", "LambdaCallback", "ProgressBar"]
