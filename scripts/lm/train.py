#!/usr/bin/python3
"""Trains optc's small language model: a byte-level decoder-only
Transformer (causal self-attention, LayerNorm, GELU; about 1.5M
parameters) on text that ships with Debian (the license texts in
/usr/share/common-licenses, a fixed and checksummed list), on the CPU
with a fixed seed, and exports it to ONNX with a dynamic batch and
sequence length. It is what the weight-only quantization figures
(docs/transformers.md, `make bench-lm`) are measured on.

Run with Debian's python (python3-torch 1.13, python3-onnx 1.12):

    /usr/bin/python3 scripts/lm/train.py [--steps N] [--force]

Output, under $OPTC_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/optc):

    lm/lm.onnx         input ids int64[batch, seq] -> logits float[batch, seq, 256]
    lm/calib.npy       int64[32, 128]: calibration windows (training split)
    lm/heldout.npy     int64[64, 128]: held-out windows (never trained on)
    lm/meta.json       sources with checksums, parameters, losses, seconds
    lm/.gen            the generator hash it was made with

Splits: each source file's last 10% of bytes is held out; training and
calibration windows come from the first 90%. Licenses repeat each other
(GPL-2 and LGPL-2.1 share whole paragraphs), so held-out perplexity is
lower than on general text; it is a fixed yardstick for comparing
quantizations of one model, not a language-modelling result.

Deterministic: fixed seeds, one torch thread; a model whose .gen matches
the generator hash (this file, torch and onnx versions) is not trained
again. Written into a temporary folder and renamed into place.
"""

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
from optccache import cache_dir  # noqa: E402  (scripts/optccache.py)

# The corpus: path -> sha256 of the file as shipped by Debian 12's
# base-files. A different file is an error (the figures would not be
# comparable), not something to train on silently.
SOURCES = {
    "/usr/share/common-licenses/Apache-2.0": "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30",
    "/usr/share/common-licenses/Artistic": "b7fd9b73ea99602016a326e0b62e6646060d18febdd065ceca8bb482208c3d88",
    "/usr/share/common-licenses/BSD": "5d588eb3b157d52112afea935c88a7ff9efddc1e2d95a42c25d3b96ad9055008",
    "/usr/share/common-licenses/CC0-1.0": "a2010f343487d3f7618affe54f789f5487602331c0a8d03f49e9a7c547cf0499",
    "/usr/share/common-licenses/GFDL-1.2": "d8e94ae5fdb5433fcae2961aeb1a8cf17174d6f4a0465d24bf37dd8a038bd439",
    "/usr/share/common-licenses/GFDL-1.3": "110535522396708cea37c72a802c5e7e81391139f5f7985631c93ef242b206a4",
    "/usr/share/common-licenses/GPL-1": "d77d235e41d54594865151f4751e835c5a82322b0e87ace266567c3391a4b912",
    "/usr/share/common-licenses/GPL-2": "8177f97513213526df2cf6184d8ff986c675afb514d4e68a404010521b880643",
    "/usr/share/common-licenses/GPL-3": "3972dc9744f6499f0f9b2dbf76696f2ae7ad8af9b23dde66d6af86c9dfb36986",
    "/usr/share/common-licenses/LGPL-2": "681e386e44a19d7d0674b4320272c90e66b6610b741e7e6305f8219c42e85366",
    "/usr/share/common-licenses/LGPL-2.1": "dc626520dcd53a22f727af3ee42c770e56c97a64fe3adb063799d8ab032fe551",
    "/usr/share/common-licenses/LGPL-3": "e3a994d82e644b03a792a930f574002658412f62407f5fee083f2555c5f23118",
    "/usr/share/common-licenses/MPL-1.1": "f849fc26a7a99981611a3a370e83078deb617d12a45776d6c4cada4d338be469",
    "/usr/share/common-licenses/MPL-2.0": "fab3dd6bdab226f1c08630b1dd917e11fcb4ec5e1e020e2c16f83a0a13863e85",
}

VOCAB = 256  # bytes
WIDTH = 192
HEADS = 4
LAYERS = 3
MAXLEN = 512  # the position table: sequences up to 512 tokens
TRAIN_SEQ = 64
BATCH = 8
WINDOW = 128  # calibration and held-out windows
CALIB = 32
HELDOUT = 64


def gen_hash(steps):
    h = hashlib.sha256()
    h.update(open(HERE, "rb").read())
    h.update(("%s %s %d" % (torch.__version__, onnx.__version__, steps)).encode())
    return h.hexdigest()[:16]


def read_sources():
    train, held, meta = [], [], []
    for path in sorted(SOURCES):
        b = open(path, "rb").read()
        got = hashlib.sha256(b).hexdigest()
        if got != SOURCES[path]:
            raise SystemExit("train.py: %s has sha256 %s, want %s (a different Debian release?)" % (path, got, SOURCES[path]))
        cut = len(b) * 9 // 10
        train.append(b[:cut])
        held.append(b[cut:])
        meta.append({"path": path, "sha256": got, "bytes": len(b)})
    return train, held, meta


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.width, self.heads = width, heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x, mask):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(self.width, dim=2)
        hd = self.width // self.heads
        q = q.reshape(b, t, self.heads, hd).transpose(1, 2)
        k = k.reshape(b, t, self.heads, hd).transpose(1, 2)
        v = v.reshape(b, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd)) + mask
        y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class LM(nn.Module):
    def __init__(self, width=WIDTH, heads=HEADS, layers=LAYERS, max_len=MAXLEN):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, width)
        self.pos = nn.Embedding(max_len, width)
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, VOCAB)
        # Additive causal mask, sliced to the sequence length (dynamic in
        # the export).
        m = torch.full((max_len, max_len), -1e4).triu(1)
        self.register_buffer("causal", m)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos.weight[:t]
        mask = self.causal[:t, :t]
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln(x))


def windows(parts, n, length, rng):
    """n windows of length tokens drawn from the parts (bytes), each
    inside one part."""
    weights = np.array([max(len(p) - length, 0) for p in parts], dtype=np.float64)
    weights /= weights.sum()
    out = np.zeros((n, length), dtype=np.int64)
    for i in range(n):
        j = rng.choice(len(parts), p=weights)
        s = rng.integers(0, len(parts[j]) - length)
        out[i] = np.frombuffer(parts[j][s : s + length], dtype=np.uint8)
    return out


def train(model, train_parts, steps, batch, seq, seed, lr=3e-3, log=None):
    """Trains model on windows of train_parts (fixed seed, AdamW with a
    one-cycle schedule); returns the mean loss of the last 50 steps."""
    rng = np.random.default_rng(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.05)
    t0 = time.time()
    losses = []
    model.train()
    for step in range(steps):
        xb = torch.from_numpy(windows(train_parts, batch, seq + 1, rng))
        logits = model(xb[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), xb[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if log and step % 100 == 0:
            log("step %d loss %.3f (%.0f s)" % (step, loss.item(), time.time() - t0))
    model.eval()
    return float(np.mean(losses[-50:]))


def heldout_loss(model, heldout):
    """Mean next-token cross-entropy of model on the windows (torch)."""
    with torch.no_grad():
        hx = torch.from_numpy(heldout)
        lg = model(hx[:, :-1])
        return F.cross_entropy(lg.reshape(-1, VOCAB), hx[:, 1:].reshape(-1)).item()


def export_lm(model, example, path):
    """ids int64[batch, seq] -> logits float[batch, seq, 256], opset 17,
    batch and sequence dynamic; checked by onnx.checker."""
    torch.onnx.export(
        model,
        (torch.from_numpy(example),),
        path,
        input_names=["ids"],
        output_names=["logits"],
        dynamic_axes={"ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}},
        opset_version=17,
        do_constant_folding=True,
    )
    onnx.checker.check_model(path, full_check=True)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=450, help="training steps (batch 8 x 64 tokens)")
    ap.add_argument("--force", action="store_true", help="retrain even when up to date")
    a = ap.parse_args()
    torch.set_num_threads(1)
    root = os.path.join(cache_dir(), "lm")
    h = gen_hash(a.steps)
    marker = os.path.join(root, ".gen")
    if not a.force and os.path.exists(marker) and open(marker).read().strip() == h:
        return
    train_parts, held, sources = read_sources()
    torch.manual_seed(19)
    model = LM()
    params = sum(p.numel() for p in model.parameters())
    t0 = time.time()
    final_loss = train(model, train_parts, a.steps, BATCH, TRAIN_SEQ, 19, log=lambda m: print(m, file=sys.stderr))
    train_s = time.time() - t0
    calib = windows(train_parts, CALIB, WINDOW, np.random.default_rng(20))
    heldout = windows(held, HELDOUT, WINDOW, np.random.default_rng(21))
    hl = heldout_loss(model, heldout)
    os.makedirs(os.path.dirname(root), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-lm-", dir=os.path.dirname(root))
    try:
        export_lm(model, calib[:1], os.path.join(tmp, "lm.onnx"))
        np.save(os.path.join(tmp, "calib.npy"), calib)
        np.save(os.path.join(tmp, "heldout.npy"), heldout)
        meta = {
            "sources": sources,
            "params": params,
            "width": WIDTH,
            "heads": HEADS,
            "layers": LAYERS,
            "max_len": MAXLEN,
            "steps": a.steps,
            "train_seconds": round(train_s, 1),
            "final_train_loss": round(final_loss, 4),
            "heldout_loss_torch": round(hl, 4),
            "heldout_perplexity_torch": round(math.exp(hl), 4),
            "generator_hash": h,
        }
        for f in ("lm.onnx", "calib.npy", "heldout.npy"):
            meta[f] = sha256(os.path.join(tmp, f))
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
        with open(os.path.join(tmp, ".gen"), "w") as f:
            f.write(h + "\n")
        if os.path.exists(root):
            shutil.rmtree(root)
        os.rename(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print("lm: %d parameters, %d steps in %.0f s, held-out perplexity %.3f" % (params, a.steps, train_s, math.exp(hl)), file=sys.stderr)


if __name__ == "__main__":
    main()
