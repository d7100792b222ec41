"""Wrapper cells that turn a network into something a training loop can call.

* `WithLossCell(backbone, loss_fn)`: `(data, label) -> loss_fn(backbone(data), label)`.
* `WithEvalCell(network, loss_fn)`: `(data, label) -> (loss, outputs, label)`.
* `TrainOneStepCell(network, optimizer, sens=None, return_grad=False)`: one call = forward,
  backward over `optimizer.parameters`, gradient reduction, optimizer update; returns the loss.

All use `auto_prefix=False`, so wrapping does not rename the network's parameters.
"""
from __future__ import annotations

import numbers

from ..common.errors import OpTypeError
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


class TrainOneStepCell(Cell):
    """`TrainOneStepCell(network, optimizer, sens=None, return_grad=False)`.

    `network` returns the loss (e.g. a `WithLossCell`). Gradients are taken with respect to
    `optimizer.parameters` (the same objects, in the same order, the optimizer updates), scaled by
    `sens` if given, passed through `grad_reducer` (identity on one device; a data-parallel setup
    replaces it with an all-reduce), then handed to the optimizer.
    """

    def __init__(self, network, optimizer, sens=None, return_grad=False):
        super().__init__(auto_prefix=False)
        if not isinstance(network, Cell):
            raise OpTypeError("TrainOneStepCell", "network as a Cell", type(network).__name__)
        if not hasattr(optimizer, "parameters"):
            raise OpTypeError("TrainOneStepCell", "an nn.Optimizer", type(optimizer).__name__)
        if sens is not None and not isinstance(sens, (numbers.Real, Tensor)):
            raise OpTypeError("TrainOneStepCell", "sens as a number, a Tensor or None", type(sens).__name__)
        self.network = network
        self.network.set_grad()
        self.optimizer = optimizer
        self.weights = self.optimizer.parameters
        self.sens = sens
        self.return_grad = return_grad
        self.grad_reducer = Identity()
        from ..autograd import value_and_grad
        self._grad_fn = value_and_grad(self.network, grad_position=None, weights=self.weights)

    def construct(self, *inputs):
        loss, grads = self._grad_fn(*inputs)
        if self.sens is not None:
            # the backward pass is linear in the output cotangent: sens * d(loss)
            grads = tuple(g * self.sens for g in grads)
        grads = self.grad_reducer(grads)
        self.optimizer(grads)
        if self.return_grad:
            return loss, grads
        return loss
