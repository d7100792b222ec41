"""Training support: checkpoints (MindSpore's save/load API and a training-state manager).

The trainer (minispore.llm) adds its own imports below.
"""
from .serialization import save_checkpoint, load_checkpoint, load_param_into_net, CheckpointError
from .checkpoint_manager import (CheckpointManager, ConfigMismatchError, check_config, deferred_interrupt,
                                 find_checkpoint, read_state)
from .trainer import TrainConfig, train
