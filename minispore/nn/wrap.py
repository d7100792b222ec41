"""Wrapper cells that turn a network into something a training loop can call.

* `WithLossCell(backbone, loss_fn)`: `(data, label) -> loss_fn(backbone(data), label)`.
* `WithEvalCell(network, loss_fn)`: `(data, label) -> (loss, outputs, label)`.
* `WithGradCell(network, loss_fn=None, sens=None)`: `(*inputs) -> gradients` of the loss.
* `ForwardValueAndGrad(network, weights, get_all, get_by_list, sens_param)`: `(loss, gradients)`.
* `TrainOneStepCell(network, optimizer, sens=None, return_grad=False)`: one call = forward,
  backward over `optimizer.parameters`, gradient reduction, optimizer update; returns the loss
  (and, with return_grad=True, a dict `{parameter name: gradient}`).

All use `auto_prefix=False`, so wrapping does not rename the network's parameters.
"""
from __future__ import annotations

import numbers

from ..common import context
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor
from .cell import Cell
from .layers.basic import Identity


class WithLossCell(Cell):
    def __init__(self, backbone, loss_fn):
        super().__init__(auto_prefix=False)
        if not isinstance(backbone, Cell):
            raise OpTypeError("WithLossCell", "backbone as a Cell", type(backbone).__name__)
        if not callable(loss_fn):
            raise OpTypeError("WithLossCell", "loss_fn as a Cell or callable", type(loss_fn).__name__)
        self._backbone = backbone
        self._loss_fn = loss_fn

    def construct(self, data, label):
        return self._loss_fn(self._backbone(data), label)

    @property
    def backbone_network(self):
        return self._backbone


class WithEvalCell(Cell):
    def __init__(self, network, loss_fn, add_cast_fp32=False):
        super().__init__(auto_prefix=False)
        self._network = network
        self._loss_fn = loss_fn
        self.add_cast_fp32 = add_cast_fp32

    def construct(self, data, label):
        outputs = self._network(data)
        if self.add_cast_fp32:
            from ..ops import functional as F
            outputs = F.cast(outputs, "float32")
            label = F.cast(label, "float32")
        return self._loss_fn(outputs, label), outputs, label


class WithGradCell(Cell):
    """`WithGradCell(network, loss_fn=None, sens=None)`: `(*inputs) -> gradients` of the loss with
    respect to `network.trainable_params()` (a tuple, one per parameter). Without `loss_fn`,
    `network` itself returns the loss; with `sens`, it is the output cotangent (the last input of
    the gradient call, as MindSpore's GradOperation(sens_param=True))."""

    def __init__(self, network, loss_fn=None, sens=None):
        super().__init__(auto_prefix=False)
        if not isinstance(network, Cell):
            raise OpTypeError("WithGradCell", "network as a Cell", type(network).__name__)
        from ..autograd import GradOperation
        from ..common.tensor import ParameterTuple
        self.network = network
        self.loss_fn = loss_fn
        self.weights = ParameterTuple(network.trainable_params())
        self.grad = GradOperation(get_by_list=True, sens_param=sens is not None)
        self.sens = sens
        self.network_with_loss = network if loss_fn is None else WithLossCell(network, loss_fn)
        self.network_with_loss.set_train()

    def construct(self, *inputs):
        if self.sens is None:
            return self.grad(self.network_with_loss, self.weights)(*inputs)
        return self.grad(self.network_with_loss, self.weights)(*inputs, self.sens)


class ForwardValueAndGrad(Cell):
    """`ForwardValueAndGrad(network, weights=None, get_all=False, get_by_list=False,
    sens_param=False)`: `(*inputs) -> (network(*inputs), gradients)`, the gradients as
    `GradOperation(get_all, get_by_list, sens_param)` gives them (with sens_param, the last input is
    the output cotangent and is not passed to the network)."""

    def __init__(self, network, weights=None, get_all=False, get_by_list=False, sens_param=False):
        super().__init__(auto_prefix=False)
        if not callable(network):
            raise OpTypeError("ForwardValueAndGrad", "network as a Cell or function", type(network).__name__)
        for name, v in (("get_all", get_all), ("get_by_list", get_by_list), ("sens_param", sens_param)):
            if not isinstance(v, bool):
                raise OpTypeError("ForwardValueAndGrad", f"'{name}' to be a bool", type(v).__name__)
        if get_by_list and not isinstance(weights, (tuple, list)):
            raise OpTypeError("ForwardValueAndGrad", "weights as a tuple/list of Parameters when get_by_list=True",
                              type(weights).__name__)
        from ..autograd import GradOperation
        self.network = network
        self.weights = weights
        self.get_by_list = get_by_list
        self.sens_param = sens_param
        self.grad = GradOperation(get_all=get_all, get_by_list=get_by_list, sens_param=sens_param)

    def construct(self, *inputs):
        forward_inputs = inputs[:-1] if self.sens_param else inputs
        loss = self.network(*forward_inputs)
        if self.get_by_list:
            return loss, self.grad(self.network, self.weights)(*inputs)
        return loss, self.grad(self.network)(*inputs)


def _grad_reducer_for(weights):
    """MindSpore's rule: `parallel_mode` data_parallel or hybrid_parallel -> a
    DistributedGradReducer over the world (mean from `gradients_mean`, degree from `device_num`),
    otherwise the identity."""
    from ..common import auto_parallel_context as apc
    from ..common import process_groups
    if not apc.is_data_parallel():
        return Identity()
    from .wrap_grad_reducer import DistributedGradReducer
    process_groups.world()      # join the world first, so an unset device_num reads its size
    return DistributedGradReducer(weights, apc.get_auto_parallel_context("gradients_mean"),
                                  apc.get_auto_parallel_context("device_num"))


def _parallel_optimizer_for(train_cell, optimizer, network):
    """MindSpore's rule: `enable_parallel_optimizer=True` in data_parallel / hybrid_parallel mode ->
    an `nn.optim.parallel_optimizer.ParallelOptimizer` (ZeRO, `parallel_optimizer_config`'s level
    and threshold) in place of the gradient reducer; otherwise None."""
    from .optim import parallel_optimizer as zero
    cfg = zero.settings()
    if cfg is None:
        return None
    from ..common import process_groups
    if type(train_cell).construct is not TrainOneStepCell.construct:
        raise OpValueError(type(train_cell).__name__, "TrainOneStepCell itself for optimizer parallel "
                           "(enable_parallel_optimizer=True); a subclass with its own construct is not supported",
                           type(train_cell).__name__)
    world = process_groups.world()      # join the world first, so an unset device_num reads its size
    if cfg["shard_size"] not in (-1, world.size):
        raise OpValueError("TrainOneStepCell", f"parallel_optimizer_config 'optimizer_weight_shard_size' -1 or "
                           f"the world size {world.size} (sharding over part of the ranks is not implemented)",
                           repr(cfg["shard_size"]))
    return zero.ParallelOptimizer(optimizer, network, level=cfg["level"], threshold=cfg["threshold"],
                                  bucket_mb=_reduce_scatter_bucket_mb())


def _reduce_scatter_bucket_mb():
    """ZeRO's gradient buckets from `comm_fusion`'s "reducescatter" entry, as the DP reducer's come
    from its "allreduce" one: mode "size" -> buckets of `config` MB, "auto" -> 64 MB (MindSpore's
    fusion threshold), openstate False -> no fusion (a tiny size: every gradient its own bucket)."""
    from ..common import auto_parallel_context as apc
    fusion = apc.get_auto_parallel_context("comm_fusion") or {}
    if fusion.get("openstate", True) is False:
        return 1e-9
    entry = fusion.get("reducescatter") or {"mode": "auto"}
    return entry["config"] if entry["mode"] == "size" else 64.0


class TrainOneStepCell(Cell):
    """`TrainOneStepCell(network, optimizer, sens=None, return_grad=False)`.

    `network` returns the loss (e.g. a `WithLossCell`). Gradients are taken with respect to
    `optimizer.parameters` (the same objects, in the same order, the optimizer updates), scaled by
    `sens` if given, passed through `grad_reducer`, then handed to the optimizer. `grad_reducer` is
    the identity unless `parallel_mode` is "data_parallel" or "hybrid_parallel": then it is an
    `nn.DistributedGradReducer` whose bucketed all-reduces start during backward. With
    `enable_parallel_optimizer=True` there, `parallel_optimizer` is a ZeRO `ParallelOptimizer`
    (nn/optim/parallel_optimizer.py) that does the reduction and the update instead (and
    `grad_reducer` is the identity); otherwise `parallel_optimizer` is None.
    """

    def __init__(self, network, optimizer, sens=None, return_grad=False):
        super().__init__(auto_prefix=False)
        if not isinstance(network, Cell):
            raise OpTypeError("TrainOneStepCell", "network as a Cell", type(network).__name__)
        if not hasattr(optimizer, "parameters"):
            raise OpTypeError("TrainOneStepCell", "an nn.Optimizer", type(optimizer).__name__)
        if sens is not None and not isinstance(sens, (numbers.Real, Tensor)):
            raise OpTypeError("TrainOneStepCell", "sens as a number, a Tensor or None", type(sens).__name__)
        if isinstance(sens, numbers.Real) and sens == 0:
            raise OpValueError("TrainOneStepCell", "a non-zero sens (it scales every gradient)", repr(sens))
        self.network = network
        self.network.set_grad()
        self.optimizer = optimizer
        self.weights = self.optimizer.parameters
        self.sens = sens
        self.return_grad = return_grad
        # optimizer parallel (ZeRO) reduces the gradients itself (nn/optim/parallel_optimizer.py)
        self.parallel_optimizer = _parallel_optimizer_for(self, self.optimizer, self.network)
        self.grad_reducer = Identity() if self.parallel_optimizer is not None else _grad_reducer_for(self.weights)
        from ..autograd import value_and_grad
        self._grad_fn = value_and_grad(self.network, grad_position=None, weights=self.weights)

    def construct(self, *inputs):
        # data parallel: the buckets start their all-reduce during backward (wrap_grad_reducer.py),
        # ZeRO their reduce-scatter (PyNative only: a compiled graph's backward reports no
        # gradient to the tape's hooks), unless `sens` will rescale the gradients afterwards (the
        # buckets would be sent twice)
        overlap = getattr(self.grad_reducer, "overlap_backward", None)
        if self.parallel_optimizer is not None:
            overlap = (self.parallel_optimizer.overlap_backward
                       if context.get_context("mode") == context.PYNATIVE_MODE else None)
        if self.sens is not None:
            overlap = None
        if overlap is None:
            loss, grads = self._grad_fn(*inputs)
        else:
            with overlap():
                loss, grads = self._grad_fn(*inputs)
        if self.sens is not None:
            # the backward pass is linear in the output cotangent: sens * d(loss)
            grads = tuple(g * self.sens for g in grads)
        if self.parallel_optimizer is not None:
            # ZeRO: reduce (all-reduce or reduce-scatter), update this rank's slices, all-gather
            grads = self.parallel_optimizer(grads)
        else:
            grads = self.grad_reducer(grads)
            self.optimizer(grads)
        if self.return_grad:
            # MindSpore returns the gradients by parameter name
            return loss, {p.name: g for p, g in zip(self.weights, grads)}
        return loss
