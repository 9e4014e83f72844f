#!/usr/bin/python3
"""Exports a small pre-norm Transformer MLP block the way torch 1.13 writes
it below opset 17, for optc's LayerNorm and GELU fusion tests:

    h = x + fc2(GELU(fc1(LayerNorm(x))))        (GELU erf form)
    y = GELU_tanh(LayerNorm(h))                  (GELU tanh form)

At opset 13 torch writes each nn.LayerNorm as ReduceMean/Sub/Pow/ReduceMean/
Add/Sqrt/Div/Mul/Add and each nn.GELU as Div/Erf/Add/Mul/Mul (or the nine
ops of the tanh form). Seeded weights; input x float32 [2, 16, 32] (static).

    /usr/bin/python3 testdata/transformers/export_block.py [out.onnx]

Debian's python3-torch 1.13 and python3-onnx 1.12 (what scripts/zoo/gen.py
uses); the export is byte-identical between runs.
"""

import sys

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d=32, hidden=64):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-6)
        self.out = nn.GELU(approximate="tanh")

    def forward(self, x):
        h = x + self.fc2(self.act(self.fc1(self.ln1(x))))
        return self.out(self.ln2(h))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "testdata/models/block_opset13.onnx"
    torch.manual_seed(19)
    m = Block().eval()
    with torch.no_grad():  # non-trivial affine parameters
        for ln in (m.ln1, m.ln2):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 16, 32)
    torch.onnx.export(m, (x,), out, opset_version=13, input_names=["x"], output_names=["y"], do_constant_folding=True)


if __name__ == "__main__":
    main()
