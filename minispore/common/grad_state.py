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
