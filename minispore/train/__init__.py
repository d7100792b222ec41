"""Training support: checkpoints (MindSpore's save/load API and a training-state manager) and
MindSpore's high-level API (Model, callbacks, metrics, loss-scale managers).

Read in this order:

* serialization.py        `save_checkpoint` / `load_checkpoint` / `load_param_into_net`, over the
                          file formats ckpt_codec.py (MindSpore's `.ckpt`) and safetensors_codec.py
* atomic_io.py            crash-safe writes (write aside, flush, rename), used by every save
* checkpoint_manager.py   training-state checkpoints that survive crashes and Ctrl-C
* model.py                `Model`: train / eval / predict / fit
* callback/, metrics/     what `Model` calls back and measures (each has its own reading order)
* loss_scale_manager.py   `mindspore.train.loss_scale_manager` (the managers live in minispore.amp)

The tiny-LLaMA training loop lives in `minispore.llm.trainer`: it builds on this package
(checkpoints) and on the LLaMA model, and minispore.llm sits above minispore.train in the layering
(ARCHITECTURE.md §2).
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
