"""The top-level `mindspore` namespace: 2.6+ context setters, seeds, and the training API names
MindSpore re-exports there."""
import numpy as np

from msdiff import case


@case("toplevel/set_device_and_deterministic")
def _(ms):
    # (MindSpore refuses a second set_deterministic in one process, so this case calls it once)
    ms.set_deterministic(True)
    return ms.get_context("device_target"), ms.get_context("deterministic")


@case("toplevel/set_device_rejects_an_int", raises=True)
def _(ms):
    ms.set_device(3)


@case("toplevel/manual_seed_and_initial_seed")
def _(ms):
    ms.manual_seed(5)
    return ms.initial_seed()


@case("toplevel/is_tensor")
def _(ms):
    p = ms.Parameter(ms.Tensor(np.ones(2, np.float32)), name="p")
    return ms.is_tensor(ms.Tensor(1.0)), ms.is_tensor(p), ms.is_tensor(np.ones(2)), ms.is_tensor(1)


@case("toplevel/training_api_names")
def _(ms):
    names = ["Model", "LossMonitor", "TimeMonitor", "ModelCheckpoint", "CheckpointConfig", "Callback", "RunContext",
             "Accuracy", "Loss", "MAE", "MSE", "EarlyStopping", "History", "LambdaCallback",
             "DynamicLossScaleManager", "FixedLossScaleManager", "build_train_network", "Top1CategoricalAccuracy"]
    return [n for n in names if not hasattr(ms, n)]


@case("toplevel/accuracy_metric_from_top_level")
def _(ms):
    m = ms.Accuracy()
    m.clear()
    m.update(ms.Tensor(np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]], np.float32)), ms.Tensor(np.array([1, 1, 1])))
    return m.eval()


@case("toplevel/dtype_names")
def _(ms):
    return [str(d) for d in (ms.float16, ms.float32, ms.float64, ms.bfloat16, ms.int8, ms.int16, ms.int32, ms.int64,
                             ms.uint8, ms.uint16, ms.uint32, ms.uint64, ms.bool_)]


@case("toplevel/dtype_to_nptype")
def _(ms):
    return [str(np.dtype(ms.dtype_to_nptype(d))) for d in (ms.float16, ms.float32, ms.int32, ms.int64, ms.bool_)]


@case("toplevel/grad_and_value_and_grad_at_top_level")
def _(ms):
    f = lambda x: (x * x).sum()
    x = ms.Tensor(np.array([1.0, 2.0], np.float32))
    v, g = ms.value_and_grad(f)(x)
    return v, g, ms.grad(f)(x)


def _affine(x):
    return x * 2 + 1


@case("toplevel/jit_at_top_level")
def _(ms):
    return ms.jit(_affine)(ms.Tensor(np.array([1.0, 2.0], np.float32)))
