"""Tensor parallelism the explicit way (Megatron-LM, Shoeybi et al. 2019), written out in PyNative.

One matrix product `y = x W^T` can be spread over the p ranks of a group in two ways:

* **column-parallel**: rank r holds rows r of W's output features (W = [W_0; W_1; ...] stacked
  along out_features) and computes its own slice of the output columns, y_r = x W_r^T. Every
  rank needs the whole input x; nothing needs to be summed.
* **row-parallel**: rank r holds block r of W's *input* features (W = [W_0, W_1, ...]) and the
  matching block x_r of the input; y = sum_r x_r W_r^T, so the partial products are summed
  across the ranks (one all-reduce).

A column-parallel layer followed by a row-parallel one (attention: QKV then the output projection;
an MLP: up then down) needs no communication in between: the column layer's output slices are
exactly the row layer's input blocks, and elementwise functions (SiLU, the per-head attention)
work on slices. So each of a transformer block's two regions (attention, MLP) costs one
all-reduce forward and one backward - provided the region's column-parallel layers share ONE `f`
(Megatron fuses QKV, and gate/up, into one GEMM; here they are built with copy_input=False and
the block applies f once): three separate f's would all-reduce three input gradients.

Where the collectives go is decided by two conjugate operators, Megatron's `f` and `g`:

                 forward              backward
    f  (copy)    identity             all-reduce(sum) of the gradient
    g  (reduce)  all-reduce(sum)      identity

    x ──f──> [ column-parallel W_r ] ── y_r ──> [ row-parallel V_r ] ──g──> out
    (replicated)          (this rank's slice: no communication)          (replicated)

* `f` sits where a replicated tensor enters the parallel region. Forward, every rank already has
  x. Backward, x influenced the loss through every rank's slice, so dL/dx is the SUM of the
  ranks' partial gradients: an all-reduce.
* `g` sits where the region's partial results leave it. Forward, the partial products are
  summed. Backward, the sum's gradient is the same replicated dL/dout on every rank, and d(sum)/d
  (each term) is 1: identity.

Why `g`'s backward is not the all-reduce primitive's own rule (ops/prims/comm.py, MindSpore's:
all-reduce of dout): that rule differentiates the SUM of every rank's loss. Here each rank holds
the same, replicated loss; differentiating the sum of p copies would scale every gradient by p.
f and g are therefore Cells with a `bprop` (MindSpore's custom-backward Cells, like MindFormers'
`CopyToModelParallelRegion` / `ReduceFromModelParallelRegion`).

Every layer here is built FROM a single-process layer's full weights, slicing this rank's part:
a parallel run starts from the same numbers as one process, which is what the tests compare.
The sizes being split must be divisible by the group size (Megatron pads the vocabulary; here a
clear error says what to change).

A replicated parameter (a norm's weight, a row-parallel layer's bias) gets the same gradient on
every rank with no extra communication: the gradient that reaches it is replicated, because every
path into the parallel regions goes through an `f`, whose backward all-reduce makes it so.

Sequence parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", section 4.2.2). Between two parallel regions plain TP keeps the norm and the
residual add REPLICATED: every rank computes and stores the same (batch*seq, dim) tensors. They
work row by row, so they can be split along the sequence instead: rank r holds positions
[r s/p, (r+1) s/p) of every sequence there. The conjugate pair becomes

                 forward                          backward
    f-bar        all-gather along the sequence    reduce-scatter along the sequence
    g-bar        reduce-scatter along the seq.    all-gather along the sequence

    x_r ──f-bar──> [ column-parallel ] ── [ row-parallel ] ──g-bar──> out_r
    (seq chunk r)        (all positions, this rank's heads/units)       (seq chunk r)

A ring all-reduce IS a reduce-scatter followed by an all-gather, so the bytes on the wire are
the same as TP's; what changes is that the norm/residual activations take 1/p of the memory.
Unlike f and g, these two need no custom backward: the all-gather and reduce-scatter
primitives' own rules (ops/prims/comm.py: the gradient of a gather is a reduce-scatter and
vice versa) are exactly right here, because the tensors on either side are NOT replicated
copies (each rank holds another chunk, or another partial sum), so no p-fold double count can
arise. What does change: a replicated weight inside the sequence-parallel region (a norm's
gamma) now sees only this rank's positions, so its gradient is a PARTIAL sum, to be
all-reduced over the tensor-parallel group once per step (Megatron's
`allreduce_sequence_parallel_grad`; llm/tensor_parallel.py's grad reducer does it).
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import nn
from ..common.errors import OpTypeError, OpValueError
from ..common.tensor import Parameter, Tensor
from ..communication import comm_func
from ..communication.management import GlobalComm, get_group_size, get_rank
from ..ops import functional as F


# -------------------------------------------------------------------------------------------------
# groups and slices
def group_info(op, group):
    """(group name, size, this process's rank in it) of `group` (None: the world)."""
    name = GlobalComm.WORLD_COMM_GROUP if group is None else group
    if not isinstance(name, str):
        raise OpTypeError(op, "'group' as None (the world) or a group name (str)", f"{type(group).__name__}")
    return name, get_group_size(name), get_rank(name)


def split_sizes(n, size):
    """How `n` rows are dealt to `size` ranks: equal blocks, the first n % size ranks one row more
    (np.array_split's rule). Used for the vocabulary, which need not divide (65 characters)."""
    base, extra = divmod(int(n), int(size))
    return [base + (1 if r < extra else 0) for r in range(size)]


def shard(op, what, array, axis, size, rank, even=True):
    """Block `rank` of `array` along `axis` (a copy: the full array may be dropped afterwards):
    one of `size` equal blocks, or with `even=False` the `split_sizes` blocks. `what` names the
    split dimension in the error."""
    n = array.shape[axis]
    if even and n % size:
        raise OpValueError(op, f"{what} ({n}) divisible by the tensor-parallel group size {size}",
                           f"{n} % {size} = {n % size}")
    if n < size:
        raise OpValueError(op, f"{what} ({n}) at least the tensor-parallel group size {size}", str(n))
    sizes = split_sizes(n, size)
    start = sum(sizes[:rank])
    index = [slice(None)] * array.ndim
    index[axis] = slice(start, start + sizes[rank])
    return np.array(array[tuple(index)], copy=True)


def _param(full: Parameter, local: np.ndarray) -> Parameter:
    """A Parameter holding this rank's slice of `full`, keeping its name (so a gathered checkpoint
    reads like a single-process one). Which axis was split is the layer's `tensor_parallel_axes`."""
    return Parameter(Tensor(local), name=full.name, requires_grad=full.requires_grad)


# -------------------------------------------------------------------------------------------------
# the conjugate operators f and g (and the gather/scatter pair for the ends of a region)
class CopyToModelParallelRegion(nn.Cell):
    """Megatron's `f`: identity forward; all-reduce(sum) of the gradient backward."""

    def __init__(self, group=None):
        super().__init__()
        self.group, self.tp_size, _ = group_info("CopyToModelParallelRegion", group)

    def construct(self, x):
        return x

    def bprop(self, x, out, dout):
        # x fed every rank's slice of the parallel region: its gradient is the sum of theirs
        return (comm_func.all_reduce(dout, "sum", self.group)[0],)


class ReduceFromModelParallelRegion(nn.Cell):
    """Megatron's `g`: all-reduce(sum) forward; identity backward."""

    def __init__(self, group=None):
        super().__init__()
        self.group, self.tp_size, _ = group_info("ReduceFromModelParallelRegion", group)

    def construct(self, x):
        # the partial products of every rank add up to the full result
        return comm_func.all_reduce(x, "sum", self.group)[0]

    def bprop(self, x, out, dout):
        # out = sum_r x_r, and every rank holds the same dL/dout: d out / d x_r = 1
        return (dout,)


class GatherFromModelParallelRegion(nn.Cell):
    """Concatenate every rank's slice along the LAST axis (all-gather forward); backward keeps this
    rank's slice of the (replicated) gradient - no communication.

    `sizes`: the ranks' slice widths when they differ (an uneven vocabulary split); MPI's
    all-gather moves equal blocks, so each slice is padded to the widest, gathered, and the
    padding dropped."""

    def __init__(self, group=None, sizes=None):
        super().__init__()
        self.group, self.tp_size, self.tp_rank = group_info("GatherFromModelParallelRegion", group)
        self.sizes = None if sizes is None or len(set(sizes)) == 1 else [int(k) for k in sizes]

    def construct(self, x):
        if self.tp_size == 1:
            return x
        if self.sizes is None:
            # the all-gather primitive joins ranks' blocks along axis 0: move the last axis there first
            gathered = comm_func.all_gather_into_tensor(F.moveaxis(x, -1, 0), group=self.group)[0]
            return F.moveaxis(gathered, 0, -1)
        width = max(self.sizes)
        pad = width - x.shape[-1]
        if pad:
            x = F.concat((x, F.zeros(tuple(x.shape[:-1]) + (pad,), x.dtype)), -1)
        gathered = F.moveaxis(comm_func.all_gather_into_tensor(F.moveaxis(x, -1, 0), group=self.group)[0], 0, -1)
        return F.concat([F.narrow(gathered, -1, r * width, k) for r, k in enumerate(self.sizes)], -1)

    def bprop(self, x, out, dout):
        k = x.shape[-1]
        start = sum(self.sizes[:self.tp_rank]) if self.sizes is not None else self.tp_rank * k
        return (F.narrow(dout, -1, start, k),)


class ScatterToModelParallelRegion(nn.Cell):
    """Keep this rank's block of the LAST axis of a replicated tensor; backward all-gathers the
    blocks' gradients (the conjugate of GatherFromModelParallelRegion)."""

    def __init__(self, group=None):
        super().__init__()
        self.group, self.tp_size, self.tp_rank = group_info("ScatterToModelParallelRegion", group)

    def construct(self, x):
        n = x.shape[-1]
        if n % self.tp_size:
            raise OpValueError("ScatterToModelParallelRegion", f"a last dimension divisible by the group size "
                               f"{self.tp_size}", f"shape {tuple(x.shape)}")
        k = n // self.tp_size
        return F.narrow(x, -1, self.tp_rank * k, k)

    def bprop(self, x, out, dout):
        if self.tp_size == 1:
            return (dout,)
        gathered = comm_func.all_gather_into_tensor(F.moveaxis(dout, -1, 0), group=self.group)[0]
        return (F.moveaxis(gathered, 0, -1),)


# -------------------------------------------------------------------------------------------------
# the sequence-parallel pair f-bar / g-bar (Korthikanti et al.: all-gather / reduce-scatter along s)
def _check_seq_rows(op, x, batch, size, gathered):
    """x must be a (batch * positions, hidden) Tensor whose positions split into `size` chunks."""
    if not isinstance(x, Tensor) or x.ndim != 2:
        raise OpValueError(op, "a 2-D (batch * positions, hidden) Tensor", f"shape {tuple(getattr(x, 'shape', ()))}")
    if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or batch <= 0 or x.shape[0] % batch:
        raise OpValueError(op, f"'batch' as a positive int dividing the {x.shape[0]} rows", repr(batch))
    positions = x.shape[0] // batch
    if gathered and positions % size:
        raise OpValueError(op, f"a sequence length divisible by the tensor-parallel size {size} (use_seq_parallel "
                           "splits the positions into equal chunks)", f"{positions} positions")
    return positions


def _seq_major(x, batch, positions):
    """(batch*positions, h), rows batch-major -> (positions, batch, h): the sequence on axis 0,
    where the MPI collectives join / cut blocks (Megatron keeps [s, b, h] throughout; minispore's
    LLaMA keeps rows batch-major, so the layout turns here - free when batch == 1)."""
    x = F.reshape(x, (batch, positions, x.shape[-1]))
    return x if batch == 1 else F.transpose(x, (1, 0, 2))


def _batch_major(x, batch):
    """(positions, batch, h) -> (batch*positions, h)."""
    if batch != 1:
        x = F.transpose(x, (1, 0, 2))
    return F.reshape(x, (-1, x.shape[-1]))


class GatherFromSequenceParallelRegion(nn.Cell):
    """Korthikanti's f-bar, the entry of a parallel region under sequence parallelism: forward
    all-gathers the ranks' sequence chunks (every rank gets all positions, rank order = position
    order); backward reduce-scatters the gradient (the column-parallel layers after it each
    produced a partial gradient of the gathered input: sum them, keep this rank's chunk). Both
    directions are the all_gather primitive and its own backward rule.

        construct(x, batch): (batch * s/p, h) -> (batch * s, h)
    """

    def __init__(self, group=None):
        super().__init__()
        self.group, self.tp_size, self.tp_rank = group_info("GatherFromSequenceParallelRegion", group)

    def construct(self, x, batch):
        positions = _check_seq_rows("GatherFromSequenceParallelRegion", x, batch, self.tp_size, False)
        if self.tp_size == 1:
            return x
        gathered = comm_func.all_gather_into_tensor(_seq_major(x, batch, positions), group=self.group)[0]
        return _batch_major(gathered, batch)


class ReduceScatterToSequenceParallelRegion(nn.Cell):
    """Korthikanti's g-bar, the exit of a parallel region under sequence parallelism: forward sums
    the ranks' partial products and keeps this rank's chunk of the positions (reduce-scatter);
    backward all-gathers the chunks' gradients (every rank's partial product fed every chunk).
    The reduce_scatter primitive and its own backward rule.

        construct(x, batch): (batch * s, h) partial sums -> (batch * s/p, h) this rank's chunk
    """

    def __init__(self, group=None):
        super().__init__()
        self.group, self.tp_size, self.tp_rank = group_info("ReduceScatterToSequenceParallelRegion", group)

    def construct(self, x, batch):
        positions = _check_seq_rows("ReduceScatterToSequenceParallelRegion", x, batch, self.tp_size, True)
        if self.tp_size == 1:
            return x
        chunk = comm_func.reduce_scatter_tensor(_seq_major(x, batch, positions), "sum", group=self.group)[0]
        return _batch_major(chunk, batch)


def sequence_chunk(op, x, axis, size, rank):
    """This rank's chunk of positions [rank*s/size, (rank+1)*s/size) of `x` along `axis` (a view;
    no communication: ids and targets are replicated, every rank can cut its own chunk)."""
    n = x.shape[axis]
    if n % size:
        raise OpValueError(op, f"a sequence length divisible by the tensor-parallel size {size} (use_seq_parallel "
                           "splits the positions into equal chunks)", f"{n} positions")
    k = n // size
    return x if size == 1 else F.narrow(x, axis, rank * k, k)


def data_parallel_block(op, x, size, rank):
    """This replica's rows of a global batch: axis 0 cut into `size` equal blocks, block `rank`
    (a view; every rank is handed the global batch and cuts its own rows)."""
    if not isinstance(x, Tensor) or x.ndim < 1 or x.shape[0] % size:
        raise OpValueError(op, f"a Tensor whose first dimension divides by data_parallel ({size})",
                           f"shape {tuple(getattr(x, 'shape', ()))}")
    k = x.shape[0] // size
    return x if size == 1 else F.narrow(x, 0, rank * k, k)


# -------------------------------------------------------------------------------------------------
# layers
def _check_dense(op, dense):
    if not isinstance(dense, nn.Dense):
        raise OpTypeError(op, "the single-process nn.Dense to split", type(dense).__name__)


def _dense_2d(op, x, weight, bias, in_features):
    """x (*, in) -> (*, out) with one GEMM (the kernel nn.Dense uses in PyNative)."""
    if not isinstance(x, Tensor):
        raise OpTypeError(op, "a Tensor input", type(x).__name__)
    if x.ndim < 2 or x.shape[-1] != in_features:
        raise OpValueError(op, f"an input of shape (*, {in_features})", f"shape {tuple(x.shape)}")
    lead = tuple(x.shape[:-1])
    y = F.dense(F.reshape(x, (-1, in_features)) if x.ndim != 2 else x, weight, bias)
    return y if x.ndim == 2 else F.reshape(y, lead + (y.shape[-1],))


class ColumnParallelDense(nn.Cell):
    """`nn.Dense` with its weight split along the OUTPUT features: rank r computes output columns
    [r*k, (r+1)*k), k = out_channels / p.

        f -> y_r = x W_r^T + b_r -> (activation) -> [all-gather if gather_output]

    `gather_output=False` (the usual case) leaves each rank its slice, to feed a RowParallelDense
    or a per-head computation; `True` all-gathers the full output on every rank. `even_split=False`
    accepts out_channels not divisible by p (the first out_channels % p ranks get one more
    column: an output head over a 65-token vocabulary); `split_sizes` lists the widths.

    `copy_input=False` leaves out the `f`: the caller applies the region's entry operator ONCE for
    all the layers that share this input (wq, wk and wv; the gate and up projections), as
    Megatron's fused QKV / gate-up GEMMs do - `f` under tensor parallelism (one all-reduce in
    backward instead of three), the sequence all-gather f-bar under sequence parallelism.
    """

    # parameter -> the axis of the full tensor it is a block of (absent: replicated)
    tensor_parallel_axes = {"weight": 0, "bias": 0}

    def __init__(self, dense, group=None, gather_output=False, even_split=True, copy_input=True):
        super().__init__()
        op = "ColumnParallelDense"
        _check_dense(op, dense)
        self.group, self.tp_size, self.tp_rank = group_info(op, group)
        cut = lambda a: shard(op, "out_channels", a, 0, self.tp_size, self.tp_rank, even_split)  # noqa: E731
        self.weight = _param(dense.weight, cut(dense.weight.asnumpy()))
        self.in_channels = dense.in_channels
        self.out_channels = self.weight.shape[0]                        # this rank's columns
        self.split_sizes = split_sizes(dense.out_channels, self.tp_size)
        self.has_bias = dense.has_bias
        self.bias = _param(dense.bias, cut(dense.bias.asnumpy())) if dense.has_bias else None
        self.activation = dense.activation             # elementwise: fine on a slice
        self.gather_output = bool(gather_output)
        self.copy_input = bool(copy_input)
        self.copy_to = CopyToModelParallelRegion(self.group)
        self.gather = GatherFromModelParallelRegion(self.group, self.split_sizes)

    def construct(self, x):
        if self.copy_input:
            x = self.copy_to(x)                       # f: every rank uses all of x
        y = _dense_2d("ColumnParallelDense", x, self.weight, self.bias, self.in_channels)
        if self.activation is not None:
            y = self.activation(y)
        return self.gather(y) if self.gather_output else y

    def extend_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels} (of "
                f"{sum(self.split_sizes)}), rank {self.tp_rank}/{self.tp_size}, gather_output={self.gather_output}")


class RowParallelDense(nn.Cell):
    """`nn.Dense` with its weight split along the INPUT features: rank r multiplies input block
    [r*k, (r+1)*k) (k = in_channels / p) by its block of W, and the partial products are summed.

        [scatter if not input_is_parallel] -> x_r W_r^T -> g (all-reduce) -> + b -> (activation)

    The bias is added once, AFTER the reduce: added before, it would be summed p times.
    `input_is_parallel=True` (the usual case) takes the slice a ColumnParallelDense produced;
    `False` takes the full input and keeps this rank's block.

    `reduce_output=False` returns the partial product x_r W_r^T itself, for a caller that reduces
    it another way: under sequence parallelism the block's reduce-scatter along the sequence
    (g-bar) replaces the all-reduce. A bias (or activation) cannot be applied to a partial sum,
    so the layer must then have neither.
    """

    tensor_parallel_axes = {"weight": 1}             # the bias is replicated

    def __init__(self, dense, group=None, input_is_parallel=True, reduce_output=True):
        super().__init__()
        op = "RowParallelDense"
        _check_dense(op, dense)
        if not reduce_output and (dense.has_bias or dense.activation is not None):
            raise OpValueError(op, "a Dense without bias and activation when reduce_output=False (they "
                               "cannot act on a partial sum)", f"has_bias={dense.has_bias}, "
                               f"activation={type(dense.activation).__name__ if dense.activation else None}")
        self.group, self.tp_size, self.tp_rank = group_info(op, group)
        self.weight = _param(dense.weight, shard(op, "in_channels", dense.weight.asnumpy(), 1,
                                                 self.tp_size, self.tp_rank))
        self.in_channels = dense.in_channels // self.tp_size
        self.split_sizes = split_sizes(dense.in_channels, self.tp_size)
        self.out_channels = dense.out_channels
        self.has_bias = dense.has_bias
        self.bias = _param(dense.bias, dense.bias.asnumpy().copy()) if dense.has_bias else None
        self.activation = dense.activation             # after the sum: the nonlinearity needs all of it
        self.input_is_parallel = bool(input_is_parallel)
        self.reduce_output = bool(reduce_output)
        self.scatter = ScatterToModelParallelRegion(self.group)
        self.reduce = ReduceFromModelParallelRegion(self.group)

    def construct(self, x):
        if not self.input_is_parallel:
            x = self.scatter(x)
        partial = _dense_2d("RowParallelDense", x, self.weight, None, self.in_channels)
        if not self.reduce_output:
            return partial                            # the caller reduces (g-bar under SP)
        y = self.reduce(partial)                      # g: sum the ranks' partial products
        if self.bias is not None:
            y = y + self.bias
        if self.activation is not None:
            y = self.activation(y)
        return y

    def extend_repr(self):
        return (f"input_channels={self.in_channels} (of {self.in_channels * self.tp_size}), "
                f"output_channels={self.out_channels}, rank {self.tp_rank}/{self.tp_size}")


class VocabParallelEmbedding(nn.Cell):
    """`nn.Embedding` with the vocabulary split across ranks: rank r holds rows [start, end) of the
    table, start = r * vocab/p (a vocabulary that does not divide is dealt as `split_sizes`: the
    first vocab % p ranks hold one row more - Megatron pads the vocabulary instead).

    A lookup is masked (ids outside [start, end) read row 0 of the shard, then are zeroed) and the
    ranks' results are summed with `g`: exactly one rank contributes a non-zero row for each id,
    so the sum is exact - the output equals the single-process lookup bit for bit. Backward, each
    rank's shard receives the gradient of the ids it owns (the zeroed rows get none).
    """

    tensor_parallel_axes = {"embedding_table": 0}

    def __init__(self, embedding, group=None):
        super().__init__()
        op = "VocabParallelEmbedding"
        if not isinstance(embedding, nn.Embedding):
            raise OpTypeError(op, "the single-process nn.Embedding to split", type(embedding).__name__)
        if embedding.use_one_hot:
            raise OpValueError(op, "an Embedding with use_one_hot=False", "use_one_hot=True")
        self.group, self.tp_size, self.tp_rank = group_info(op, group)
        table = embedding.embedding_table
        self.embedding_table = _param(table, shard(op, "vocab_size", table.asnumpy(), 0, self.tp_size,
                                                   self.tp_rank, even=False))
        self.vocab_size = embedding.vocab_size                    # the whole vocabulary
        self.embedding_size = embedding.embedding_size
        self.split_sizes = split_sizes(self.vocab_size, self.tp_size)
        self.vocab_start = sum(self.split_sizes[:self.tp_rank])
        self.vocab_end = self.vocab_start + self.split_sizes[self.tp_rank]
        self.reduce = ReduceFromModelParallelRegion(self.group)

    def local_rows(self, ids):
        """The lookup of this rank's shard before the sum: the rows of the ids it owns, zeros for
        the others. Summed over the ranks this is the full lookup: `construct` all-reduces it (g);
        under sequence parallelism the model reduce-scatters it along the sequence instead (each
        rank then receives the finished rows of its own positions only)."""
        op = "VocabParallelEmbedding"
        if not isinstance(ids, Tensor) or ids.dtype.kind not in ("int", "uint"):
            raise OpTypeError(op, "integer ids (a Tensor)", str(getattr(ids, "dtype", type(ids).__name__)))
        mine = F.logical_and(ids >= self.vocab_start, ids < self.vocab_end)
        local_ids = F.where(mine, ids - self.vocab_start, F.zeros_like(ids))
        rows = F.embedding(local_ids, self.embedding_table)
        return rows * F.expand_dims(F.cast(mine, rows.dtype), -1)     # ids another rank owns: 0

    def construct(self, ids):
        return self.reduce(self.local_rows(ids))                     # g: exactly one rank is non-zero

    def extend_repr(self):
        return (f"vocab_size={self.vocab_size}, rows [{self.vocab_start}, {self.vocab_end}) on rank "
                f"{self.tp_rank}/{self.tp_size}, embedding_size={self.embedding_size}")


# -------------------------------------------------------------------------------------------------
# the loss over vocabulary-parallel logits
_REDUCERS: dict = {}


def _reduce_cell(group):
    cell = _REDUCERS.get(group)
    if cell is None:
        cell = _REDUCERS[group] = ReduceFromModelParallelRegion(group)
    return cell


def vocab_parallel_cross_entropy(logits, target, group=None, ignore_index=-100, vocab_start=None):
    """Mean cross-entropy of logits whose vocabulary is split across the ranks of `group` (rank r
    holds columns [vocab_start, vocab_start + k) of every row; default vocab_start = r*k, equal
    slices), without any rank ever holding a full row.

        loss_i = log sum_v exp(z_iv) - z_{i, t_i}

    Three scalars per row cross the ranks instead of the (N, vocab) logits:
    * the row max m_i (all-reduce max), subtracted before exp so nothing overflows - the loss does
      not depend on m_i, so no gradient flows through it;
    * sum_v exp(z_iv - m_i), each rank summing its columns (all-reduce sum, `g`);
    * z_{i, t_i} - m_i, which exactly one rank owns (the others contribute 0; `g` again).
    Autodiff of these gives each rank its columns of (softmax - one_hot) / N, as Megatron's
    hand-written backward does. `target` must be the same on every rank (the whole batch's class
    ids, replicated like the activations); rows equal to `ignore_index` are left out of the mean
    (`ops.cross_entropy`'s rule).
    """
    op = "vocab_parallel_cross_entropy"
    name, size, rank = group_info(op, group)
    if not isinstance(logits, Tensor) or logits.ndim != 2:
        raise OpValueError(op, "logits as a (N, vocab / group size) Tensor",
                           f"shape {tuple(getattr(logits, 'shape', ()))}")
    if not isinstance(target, Tensor) or target.ndim != 1 or target.shape[0] != logits.shape[0] \
            or target.dtype.kind not in ("int", "uint"):
        raise OpValueError(op, f"target as ({logits.shape[0]},) integer class ids",
                           f"{getattr(target, 'dtype', type(target).__name__)} of shape "
                           f"{tuple(getattr(target, 'shape', ()))}")
    if not isinstance(ignore_index, numbers.Integral) or isinstance(ignore_index, bool):
        raise OpTypeError(op, "'ignore_index' as an int", type(ignore_index).__name__)
    k = logits.shape[1]
    start = rank * k if vocab_start is None else int(vocab_start)
    reduce = _reduce_cell(name)
    # 1. the row max over the whole vocabulary (a constant shift: stop_gradient)
    local_max = F.amax(F.stop_gradient(logits), -1, keepdims=True)
    row_max = comm_func.all_reduce(local_max, "max", name)[0]
    shifted = logits - row_max
    # 2. the softmax denominator: each rank sums its columns, g sums the ranks
    sum_exp = reduce(F.sum(F.exp(shifted), -1))
    # 3. the target's (shifted) logit, from the one rank that owns the target's column
    mine = F.logical_and(target >= start, target < start + k)
    local_t = F.where(mine, target - start, F.zeros_like(target))
    picked = F.gather_elements(shifted, 1, F.expand_dims(local_t, -1))[:, 0]
    target_logit = reduce(picked * F.cast(mine, picked.dtype))
    per_row = F.log(sum_exp) - target_logit
    valid = F.cast(target != ignore_index, per_row.dtype)
    return F.sum(per_row * valid) / F.sum(valid)


# -------------------------------------------------------------------------------------------------
# the whole model back on every rank
def gathered_parameters(net) -> dict:
    """{parameter name: full ndarray} for every parameter of `net`: the blocks of a parallel
    layer's parameter all-gathered along the axis they were split on (`tensor_parallel_axes`),
    replicated parameters as they are. The names and shapes are the single-process model's, so
    the result compares with (or loads into) it directly. Collective: every rank of the groups
    must call it, in the same order (the parameters' order, which is the same on every rank)."""
    split = {}
    for _, cell in net.cells_and_names():
        for attr, axis in getattr(type(cell), "tensor_parallel_axes", {}).items():
            p = getattr(cell, attr, None)
            if p is not None:
                split[id(p)] = (cell.group, axis, cell.split_sizes)
    out = {}
    for name, p in net.parameters_and_names():
        if id(p) not in split:
            out[name] = p.asnumpy().copy()
            continue
        group, axis, sizes = split[id(p)]
        # all-gather joins equal blocks along axis 0: move the split axis first, pad to the widest
        blocks = np.moveaxis(p.asnumpy(), axis, 0)
        width = max(sizes)
        padded = np.zeros((width,) + blocks.shape[1:], blocks.dtype)
        padded[:blocks.shape[0]] = blocks
        full = comm_func.all_gather_into_tensor(Tensor(padded), group=group)[0].asnumpy()
        full = np.concatenate([full[r * width:r * width + k] for r, k in enumerate(sizes)], axis=0)
        out[name] = np.moveaxis(full, 0, axis).copy()
    return out


__all__ = ["ColumnParallelDense", "RowParallelDense", "VocabParallelEmbedding", "vocab_parallel_cross_entropy",
           "CopyToModelParallelRegion", "ReduceFromModelParallelRegion", "GatherFromModelParallelRegion",
           "ScatterToModelParallelRegion", "GatherFromSequenceParallelRegion",
           "ReduceScatterToSequenceParallelRegion", "sequence_chunk", "gathered_parameters", "group_info",
           "shard", "split_sizes"]
