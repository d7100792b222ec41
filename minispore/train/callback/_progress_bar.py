"""`ProgressBar(per_print_times=1, desc="epoch", file=None, leave=True)`: a tqdm progress bar over training steps (a
minispore extra; MindSpore has no tqdm callback).

    model.train(3, ds, callbacks=[minispore.train.ProgressBar()])
    # epoch 1/3: 100%|██████████| 47/47 [00:02<00:00, 21.3step/s, loss=0.512]

One bar per epoch, advanced at every step end; the postfix shows the latest loss every
`per_print_times` steps. The bar writes to stderr (tqdm's default) unless `file=` is given, so it
does not mix with LossMonitor's stdout lines.
"""
from __future__ import annotations

from tqdm import tqdm

from ._callback import Callback, _handle_loss
from ._checks import int_arg


class ProgressBar(Callback):
    def __init__(self, per_print_times=1, desc="epoch", file=None, leave=True):
        super().__init__()
        self.per_print_times = int_arg("ProgressBar", "per_print_times", per_print_times, 1)
        self.desc, self.file, self.leave = desc, file, leave
        self._bar = None

    def on_train_epoch_begin(self, run_context):
        cb = run_context.original_args()
        self._close()
        self._bar = tqdm(total=cb.batch_num, desc=f"{self.desc} {cb.cur_epoch_num}/{cb.epoch_num}",
                               unit="step", file=self.file, leave=self.leave)

    def on_train_step_end(self, run_context):
        cb = run_context.original_args()
        if self._bar is None:
            return
        self._bar.update(1)
        if cb.cur_step_num % self.per_print_times == 0:
            loss = _handle_loss(cb.get("net_outputs"))
            self._bar.set_postfix(loss=f"{float(loss):.4g}" if loss is not None else "?")

    def on_train_epoch_end(self, run_context):
        self._close()

    def on_train_end(self, run_context):
        self._close()

    def __exit__(self, *err):
        self._close()

    def _close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
