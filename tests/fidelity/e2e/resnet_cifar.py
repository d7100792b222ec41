"""A small ResNet (BasicBlock, BatchNorm, AdaptiveAvgPool2d) trained on CIFAR-10-format files with a
functional training step (`value_and_grad` + Momentum) — written the way MindSpore's ResNet tutorial
writes it. Runs unchanged on real MindSpore and on minispore.

    --data-dir DIR     a folder with data_batch_1.bin / test_batch.bin (see cifar_files.py)
    --init-ckpt PATH   load the initial weights from PATH if it exists, else save them there
    --record PATH      write the per-step losses as JSON
"""
import argparse
import json
import os

import mindspore as ms
import mindspore.dataset as ds
import mindspore.dataset.vision as vision
from mindspore import nn
from mindspore.dataset import transforms


class BasicBlock(nn.Cell):
    expansion = 1

    def __init__(self, in_channel, out_channel, stride=1, down_sample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channel, out_channel, kernel_size=3, stride=stride, pad_mode="pad", padding=1)
        self.bn1 = nn.BatchNorm2d(out_channel)
        self.conv2 = nn.Conv2d(out_channel, out_channel, kernel_size=3, pad_mode="pad", padding=1)
        self.bn2 = nn.BatchNorm2d(out_channel)
        self.relu = nn.ReLU()
        self.down_sample = down_sample

    def construct(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.down_sample is not None:
            identity = self.down_sample(x)
        return self.relu(out + identity)


class ResNet(nn.Cell):
    def __init__(self, num_classes=10, widths=(8, 16)):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], kernel_size=3, pad_mode="pad", padding=1)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU()
        self.layer1 = BasicBlock(widths[0], widths[0])
        down = nn.SequentialCell([nn.Conv2d(widths[0], widths[1], kernel_size=1, stride=2),
                                  nn.BatchNorm2d(widths[1])])
        self.layer2 = BasicBlock(widths[0], widths[1], stride=2, down_sample=down)
        self.avg_pool = nn.AdaptiveAvgPool2d((1, 1))
        self.flatten = nn.Flatten()
        self.fc = nn.Dense(widths[1], num_classes)

    def construct(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(self.flatten(self.avg_pool(x)))


def create_dataset(data_dir, usage="train", batch_size=16, num_samples=320):
    data_set = ds.Cifar10Dataset(data_dir, usage=usage, num_samples=num_samples, shuffle=False)
    trans = [vision.Rescale(1.0 / 255.0, 0.0),
             vision.Normalize(mean=[0.4914, 0.4822, 0.4465], std=[0.2023, 0.1994, 0.2010]),
             vision.HWC2CHW()]
    data_set = data_set.map(operations=trans, input_columns="image")
    data_set = data_set.map(operations=transforms.TypeCast(ms.int32), input_columns="label")
    return data_set.batch(batch_size, drop_remainder=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--init-ckpt", required=True)
    parser.add_argument("--record", required=True)
    args = parser.parse_args()

    net = ResNet()
    if os.path.exists(args.init_ckpt):
        ms.load_param_into_net(net, ms.load_checkpoint(args.init_ckpt))
    else:
        ms.save_checkpoint(net, args.init_ckpt)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)

    def forward_fn(data, label):
        logits = net(data)
        return loss_fn(logits, label), logits

    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)

    def train_step(data, label):
        (loss, _), grads = grad_fn(data, label)
        optimizer(grads)
        return loss

    net.set_train()
    losses = []
    for step, (data, label) in enumerate(create_dataset(args.data_dir).create_tuple_iterator()):
        loss = train_step(data, label)
        losses.append(float(loss.asnumpy()))
        print(f"step: {step + 1}, loss: {losses[-1]:.6f}")
    with open(args.record, "w") as f:
        json.dump({"losses": losses}, f, indent=1)


if __name__ == "__main__":
    main()
