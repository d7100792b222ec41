"""`History()`: record the network output (the loss) and any evaluation metrics at every epoch end.

After `model.train(...)`, `history.history` is `{"net_output": [loss of each epoch's last step, ...],
<metric name>: [...]}` and `history.epoch` is `{"epoch": [1, 2, ...]}`. The loss is `np.mean` of the
last step's output (a NumPy scalar of the loss dtype), as MindSpore records it.
"""
from __future__ import annotations

import numpy as np

from ...common.tensor import Tensor
from ._callback import Callback


class History(Callback):
    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = None

    def begin(self, run_context):
        self.epoch = {"epoch": []}

    def epoch_end(self, run_context):
        cb_params = run_context.original_args()
        self.epoch["epoch"].append(cb_params.get("cur_epoch_num", 1))
        net_output = cb_params.get("net_outputs")
        if isinstance(net_output, (tuple, list)) and net_output and isinstance(net_output[0], Tensor):
            net_output = net_output[0]
        if isinstance(net_output, Tensor):
            net_output = np.mean(net_output.asnumpy())
        current = {"net_output": net_output}
        current.update(cb_params.get("metrics") or {})
        for key, value in current.items():
            self.history.setdefault(key, []).append(value)
