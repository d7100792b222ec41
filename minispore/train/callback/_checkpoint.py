"""`ModelCheckpoint(prefix="CKP", directory=None, config=CheckpointConfig(...))`: save during training.

File names are MindSpore's: `<prefix>-<epoch>_<step in epoch>.ckpt`, e.g. `lenet-1_10.ckpt`, saved
every `save_checkpoint_steps` steps (counted over all epochs) and once more when training ends (unless
the last step was just saved). In PyNative mode MindSpore writes no `-graph.meta` file, and neither
does minispore. If the directory already holds checkpoints with the same prefix, the prefix gets a
number, as MindSpore does: a second run with prefix "lenet" writes `lenet_1-1_10.ckpt`.

`keep_checkpoint_max` (default 5) keeps only the newest files of this prefix (the oldest by
modification time is deleted before a new one is written); with `keep_checkpoint_max=0`,
`keep_checkpoint_per_n_minutes` keeps one file per that many minutes instead. What is saved is the
*train network* (`cb_params.train_network`: the parameters and the optimizer state such as
`moments.*` and `learning_rate`), or `config.saved_network` if given. `append_info=["epoch_num",
"step_num", {"name": value}]` adds those values to every file.
"""
from __future__ import annotations

import numbers
import os
import stat
import time

from ...common.errors import OpTypeError, OpValueError
from ._callback import Callback
from ._checks import bool_arg, int_arg

_INFO_NAMES = ("epoch_num", "step_num")


def _optional_count(name, value):
    return None if value is None else int_arg("CheckpointConfig", name, value, 0)


class CheckpointConfig:
    """When to save, how many files to keep, and what to put in them (MindSpore's arguments)."""

    def __init__(self, save_checkpoint_steps=1, save_checkpoint_seconds=0, keep_checkpoint_max=5,
                 keep_checkpoint_per_n_minutes=0, integrated_save=True, async_save=False, saved_network=None,
                 append_info=None, enc_key=None, enc_mode="AES-GCM", exception_save=False, crc_check=False,
                 remove_redundancy=False, format="ckpt", **kwargs):
        op = "CheckpointConfig"
        save_checkpoint_steps = _optional_count("save_checkpoint_steps", save_checkpoint_steps)
        save_checkpoint_seconds = _optional_count("save_checkpoint_seconds", save_checkpoint_seconds)
        keep_checkpoint_max = _optional_count("keep_checkpoint_max", keep_checkpoint_max)
        keep_checkpoint_per_n_minutes = _optional_count("keep_checkpoint_per_n_minutes",
                                                        keep_checkpoint_per_n_minutes)
        if saved_network is not None and not callable(getattr(saved_network, "parameters_and_names", None)):
            raise OpTypeError(op, "'saved_network' to be None or a Cell", type(saved_network).__name__)
        if not (save_checkpoint_steps or save_checkpoint_seconds or keep_checkpoint_max
                or keep_checkpoint_per_n_minutes):
            raise OpValueError(op, "one of save_checkpoint_steps, save_checkpoint_seconds, keep_checkpoint_max, "
                               "keep_checkpoint_per_n_minutes to be positive", "all None or 0")
        if format not in ("ckpt", "safetensors"):
            raise OpValueError(op, "'format' in ('ckpt', 'safetensors')", repr(format))
        if enc_key is not None:
            raise OpValueError(op, "enc_key=None (minispore does not implement checkpoint encryption)",
                               f"{type(enc_key).__name__}")
        self.exception_save = bool_arg(op, "exception_save", exception_save)
        # a step interval wins over a time interval; a file count wins over keep-per-minutes
        self._save_checkpoint_steps = save_checkpoint_steps
        self._save_checkpoint_seconds = None if save_checkpoint_steps else save_checkpoint_seconds
        self._keep_checkpoint_max = keep_checkpoint_max
        self._keep_checkpoint_per_n_minutes = keep_checkpoint_per_n_minutes
        if keep_checkpoint_max:
            self._keep_checkpoint_per_n_minutes = None
        elif not keep_checkpoint_per_n_minutes:
            self._keep_checkpoint_max = 1
        self._integrated_save = bool_arg(op, "integrated_save", integrated_save)
        if not (isinstance(async_save, bool) or async_save in ("thread", "process")):
            raise OpValueError(op, "'async_save' to be a bool, 'thread' or 'process'", repr(async_save))
        self._async_save = async_save
        self._saved_network = saved_network
        self._append_dict = self._handle_append_info(append_info)
        self._enc_key, self._enc_mode = enc_key, enc_mode
        self._crc_check = bool_arg(op, "crc_check", crc_check)
        self._format = format
        self.remove_redundancy = bool_arg(op, "remove_redundancy", remove_redundancy)

    save_checkpoint_steps = property(lambda self: self._save_checkpoint_steps)
    save_checkpoint_seconds = property(lambda self: self._save_checkpoint_seconds)
    keep_checkpoint_max = property(lambda self: self._keep_checkpoint_max)
    keep_checkpoint_per_n_minutes = property(lambda self: self._keep_checkpoint_per_n_minutes)
    integrated_save = property(lambda self: self._integrated_save)
    async_save = property(lambda self: self._async_save)
    saved_network = property(lambda self: self._saved_network)
    enc_key = property(lambda self: self._enc_key)
    enc_mode = property(lambda self: self._enc_mode)
    crc_check = property(lambda self: self._crc_check)
    format = property(lambda self: self._format)
    append_dict = property(lambda self: self._append_dict)

    def get_checkpoint_policy(self):
        return {"save_checkpoint_steps": self.save_checkpoint_steps,
                "save_checkpoint_seconds": self.save_checkpoint_seconds,
                "keep_checkpoint_max": self.keep_checkpoint_max,
                "keep_checkpoint_per_n_minutes": self.keep_checkpoint_per_n_minutes,
                "saved_network": self.saved_network}

    @staticmethod
    def _handle_append_info(append_info):
        op = "CheckpointConfig"
        if append_info is None or append_info == []:
            return None
        if not isinstance(append_info, list):
            raise OpTypeError(op, "'append_info' to be a list", type(append_info).__name__)
        out = {name: 0 for name in _INFO_NAMES if name in append_info}
        dicts = 0
        for element in append_info:
            if isinstance(element, str):
                if element not in _INFO_NAMES:
                    raise OpValueError(op, f"'append_info' strings in {list(_INFO_NAMES)}", repr(element))
            elif isinstance(element, dict):
                dicts += 1
                if dicts > 1:
                    raise OpTypeError(op, "at most one dict in 'append_info'", f"{dicts} dicts")
                for key, value in element.items():
                    if not isinstance(key, str) or not (isinstance(value, (numbers.Number, str))
                                                        or hasattr(value, "asnumpy")):
                        raise OpTypeError(op, "'append_info' dict of str -> int/float/bool/str/Tensor",
                                          f"{type(key).__name__} -> {type(value).__name__}")
                    out[key] = value
            else:
                raise OpTypeError(op, "'append_info' elements to be str or dict", type(element).__name__)
        return out


def _chg_ckpt_file_name_if_same_exist(directory, prefix):
    """MindSpore's rule: if `<prefix>-*.ckpt` or `<prefix>_<n>-*.ckpt` files exist, use `<prefix>_<n+1>`."""
    suffix_num = 0
    for filename in os.listdir(directory):
        if os.path.splitext(filename)[-1] not in (".ckpt", ".safetensors") or filename.endswith("_breakpoint.ckpt"):
            continue
        if filename.startswith(prefix) and len(filename) > len(prefix) and not filename[len(prefix)].isalpha():
            rest = filename[len(prefix):]
            index = rest.find("-")
            if index == 0:
                suffix_num = max(suffix_num, 1)
            elif index != -1 and rest[1:index].isdigit():
                suffix_num = max(suffix_num, int(rest[1:index]) + 1)
    return f"{prefix}_{suffix_num}" if suffix_num else prefix


class ModelCheckpoint(Callback):
    def __init__(self, prefix="CKP", directory=None, config=None):
        super().__init__()
        op = "ModelCheckpoint"
        if not callable(prefix) and (not isinstance(prefix, str) or "/" in prefix):
            raise OpValueError(op, "'prefix' as a str without '/' (or a callable)", repr(prefix))
        self._prefix_func = prefix if callable(prefix) else None
        self._directory_func = directory if callable(directory) else None
        self._prefix = prefix
        if directory is None:
            self._directory = os.getcwd()
        elif not callable(directory):
            if not isinstance(directory, (str, os.PathLike)):
                raise OpTypeError(op, "'directory' to be a str path (or a callable)", type(directory).__name__)
            self._directory = os.path.realpath(os.fspath(directory))
            os.makedirs(self._directory, exist_ok=True)
        if config is None:
            config = CheckpointConfig()
        elif not isinstance(config, CheckpointConfig):
            raise OpTypeError(op, "'config' to be a CheckpointConfig", type(config).__name__)
        self._config = config
        if not callable(directory) and not callable(prefix):
            self._prefix = _chg_ckpt_file_name_if_same_exist(self._directory, self._prefix)
        self._append_dict = dict(config.append_dict or {})
        self._append_epoch_num = self._append_dict.get("epoch_num", 0)
        self._append_step_num = self._append_dict.get("step_num", 0)
        self._latest_ckpt_file_name = ""
        self._last_triggered_step = 0
        self._last_time = self._last_time_for_keep = time.time()

    @property
    def latest_ckpt_file_name(self):
        return self._latest_ckpt_file_name

    def step_end(self, run_context):
        cb_params = run_context.original_args()
        if self._prefix_func:
            self._prefix = self._prefix_func(cb_params)
            if not isinstance(self._prefix, str) or "/" in self._prefix:
                raise OpValueError("ModelCheckpoint", "the 'prefix' callable to return a str without '/'",
                                   repr(self._prefix))
        if self._directory_func:
            self._directory = os.path.realpath(os.fspath(self._directory_func(cb_params)))
            os.makedirs(self._directory, exist_ok=True)
        self._save_ckpt(cb_params)

    def end(self, run_context):
        self._save_ckpt(run_context.original_args(), force_to_save=True)

    def _due(self, cb_params, force_to_save):
        cfg = self._config
        if cfg.save_checkpoint_steps:
            return force_to_save or cb_params.cur_step_num >= self._last_triggered_step + cfg.save_checkpoint_steps
        if cfg.save_checkpoint_seconds:
            now = time.time()
            if now - self._last_time > cfg.save_checkpoint_seconds or force_to_save:
                self._last_time = now
                return True
        return False

    def _own_files(self):
        """This prefix's checkpoints in the directory (`<prefix>-<digits and _>.<format>`)."""
        fmt = "." + self._config.format
        found = []
        for filename in os.listdir(self._directory):
            if filename.endswith(fmt) and filename.startswith(self._prefix + "-"):
                middle = filename[len(self._prefix):-len(fmt)]
                if not any(ch.isalpha() for ch in middle):
                    found.append(os.path.join(self._directory, filename))
        return found

    @staticmethod
    def _remove(path):
        try:
            os.chmod(path, stat.S_IWRITE)      # MindSpore (and minispore) leave checkpoints read-only
            os.remove(path)
        except OSError:
            pass

    def _prune(self):
        cfg = self._config
        files = self._own_files()
        if cfg.keep_checkpoint_max and 0 < cfg.keep_checkpoint_max <= len(files):
            self._remove(min(files, key=os.path.getmtime))
        elif cfg.keep_checkpoint_per_n_minutes:
            now = time.time()
            if now - self._last_time_for_keep < cfg.keep_checkpoint_per_n_minutes * 60:
                recent = [f for f in files if now - os.path.getmtime(f) < 60 * cfg.keep_checkpoint_per_n_minutes]
                oldest = min(recent, key=os.path.getmtime) if recent else None
                for f in recent:
                    if f != oldest:
                        self._remove(f)

    def _save_ckpt(self, cb_params, force_to_save=False):
        from ..serialization import save_checkpoint
        if cb_params.cur_step_num == self._last_triggered_step or not self._due(cb_params, force_to_save):
            return
        cfg = self._config
        step_in_epoch = int((cb_params.cur_step_num - 1) % cb_params.batch_num + 1)
        if self._prefix_func:
            name = f"{self._prefix}.{cfg.format}"
        else:
            name = f"{self._prefix}-{cb_params.cur_epoch_num}_{step_in_epoch}.{cfg.format}"
        self._prune()
        path = os.path.join(self._directory, name)
        self._last_time_for_keep = time.time()
        self._last_triggered_step = cb_params.cur_step_num
        if "epoch_num" in self._append_dict:
            self._append_dict["epoch_num"] = self._append_epoch_num + cb_params.cur_epoch_num
        if "step_num" in self._append_dict:
            self._append_dict["step_num"] = self._append_step_num + cb_params.cur_step_num
        network = cfg.saved_network if cfg.saved_network is not None else cb_params.train_network
        save_checkpoint(network, path, cfg.integrated_save, cfg.async_save, self._append_dict or None,
                        crc_check=cfg.crc_check, format=cfg.format)
        self._latest_ckpt_file_name = path

    @property
    def _get_save_checkpoint_steps(self):
        return self._config.save_checkpoint_steps

    @property
    def _get_last_trigger_step(self):
        return self._last_triggered_step
