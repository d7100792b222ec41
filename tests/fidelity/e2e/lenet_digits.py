"""LeNet-5 with BatchNorm on scikit-learn's 8x8 digits, trained with `Model.train` — written the way
MindSpore's quick-start tutorial writes it. It runs unchanged on real MindSpore and on minispore
(`python -m minispore.mindspore_compat lenet_digits.py ...`).

    --init-ckpt PATH   load the initial weights from PATH if it exists, else save them there
    --record PATH      write the per-step losses and the evaluation result as JSON
"""
import argparse
import json
import os

import numpy as np
from sklearn.datasets import load_digits

import mindspore as ms
import mindspore.dataset as ds
from mindspore import nn
from mindspore.dataset import transforms
from mindspore.train import Callback, LossMonitor, Model


class LeNet5(nn.Cell):
    """LeNet-5 sized for 8x8 inputs, with a BatchNorm after each convolution."""

    def __init__(self, num_class=10, num_channel=1):
        super().__init__()
        self.conv1 = nn.Conv2d(num_channel, 6, 3, pad_mode="same")
        self.bn1 = nn.BatchNorm2d(6)
        self.conv2 = nn.Conv2d(6, 16, 3, pad_mode="valid")
        self.bn2 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU()
        self.max_pool2d = nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(16 * 2 * 2, 120)
        self.fc2 = nn.Dense(120, 84)
        self.fc3 = nn.Dense(84, num_class)

    def construct(self, x):
        x = self.max_pool2d(self.relu(self.bn1(self.conv1(x))))
        x = self.relu(self.bn2(self.conv2(x)))
        x = self.flatten(x)
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return self.fc3(x)


class LossRecorder(Callback):
    """Keeps the loss of every step (LossMonitor prints it; this keeps it)."""

    def __init__(self):
        super().__init__()
        self.losses = []

    def on_train_step_end(self, run_context):
        cb_params = run_context.original_args()
        loss = cb_params.net_outputs
        if isinstance(loss, (tuple, list)):
            loss = loss[0]
        self.losses.append(float(loss.asnumpy()))


def create_dataset(images, labels, batch_size=32):
    dataset = ds.NumpySlicesDataset({"image": images, "label": labels}, shuffle=False)
    dataset = dataset.map(operations=transforms.TypeCast(ms.int32), input_columns="label")
    return dataset.batch(batch_size, drop_remainder=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--init-ckpt", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    labels = digits.target.astype(np.int64)
    n_train = 32 * args.steps
    train_set = create_dataset(images[:n_train], labels[:n_train])
    test_set = create_dataset(images[1400:1784], labels[1400:1784])

    net = LeNet5()
    if os.path.exists(args.init_ckpt):
        ms.load_param_into_net(net, ms.load_checkpoint(args.init_ckpt))
    else:
        ms.save_checkpoint(net, args.init_ckpt)

    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    model = Model(net, loss_fn=loss_fn, optimizer=optimizer, metrics={"accuracy"})
    recorder = LossRecorder()
    model.train(1, train_set, callbacks=[LossMonitor(), recorder], dataset_sink_mode=False)
    result = model.eval(test_set, dataset_sink_mode=False)
    print("eval:", result)
    with open(args.record, "w") as f:
        json.dump({"losses": recorder.losses, "eval": {k: float(v) for k, v in result.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
