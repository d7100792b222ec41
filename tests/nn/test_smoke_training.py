"""End-to-end training in PyNative: an MLP on spirals, a small CNN on synthetic bar images, and the
exact wiring (trainable_params -> value_and_grad -> optimizer) against a NumPy float64 loop."""
import numpy as np

import minispore as ms
from minispore import nn


def spirals(n_per_class, seed, noise=0.15):
    r = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(2):
        t = np.sqrt(r.uniform(0, 1, n_per_class)) * 3 * np.pi           # 1.5 turns per arm
        arm = np.stack([t * np.cos(t + c * np.pi), t * np.sin(t + c * np.pi)], 1) / (3 * np.pi)
        xs.append(arm + r.normal(scale=noise / (3 * np.pi) * 3, size=arm.shape))
        ys.append(np.full(n_per_class, c))
    x = np.concatenate(xs).astype(np.float32)
    y = np.concatenate(ys).astype(np.int32)
    perm = r.permutation(len(y))
    return x[perm], y[perm]


def accuracy(net, x, y):
    net.set_train(False)
    return float((net(ms.Tensor(x)).asnumpy().argmax(-1) == y).mean())


def test_mlp_learns_two_spirals():
    ms.set_seed(0)
    x, y = spirals(400, seed=1)
    xt, yt = spirals(200, seed=2)
    net = nn.SequentialCell([nn.Dense(2, 64), nn.Tanh(), nn.Dense(64, 64), nn.ReLU(), nn.Dense(64, 2)])
    opt = nn.Adam(net.trainable_params(), learning_rate=0.01)
    loss_fn = nn.CrossEntropyLoss()
    grad_fn = ms.value_and_grad(lambda a, b: loss_fn(net(a), b), None, opt.parameters)
    r = np.random.default_rng(3)
    net.set_train()
    for _ in range(60):                                   # 60 epochs of 8 minibatches
        perm = r.permutation(len(y))
        for i in range(0, len(y), 100):
            idx = perm[i:i + 100]
            loss, grads = grad_fn(ms.Tensor(x[idx]), ms.Tensor(y[idx]))
            opt(grads)
    assert accuracy(net, xt, yt) >= 0.95


def bars(n, seed):
    """1x16x16 images: class 0 has a horizontal bar, class 1 a vertical one; Gaussian noise."""
    r = np.random.default_rng(seed)
    img = r.normal(scale=0.4, size=(n, 1, 16, 16)).astype(np.float32)
    y = r.integers(0, 2, n).astype(np.int32)
    pos = r.integers(2, 14, n)
    length = r.integers(6, 12, n)
    start = r.integers(0, 16 - 11, n)
    for k in range(n):
        sl = slice(start[k], start[k] + length[k])
        if y[k] == 0:
            img[k, 0, pos[k], sl] += 1.5
        else:
            img[k, 0, sl, pos[k]] += 1.5
    return img, y


class LeNetish(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 3)
        self.conv2 = nn.Conv2d(6, 12, 3, pad_mode="valid", has_bias=True)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.relu = nn.ReLU()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(12 * 3 * 3, 32)
        self.fc2 = nn.Dense(32, 2)

    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x)))           # 16 -> 8
        x = self.pool(self.relu(self.conv2(x)))           # 8 -> 6 -> 3
        return self.fc2(self.relu(self.fc1(self.flatten(x))))


def test_cnn_learns_bar_orientation_with_train_one_step_cell():
    ms.set_seed(0)
    x, y = bars(512, seed=1)
    xt, yt = bars(256, seed=2)
    net = LeNetish()
    assert [p.name for p in net.trainable_params()][:3] == ["conv1.weight", "conv2.weight", "conv2.bias"]
    opt = nn.Adam(net.trainable_params(), learning_rate=0.005)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()), opt)
    train.set_train()
    r = np.random.default_rng(3)
    for _ in range(4):
        perm = r.permutation(len(y))
        for i in range(0, len(y), 64):
            idx = perm[i:i + 64]
            train(ms.Tensor(x[idx]), ms.Tensor(y[idx]))
    assert opt.global_step.asnumpy()[0] == 4 * 8
    assert accuracy(net, xt, yt) >= 0.9


def test_wiring_matches_numpy_float64_loop():
    """2-layer tanh MLP, MSE loss, Momentum, 3 steps: minispore in float64 vs a hand-derived
    NumPy backward pass. lr and momentum are powers of two: MindSpore stores them as float32
    Parameters, and these are exact in float32, so the comparison can be to float64 precision."""
    r = np.random.default_rng(0)
    x = r.normal(size=(8, 3))
    t = r.normal(size=(8, 2))
    net = nn.SequentialCell([nn.Dense(3, 5, dtype=ms.float64), nn.Tanh(), nn.Dense(5, 2, dtype=ms.float64)])
    W1, b1, W2, b2 = [p.asnumpy().copy() for p in net.trainable_params()]
    assert [p.name for p in net.trainable_params()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.125, momentum=0.5)
    grad_fn = ms.value_and_grad(lambda a, b: nn.MSELoss()(net(a), b), None, opt.parameters)

    v = [np.zeros_like(a) for a in (W1, b1, W2, b2)]
    losses = []
    for _ in range(3):
        loss, grads = grad_fn(ms.Tensor(x), ms.Tensor(t))
        opt(grads)
        # NumPy: forward, backward by hand, momentum update
        h = np.tanh(x @ W1.T + b1)
        out = h @ W2.T + b2
        d_out = 2 * (out - t) / out.size
        gW2, gb2 = d_out.T @ h, d_out.sum(0)
        d_h = d_out @ W2 * (1 - h ** 2)
        gW1, gb1 = d_h.T @ x, d_h.sum(0)
        losses.append(((out - t) ** 2).mean())
        np.testing.assert_allclose(float(loss.asnumpy()), losses[-1], rtol=1e-12)
        for i, (p, g) in enumerate(zip((W1, b1, W2, b2), (gW1, gb1, gW2, gb2))):
            v[i] = 0.5 * v[i] + g
            p -= 0.125 * v[i]
    for p, want in zip(net.trainable_params(), (W1, b1, W2, b2)):
        np.testing.assert_allclose(p.asnumpy(), want, rtol=1e-12, atol=1e-14)
    assert losses[2] < losses[0]
