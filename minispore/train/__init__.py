"""Training support: checkpoints (MindSpore's save/load API and a training-state manager) and
MindSpore's high-level API (Model, callbacks, metrics, loss-scale managers).

The tiny-LLaMA training loop lives in `minispore.llm.trainer`: it builds on this package
(checkpoints) and on the LLaMA model, and minispore.llm sits above minispore.train in the layering.
"""
from .serialization import save_checkpoint, load_checkpoint, load_param_into_net, CheckpointError
from .checkpoint_manager import (CheckpointManager, ConfigMismatchError, check_config, deferred_interrupt,
                                 find_checkpoint, read_state)
from .loss_scale_manager import DynamicLossScaleManager, FixedLossScaleManager, LossScaleManager
# MindSpore's high-level API: Model, callbacks, metrics (model.py, callback/, metrics/)
from .model import Model
from .callback import (Callback, CheckpointConfig, EarlyStopping, History, LambdaCallback, LossMonitor,
                       ModelCheckpoint, ProgressBar, RunContext, TimeMonitor)
from .metrics import (F1, MAE, MSE, Accuracy, Fbeta, Loss, Metric, Precision, Recall, Top1CategoricalAccuracy,
                      Top5CategoricalAccuracy, TopKCategoricalAccuracy, get_metric_fn, names, rearrange_inputs)
