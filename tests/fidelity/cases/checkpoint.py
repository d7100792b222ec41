"""Checkpoints as a MindSpore script uses them: save_checkpoint / load_checkpoint /
load_param_into_net round trips in a temporary directory, the file names created, the returned
names, dtypes and requires_grad, and what load_param_into_net reports.

Left out on purpose (see the final report / Differences page): after the prefix fallback
(a dict with `backbone.fc.weight` loaded into a net with `fc.weight`), MindSpore 2.10 still lists
the prefixed names in `ckpt_not_load` although it loaded them; minispore reports only the names it
did not use. safetensors loads name their Parameters `Parameter#N` in MindSpore (a process-wide
counter); minispore names them by key. Both are compared here only where they agree.
"""
import os
import tempfile

import numpy as np

from msdiff import case, fill_params, rand


class _Temp:
    """A temporary directory for one case (files MindSpore writes are read-only; removal is fine)."""

    def __enter__(self):
        self._d = tempfile.TemporaryDirectory()
        return self._d.name

    def __exit__(self, *exc):
        self._d.cleanup()


def _two_layers(ms, seed=0):
    nn = ms.nn

    class TwoLayer(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Dense(3, 4)
            self.fc2 = nn.Dense(4, 2)

        def construct(self, x):
            return self.fc2(ms.ops.relu(self.fc1(x)))

    return fill_params(ms, TwoLayer(), seed)


def _summary(param_dict):
    """What a user inspects: key, Parameter name, dtype, shape, requires_grad, values."""
    return [(k, v) if isinstance(v, str) else (k, v.name, v.dtype, tuple(v.shape), v.requires_grad, v)
            for k, v in param_dict.items()]


@case("checkpoint/default_format_file_names")
def _(ms):
    net = _two_layers(ms)
    with _Temp() as d:
        for name in ["net", "net.ckpt", "netckpt", "a.b", "model.safetensors"]:
            ms.save_checkpoint(net, os.path.join(d, name))
        return sorted(os.listdir(d))


@case("checkpoint/safetensors_file_names")
def _(ms):
    net = _two_layers(ms)
    with _Temp() as d:
        for name in ["s", "s.safetensors", "s.ckpt"]:
            ms.save_checkpoint(net, os.path.join(d, name), format="safetensors")
        return sorted(os.listdir(d))


@case("checkpoint/round_trip_names_dtypes_values")
def _(ms):
    net = _two_layers(ms)
    with _Temp() as d:
        path = os.path.join(d, "net.ckpt")
        ms.save_checkpoint(net, path)
        return _summary(ms.load_checkpoint(path))


@case("checkpoint/load_param_into_net_returns_two_lists")
def _(ms):
    with _Temp() as d:
        path = os.path.join(d, "net.ckpt")
        ms.save_checkpoint(_two_layers(ms, 1), path)
        dst = _two_layers(ms, 2)
        result = ms.load_param_into_net(dst, ms.load_checkpoint(path))
        return result, dst.fc1.weight, dst.fc2.bias


@case("checkpoint/append_dict_types")
def _(ms):
    net = _two_layers(ms)
    with _Temp() as d:
        path = os.path.join(d, "a.ckpt")
        ms.save_checkpoint(net, path, append_dict={"epoch_num": 5, "lr": 0.01, "is_best": True,
                                                   "note": "run 1", "scale": ms.Tensor(np.ones(2, np.float16))})
        loaded = ms.load_checkpoint(path)
        return [k for k in loaded], _summary({k: loaded[k] for k in ["epoch_num", "lr", "is_best", "note", "scale"]})


@case("checkpoint/ckpt_not_load_lists_extras_in_file_order")
def _(ms):
    with _Temp() as d:
        path = os.path.join(d, "a.ckpt")
        ms.save_checkpoint(_two_layers(ms), path, append_dict={"step_num": 7, "tag": "x", "epoch_num": 1})
        return ms.load_param_into_net(_two_layers(ms, 3), ms.load_checkpoint(path))


@case("checkpoint/filter_prefix_then_param_not_load")
def _(ms):
    with _Temp() as d:
        path = os.path.join(d, "n.ckpt")
        ms.save_checkpoint(_two_layers(ms), path)
        param_dict = ms.load_checkpoint(path, filter_prefix="fc1")
        return list(param_dict), ms.load_param_into_net(_two_layers(ms, 4), param_dict)


@case("checkpoint/specify_prefix_and_filter_prefix_lists")
def _(ms):
    with _Temp() as d:
        path = os.path.join(d, "n.ckpt")
        ms.save_checkpoint(_two_layers(ms), path)
        return (list(ms.load_checkpoint(path, specify_prefix="fc2")),
                list(ms.load_checkpoint(path, specify_prefix=["fc1", "fc2.bias"], filter_prefix=("fc1.bias",))),
                list(ms.load_checkpoint(path, filter_prefix=["fc1.weight", "fc2"])))


@case("checkpoint/prefix_arguments_override_choice_func")
def _(ms):
    with _Temp() as d:
        path = os.path.join(d, "n.ckpt")
        ms.save_checkpoint(_two_layers(ms), path)
        return (list(ms.load_checkpoint(path, choice_func=lambda n: n.endswith("bias"))),
                list(ms.load_checkpoint(path, specify_prefix="fc1", choice_func=lambda n: n.endswith("bias"))))


@case("checkpoint/choice_func_on_save")
def _(ms):
    with _Temp() as d:
        path = os.path.join(d, "c.ckpt")
        ms.save_checkpoint(_two_layers(ms), path, choice_func=lambda n: n.startswith("fc2"))
        return _summary(ms.load_checkpoint(path))


@case("checkpoint/save_trainable_params_list")
def _(ms):
    net = _two_layers(ms)
    with _Temp() as d:
        ms.save_checkpoint(net.trainable_params(), os.path.join(d, "params"),
                           choice_func=lambda n: "weight" in n)
        return sorted(os.listdir(d)), _summary(ms.load_checkpoint(os.path.join(d, "params.ckpt")))


@case("checkpoint/save_list_of_dicts_bf16_int64_fp16")
def _(ms):
    data = [{"name": "w16", "data": ms.Tensor(rand(2, 3, seed=1), ms.float16)},
            {"name": "wbf", "data": ms.Tensor(np.array([1.0, -2.5, 0.15625], np.float32), ms.bfloat16)},
            {"name": "count", "data": ms.Tensor(np.array([3, -1, 2**40], np.int64))},
            {"name": "step", "data": ms.Tensor(np.array(9, np.int32))}]
    with _Temp() as d:
        path = os.path.join(d, "l.ckpt")
        ms.save_checkpoint(data, path)
        return _summary(ms.load_checkpoint(path))


@case("checkpoint/loaded_dict_saves_again_with_a_string")
def _(ms):
    with _Temp() as d:
        first, second = os.path.join(d, "1.ckpt"), os.path.join(d, "2.ckpt")
        ms.save_checkpoint(_two_layers(ms), first, append_dict={"note": "hello"})
        ms.save_checkpoint(ms.load_checkpoint(first), second)
        return _summary(ms.load_checkpoint(second))


@case("checkpoint/fp16_checkpoint_loads_into_fp32_net")
def _(ms):
    with _Temp() as d:
        path = os.path.join(d, "h.ckpt")
        ms.save_checkpoint([{"name": "fc1.weight", "data": ms.Tensor(rand(4, 3, seed=5), ms.float16)}], path)
        net = _two_layers(ms)
        result = ms.load_param_into_net(net, ms.load_checkpoint(path))
        return result, net.fc1.weight.dtype, net.fc1.weight


@case("checkpoint/strict_load_rejects_a_dtype_difference", raises=True)
def _(ms):
    with _Temp() as d:
        path = os.path.join(d, "h.ckpt")
        ms.save_checkpoint([{"name": "fc1.weight", "data": ms.Tensor(rand(4, 3, seed=5), ms.float16)}], path)
        ms.load_param_into_net(_two_layers(ms), ms.load_checkpoint(path), strict_load=True)


@case("checkpoint/shape_mismatch_raises", raises=True)
def _(ms):
    with _Temp() as d:
        path = os.path.join(d, "s.ckpt")
        ms.save_checkpoint([{"name": "fc1.weight", "data": ms.Tensor(rand(3, 4, seed=5))}], path)
        ms.load_param_into_net(_two_layers(ms), ms.load_checkpoint(path))


@case("checkpoint/load_needs_the_format_suffix", raises=True)
def _(ms):
    with _Temp() as d:
        ms.save_checkpoint(_two_layers(ms), os.path.join(d, "w.safetensors"), format="safetensors")
        ms.load_checkpoint(os.path.join(d, "w.safetensors"))          # default format is ckpt


@case("checkpoint/missing_file_raises", raises=True)
def _(ms):
    with _Temp() as d:
        ms.load_checkpoint(os.path.join(d, "absent.ckpt"))


@case("checkpoint/everything_filtered_out_raises", raises=True)
def _(ms):
    with _Temp() as d:
        path = os.path.join(d, "n.ckpt")
        ms.save_checkpoint(_two_layers(ms), path)
        ms.load_checkpoint(path, choice_func=lambda n: False)


@case("checkpoint/prefix_fallback_loads_values")
def _(ms):
    nn = ms.nn

    class Wrapper(nn.Cell):
        def __init__(self):
            super().__init__()
            self.backbone = _two_layers(ms, 6)

    with _Temp() as d:
        path = os.path.join(d, "w.ckpt")
        ms.save_checkpoint(Wrapper(), path)
        net = _two_layers(ms, 7)
        param_not_load, _ = ms.load_param_into_net(net, ms.load_checkpoint(path))
        strict_not_load, _ = ms.load_param_into_net(_two_layers(ms, 7), ms.load_checkpoint(path), strict_load=True)
        return param_not_load, strict_not_load, net.fc1.weight, net.fc2.bias


@case("checkpoint/string_value_under_a_parameter_name_is_skipped")
def _(ms):
    net = _two_layers(ms)
    param_dict = {"fc1.weight": "not a tensor",
                  "fc1.bias": ms.Parameter(ms.Tensor(np.ones(4, np.float32)), name="renamed"),
                  "extra": ms.Parameter(ms.Tensor(np.zeros(1, np.float32)), name="extra")}
    result = ms.load_param_into_net(net, param_dict)
    return result, net.fc1.bias


@case("checkpoint/crc_round_trip")
def _(ms):
    with _Temp() as d:
        path = os.path.join(d, "c.ckpt")
        ms.save_checkpoint(_two_layers(ms), path, crc_check=True)
        return _summary(ms.load_checkpoint(path, crc_check=True))


@case("checkpoint/safetensors_round_trip_sorted_keys")
def _(ms):
    with _Temp() as d:
        path = os.path.join(d, "n.safetensors")
        ms.save_checkpoint(_two_layers(ms), path, format="safetensors")
        loaded = ms.load_checkpoint(path, format="safetensors")
        return [(k, v.dtype, tuple(v.shape), v.requires_grad, v) for k, v in loaded.items()]


@case("checkpoint/load_checkpoint_with_net")
def _(ms):
    with _Temp() as d:
        path = os.path.join(d, "n.ckpt")
        ms.save_checkpoint(_two_layers(ms, 8), path)
        net = _two_layers(ms, 9)
        loaded = ms.load_checkpoint(path, net=net)
        return list(loaded), net.fc1.weight, net.fc2.weight


@case("checkpoint/optimizer_state_names_and_dtypes")
def _(ms):
    nn = ms.nn
    net = fill_params(ms, nn.Dense(3, 2), 0)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.Adam(net.trainable_params(), learning_rate=0.01))
    x, y = ms.Tensor(rand(4, 3, seed=2)), ms.Tensor(rand(4, 2, seed=3))
    step(x, y)
    with _Temp() as d:
        path = os.path.join(d, "t.ckpt")
        ms.save_checkpoint(step, path, append_dict={"epoch_num": 1})
        loaded = ms.load_checkpoint(path)
        return [(k, v.dtype) for k, v in loaded.items()], loaded["moment1.weight"], loaded["global_step"]
