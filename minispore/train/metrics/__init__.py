"""Evaluation metrics (MindSpore's `mindspore.train.metrics`): `Metric` with `clear/update/eval`.

`Model(..., metrics={"acc", "loss"})` builds metrics by name (`names()` lists them); a dict
`{"my name": Accuracy()}` names them yourself.
"""
from __future__ import annotations

from ...common.errors import OpTypeError, OpValueError
from .accuracy import Accuracy
from .error import MAE, MSE
from .loss import Loss
from .metric import EvaluationBase, Metric, rearrange_inputs
from .precision_recall import F1, Fbeta, Precision, Recall
from .topk import Top1CategoricalAccuracy, Top5CategoricalAccuracy, TopKCategoricalAccuracy

__factory__ = {
    "accuracy": Accuracy,
    "acc": Accuracy,
    "precision": Precision,
    "recall": Recall,
    "F1": F1,
    "topk": TopKCategoricalAccuracy,
    "top_1_accuracy": Top1CategoricalAccuracy,
    "top_5_accuracy": Top5CategoricalAccuracy,
    "mae": MAE,
    "mse": MSE,
    "loss": Loss,
}


def names():
    """The metric names `get_metric_fn` (and `Model(metrics={...})`) accept."""
    return sorted(__factory__)


def get_metric_fn(name, *args, **kwargs):
    """A new metric object by name: `get_metric_fn("acc")` is `Accuracy()`."""
    if name not in __factory__:
        raise OpValueError("get_metric_fn", f"a metric name in {names()}", repr(name))
    return __factory__[name](*args, **kwargs)


def get_metrics(metrics):
    """`Model`'s `metrics` argument as `{name: Metric}`: None, a dict of Metric, or a set of names."""
    if metrics is None:
        return None
    if isinstance(metrics, dict):
        for name, metric in metrics.items():
            if not isinstance(name, str) or not isinstance(metric, Metric):
                raise OpTypeError("Model", "'metrics' dict of str -> Metric",
                                  f"{type(name).__name__} -> {type(metric).__name__}")
        return metrics
    if isinstance(metrics, set):
        return {name: get_metric_fn(name) for name in metrics}
    raise OpTypeError("Model", "'metrics' to be None, a dict or a set", type(metrics).__name__)


__all__ = ["names", "get_metric_fn", "get_metrics", "Metric", "EvaluationBase", "rearrange_inputs", "Accuracy",
           "MAE", "MSE", "Loss", "Precision", "Recall", "Fbeta", "F1", "TopKCategoricalAccuracy",
           "Top1CategoricalAccuracy", "Top5CategoricalAccuracy"]
