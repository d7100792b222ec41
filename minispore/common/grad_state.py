"""The one switch the eager path reads to decide whether to record the autodiff tape.

It sits in `common` so the dispatcher (backend layer) can read it without importing autograd; the
autograd layer installs `record` when it is imported.

`depth` counts the gradient computations currently running their *forward* pass. The tape is
recorded only while depth > 0 (a tape is recorded only when a gradient is requested). The
backward pass of the outermost gradient runs at depth 0, so it records nothing; the backward of
an inner gradient (grad of grad) runs at depth >= 1 and is itself recorded, which is what makes
higher-order gradients work.
"""
depth = 0
record = None          # set by minispore.autograd.tape: record(prim, inputs, attrs, outputs)

# While the PyNative tape runs a backward rule: `(inputs, needs)`, the node's inputs tuple and one
# bool per input, False where the input is untracked (a constant such as a RoPE table, a mask, a
# data batch), so its gradient would be thrown away. Backward rules may skip that work
# (`wants_grad(inputs, i)`) and return None for it. None (the default) means "compute every
# gradient": graph-mode autodiff and direct calls of a rule never set it, and a rule called on any
# other inputs tuple (one rule reusing another) is told to compute everything.
needs_input_grad = None


def wants_grad(inputs, i: int) -> bool:
    """For use inside a backward rule called with `inputs`: is input i's gradient used?"""
    n = needs_input_grad
    return n is None or n[0] is not inputs or n[1][i]
