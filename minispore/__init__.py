"""minispore: a readable NumPy re-implementation of MindSpore 2.3's ideas.

Layers (ARCHITECTURE.md §2): common -> ops -> backend -> autograd -> graph -> jit -> nn -> train/llm -> cli.
"""
from .common.version import __version__

from .common import dtype
from .common.dtype import (bfloat16, bool_, float16, float32, float64, int8, int16, int32, int64, uint8,
                           uint16, uint32, uint64,
                           half, single, double, dtype_to_nptype)
from .common.context import (GRAPH_MODE, PYNATIVE_MODE, get_context, set_context, set_seed, get_seed,
                             get_rng_state, set_rng_state, set_device, set_deterministic, manual_seed,
                             initial_seed, seed)
from .common.tensor import Parameter, ParameterTuple, Tensor, from_numpy, tensor
from .common.errors import MinisporeError, OpTypeError, OpValueError, MinisporeRuntimeError
from . import ops
from .backend import registry as _backend_registry          # noqa: F401  (backend selection)
from .backend import host_memory as _host_memory            # noqa: F401  (malloc tuning, see module)
from .backend import dispatch as _dispatch                  # noqa: F401  (installs the eager executor)
from .autograd import GradOperation, grad, jvp, value_and_grad, vjp
from .ops import stop_gradient
from .jit import JitConfig, jit                              # graph mode (minispore/graph, jit.py)
from . import graph                                         # noqa: F401  (ms.graph.dump / explain)
from .graph.lazy_inline import lazy_inline                  # compile a repeated Cell once
from .graph.dryrun import dryrun                             # DryRun: memory/FLOPs/time without running
from .profiler import Profiler                               # per-op / per-stream timings, Chrome trace
_backend_registry.select_from_environment()                 # MINISPORE_DEVICE_TARGET=Ascend (backend/registry.py)

_LAZY = {
    "nn": "minispore.nn",
    "train": "minispore.train",
    "llm": "minispore.llm",
    "testing": "minispore.testing",
    "dataset": "minispore.dataset",
    "mint": "minispore.mint",
    "amp": "minispore.amp",
    "communication": "minispore.communication",   # init, get_rank, create_group ... (MPI)
    "parallel": "minispore.parallel",             # Layout, strategy files, distributed checkpoints
    "Layout": "minispore.parallel",
    "shard": "minispore.graph.parallel.strategies",        # ms.shard(fn, in_strategy, ...) (semi-auto)
    "reshard": "minispore.graph.parallel.strategies",      # ms.reshard(tensor, layout)
    "transform_checkpoints": "minispore.parallel",
    "transform_checkpoint_by_rank": "minispore.parallel",
    "rank_list_for_transform": "minispore.parallel",
    "merge_sliced_parameter": "minispore.parallel",
    "build_searched_strategy": "minispore.parallel",
    "load_distributed_checkpoint": "minispore.parallel",
    "unified_safetensors": "minispore.parallel",
    "Model": "minispore.train",             # MindSpore exposes its training API at top level too
    "LossMonitor": "minispore.train",
    "TimeMonitor": "minispore.train",
    "ModelCheckpoint": "minispore.train",
    "CheckpointConfig": "minispore.train",
    "Callback": "minispore.train",
    "RunContext": "minispore.train",
    "save_checkpoint": "minispore.train.serialization",
    "load_checkpoint": "minispore.train.serialization",
    "load_param_into_net": "minispore.train.serialization",
    "context": "minispore.context",                 # `from mindspore import context`
    "ParallelMode": "minispore.common.auto_parallel_context",
    "set_auto_parallel_context": "minispore.common.auto_parallel_context",
    "get_auto_parallel_context": "minispore.common.auto_parallel_context",
    "reset_auto_parallel_context": "minispore.common.auto_parallel_context",
}


# MindSpore also exposes its training helpers at the top level (`mindspore.Accuracy`,
# `mindspore.EarlyStopping`, `mindspore.build_train_network`, ...): looked up in minispore.train on
# first use, since train sits above this module in the layering
_FROM_TRAIN = {"Accuracy", "Loss", "MAE", "MSE", "F1", "Fbeta", "Precision", "Recall", "Metric",
               "Top1CategoricalAccuracy", "Top5CategoricalAccuracy", "TopKCategoricalAccuracy", "get_metric_fn",
               "EarlyStopping", "History", "LambdaCallback", "LossScaleManager", "DynamicLossScaleManager",
               "FixedLossScaleManager"}


def is_tensor(obj) -> bool:
    """`mindspore.is_tensor`: whether `obj` is a Tensor (Parameters are Tensors)."""
    return isinstance(obj, Tensor)


def synchronize():
    """`mindspore.synchronize`: wait for the device. minispore's CPU backend runs every kernel
    synchronously, so there is nothing to wait for."""


def __getattr__(name):
    import importlib
    if name in _FROM_TRAIN:
        return getattr(importlib.import_module("minispore.train"), name)
    if name == "build_train_network":
        return importlib.import_module("minispore.amp").build_train_network
    if name in _LAZY:
        mod = importlib.import_module(_LAZY[name])
        return mod if _LAZY[name].endswith(name) else getattr(mod, name)
    raise AttributeError(f"module 'minispore' has no attribute '{name}'")
