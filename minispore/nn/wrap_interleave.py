"""`nn.MicroBatchInterleaved(network, interleave_num=2)`: coarse multi-copy ("多副本") parallelism.

The idea (MindSpore's multi-copy tutorial): cut the batch into `interleave_num` copies along
dimension 0 and run the network once per copy. The copies are independent, so a scheduler that
sees all of them may run copy 2's computation while copy 1's tensor-parallel communication is
on the wire - in MindSpore the semi-auto-parallel graph compiler does that interleaving. Here the
wrapper provides the split and the recombination; the *fine-grained* form, which splits inside a
Transformer layer and really schedules one copy's collectives against the other copy's GEMMs
with non-blocking MPI, is `minispore/parallel/multi_copy.py`.

    net = nn.MicroBatchInterleaved(nn.WithLossCell(backbone, loss_fn), interleave_num=2)
    loss = net(data, label)          # == WithLossCell(...)(data, label) for a mean loss

How the copies' outputs are combined (so the wrapped network computes what the unsplit one does):

* a 0-d output (a loss that is a mean over the batch) is the copies' losses weighted by the
  copies' sizes: with N rows cut into n_1 + ... + n_k,

        loss = sum_c (n_c / N) * loss_c  =  (1/N) sum_c sum_{i in c} l_i  =  mean_i l_i,

  so the value and every gradient equal the unsplit network's (up to rounding: the sums are
  grouped differently). MindSpore's MicroBatchInterleaved adds the copies' outputs unweighted
  (its loss is interleave_num times the mean for equal copies); minispore keeps the mean, so
  wrapping a network changes neither its loss nor its learning rate;
* an output with a batch dimension (logits, per-sample losses) is the copies' outputs
  concatenated along dimension 0 - the unsplit output;
* a tuple of outputs is combined element by element with the same two rules.

Which inputs are split: every Tensor with at least one dimension (all must have the same size of
dimension 0, at least interleave_num); 0-d tensors and non-Tensor arguments go to every copy
unchanged. Copy sizes follow np.array_split (the first N % k copies one row longer), so any
N >= interleave_num works.
"""
from __future__ import annotations

import numbers

from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Tensor
from .cell import Cell

_OP = "MicroBatchInterleaved"


def copy_sizes(n, copies):
    """Rows of each copy when `n` rows are cut into `copies` (np.array_split's rule)."""
    base, extra = divmod(int(n), int(copies))
    return [base + (1 if c < extra else 0) for c in range(copies)]


class MicroBatchInterleaved(Cell):
    """Run `network` on `interleave_num` slices of the batch (dimension 0) and combine the outputs
    into the unsplit network's output (the module docstring gives the rules).

    MindSpore: `mindspore.nn.MicroBatchInterleaved(network, interleave_num=2)` (newer releases:
    `mindspore.parallel.nn.MicroBatchInterleaved`)."""

    def __init__(self, network, interleave_num=2):
        super().__init__(auto_prefix=False)
        if not isinstance(network, Cell):
            raise OpTypeError(_OP, "network as a Cell", type(network).__name__)
        if isinstance(interleave_num, bool) or not isinstance(interleave_num, numbers.Integral) \
                or interleave_num < 1:
            raise OpValueError(_OP, "'interleave_num' as a positive int", repr(interleave_num))
        self.network = network
        self.interleave_num = int(interleave_num)

    def _batch_rows(self, args):
        rows = {int(a.shape[0]) for a in args if isinstance(a, Tensor) and a.ndim >= 1}
        if not rows:
            raise OpValueError(_OP, "at least one Tensor input with a batch dimension (dimension 0) to split",
                               "no such input")
        if len(rows) > 1:
            raise OpValueError(_OP, "every Tensor input with the same dimension 0 (the batch split into copies)",
                               f"dimension 0 sizes {sorted(rows)}")
        n = rows.pop()
        if n < self.interleave_num:
            raise OpValueError(_OP, f"a batch of at least interleave_num ({self.interleave_num}) rows",
                               f"{n} rows")
        return n

    def construct(self, *inputs):
        from ..ops import functional as F
        if self.interleave_num == 1:
            return self.network(*inputs)
        n = self._batch_rows(inputs)
        sizes = copy_sizes(n, self.interleave_num)
        outputs, start = [], 0
        for size in sizes:
            piece = tuple(F.narrow(a, 0, start, size) if isinstance(a, Tensor) and a.ndim >= 1 else a
                          for a in inputs)
            outputs.append(self.network(*piece))
            start += size
        first = outputs[0]
        if isinstance(first, tuple):
            return tuple(_combine([o[i] for o in outputs], sizes, n, i) for i in range(len(first)))
        return _combine(outputs, sizes, n, None)

    def extend_repr(self):
        return f"interleave_num={self.interleave_num}"


def _combine(parts, sizes, n, index):
    """One output of every copy -> the unsplit output: a size-weighted sum of 0-d outputs (a mean
    loss stays the batch mean), a concatenation along dimension 0 otherwise."""
    from ..ops import functional as F
    where = "" if index is None else f" (output {index})"
    if not all(isinstance(p, Tensor) for p in parts):
        raise OpTypeError(_OP, f"the network to return Tensors (or a tuple of Tensors){where}",
                          type(next(p for p in parts if not isinstance(p, Tensor))).__name__)
    if parts[0].ndim == 0:
        total = None
        for p, k in zip(parts, sizes):
            term = p * (k / n)
            total = term if total is None else total + term
        return total
    return F.concat(parts, 0)


__all__ = ["MicroBatchInterleaved"]
