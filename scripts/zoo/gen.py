#!/usr/bin/python3
"""Generates optc's model zoo: real architectures (torchvision 0.14),
sequence models and the next ring of families users bring (a U-Net, a
Conv3d video net, a raw-audio encoder, a recommender with int64 ids, a
decoder with a KV cache, a detector with NMS in its graph) with
random, seeded weights, exported to ONNX the ways models are found in the
wild.

Run with Debian's python (python3-torch 1.13, python3-torchvision 0.14,
python3-onnx 1.12):

    /usr/bin/python3 scripts/zoo/gen.py [--only name,name] [--list]

Output, under $OPTC_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/optc):

    zoo/models.json          the manifest (see docs/zoo.md)
    zoo/<model>/<variant>.onnx
    zoo/<model>/calib.npy    32 calibration samples at the static size (image models)
    zoo/<model>/meta.json    this model's manifest entry
    zoo/<model>/.gen         the generator hash it was made with

Variants of an image model: "static" (batch 1, torch.onnx.export without
dynamic_axes: the common case), "dynbatch" (batch dynamic), "dynhw" (batch,
height and width dynamic; the manifest gives the --shape flags to fix them).

Deterministic and idempotent: each model is seeded from its name, BatchNorm
statistics are re-estimated on seeded random images (train mode,
momentum=None, a few batches, then eval) so activations are well scaled,
and a model whose .gen matches the generator hash (this file, the torch,
torchvision and onnx versions) is not generated again. Each model is
written into a temporary folder and renamed into place.

lm_tiny, the causal language model, is trained rather than random:
scripts/lm/train.py's model, corpus and split at a CI size (see
LM_MODELS), with calib.npy and heldout.npy token windows and the files'
sha256 in its entry; its generator hash also covers train.py. Training
takes about 2 minutes of CPU (333 s wall at load 12, 818 s at load 22).

Runtime (the shared 2-core VM at load 8, one torch thread): 4-5 minutes
for the whole zoo from scratch (1.3 GB; densenet121 55-75 s, resnet50 and
convnext_tiny ~30 s, each small model under 3 s); a run with nothing to
do takes ~8 s (the imports). The exports are byte-identical between runs.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
import zlib

import numpy as np
import onnx
import torch
import torch.nn as nn
import torchvision

warnings.filterwarnings("ignore")
torch.set_num_threads(int(os.environ.get("ZOO_THREADS", "1")))

HERE = os.path.abspath(__file__)
SCRIPTS = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, SCRIPTS)
from optccache import cache_dir  # noqa: E402  (scripts/optccache.py)

# Image size per CNN: as small as the architecture accepts (all downsample
# by 32 and end in adaptive pooling), to keep test time low.
SIZE = 64
CALIB_SAMPLES = 32


def gen_hash():
    """The generator's identity: its code (the module docstring left out,
    so documenting it does not regenerate the zoo) and the library versions."""
    h = hashlib.sha256()
    with open(HERE, "rb") as f:
        src = f.read()
    h.update(src.split(b'"""', 2)[2])
    for v in (torch.__version__, torchvision.__version__, onnx.__version__):
        h.update(v.encode())
    return h.hexdigest()[:16]


def model_hash(name, h):
    """A model's generator hash: the zoo's, and for the language model also
    scripts/lm/train.py (its model, corpus and training code), so that
    changing the big LM's script regenerates lm_tiny alone."""
    if name not in LM_MODELS:
        return h
    g = hashlib.sha256(h.encode())
    with open(os.path.join(SCRIPTS, "lm", "train.py"), "rb") as f:
        g.update(f.read())
    return g.hexdigest()[:16]


def seed_for(name):
    return zlib.crc32(name.encode())


def recalibrate_bn(model, make_input, batches=4):
    """Re-estimates BatchNorm running statistics on random inputs."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return 0
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the batches
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(*make_input())
    model.eval()
    return len(bns)


def export(model, args, path, input_names, output_names, dynamic_axes, opset):
    # With grad enabled: under no_grad torch 1.13 takes the fused inference
    # paths of nn.MultiheadAttention / nn.TransformerEncoderLayer
    # (aten::_native_multi_head_attention), which do not export.
    torch.onnx.export(
        model,
        args,
        path,
        input_names=input_names,
        output_names=output_names,
        dynamic_axes=dynamic_axes or None,
        opset_version=opset,
        do_constant_folding=True,
    )
    m = onnx.load(path)
    m.producer_name = "optc-zoo (torch %s)" % torch.__version__
    onnx.save(m, path)
    onnx.checker.check_model(path, full_check=True)


def value_info(path):
    """The model's graph inputs as the manifest records them."""
    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    out = []
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        dims = []
        for d in t.shape.dim:
            dims.append(d.dim_param if d.HasField("dim_param") else d.dim_value)
        out.append({"name": vi.name, "dtype": np.dtype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.elem_type]).name, "shape": dims})
    outs = [o.name for o in m.graph.output]
    return out, outs


def shape_flags(inputs, fixed):
    """The --shape flags a user needs: one per input with a symbolic dim
    other than the batch ("batch", wherever it is). A flag gives the whole
    shape, so it fixes the batch too (to 1)."""
    flags = []
    for i in inputs:
        if any(isinstance(d, str) and d != "batch" for d in i["shape"]):
            dims = fixed[i["name"]]
            flags.append("%s:%s" % (i["name"], ",".join(str(d) for d in dims)))
    return flags


# ---------------------------------------------------------------- image models

IMAGE = [
    # name, constructor kwargs, opset
    ("resnet18", {}, 13),
    ("squeezenet1_1", {}, 13),
    ("shufflenet_v2_x1_0", {}, 13),
    ("mobilenet_v3_small", {}, 13),
    ("mnasnet1_0", {}, 13),
    ("mobilenet_v2", {}, 13),
    ("regnet_y_400mf", {}, 13),
    ("efficientnet_b0", {}, 13),
    ("mobilenet_v3_large", {}, 13),
    ("googlenet", {"aux_logits": False, "init_weights": True}, 13),
    ("densenet121", {}, 13),
    ("resnet50", {}, 13),
    ("convnext_tiny", {}, 17),  # LayerNorm: LayerNormalization needs opset 17
]


def make_image(name, kwargs):
    if name == "vit_tiny":
        m = torchvision.models.VisionTransformer(
            image_size=64, patch_size=8, num_layers=2, num_heads=2, hidden_dim=64, mlp_dim=128, num_classes=10
        )
        # torchvision initialises the classifier head to zeros: the output
        # would be all zeros and every error figure meaningless.
        nn.init.normal_(m.heads.head.weight, std=0.02)
        return m
    return getattr(torchvision.models, name)(weights=None, **kwargs)


def gen_image(name, kwargs, opset, out, dynhw=True):
    torch.manual_seed(seed_for(name))
    model = make_image(name, kwargs)
    g = torch.Generator().manual_seed(seed_for(name) + 1)
    nbn = recalibrate_bn(model, lambda: (torch.randn(8, 3, SIZE, SIZE, generator=g),))
    model.eval()
    x = torch.randn(1, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        y = model(x)
    variants = [("static", None), ("dynbatch", {"input": {0: "batch"}, "logits": {0: "batch"}})]
    if dynhw:
        variants.append(("dynhw", {"input": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}}))
    entry = {"name": name, "kind": "image", "opset": opset, "bn_recalibrated": nbn, "variants": []}
    for vname, axes in variants:
        p = os.path.join(out, vname + ".onnx")
        export(model, (x,), p, ["input"], ["logits"], axes, opset)
        inputs, outputs = value_info(p)
        entry["variants"].append(
            {
                "name": vname,
                "file": vname + ".onnx",
                "inputs": inputs,
                "outputs": outputs,
                "shape_flags": shape_flags(inputs, {"input": [1, 3, SIZE, SIZE]}),
            }
        )
    rng = np.random.default_rng(seed_for(name) + 2)
    calib = rng.standard_normal((CALIB_SAMPLES, 3, SIZE, SIZE)).astype(np.float32)
    np.save(os.path.join(out, "calib.npy"), calib)
    entry["calib"] = "calib.npy"
    entry["output_std"] = float(y.std())
    return entry


# ---------------------------------------------------------------- sequence models


class BertLike(nn.Module):
    """Token ids and an attention mask into a small Transformer encoder:
    last hidden state and a pooled 2-class head."""

    def __init__(self, vocab=1000, d=64, heads=2, layers=2, ffn=128, max_len=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=ffn, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 2)

    def forward(self, input_ids, attention_mask):
        seq = input_ids.shape[1]
        pos = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        h = self.tok(input_ids) + self.pos(pos)
        h = self.enc(h, src_key_padding_mask=attention_mask == 0)
        h = self.norm(h)
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)
        return h, self.head(pooled)


def gen_bert(name, out, seq=16, **size):
    torch.manual_seed(seed_for(name))
    model = BertLike(**size).eval()
    ids = torch.randint(0, 1000, (1, seq), generator=torch.Generator().manual_seed(3))
    mask = torch.ones(1, seq, dtype=torch.int64)
    names_in = ["input_ids", "attention_mask"]
    names_out = ["last_hidden_state", "logits"]
    entry = {"name": name, "kind": "text", "opset": 17, "variants": []}
    for vname, axes in [
        ("static", None),
        (
            "dynamic",
            {
                "input_ids": {0: "batch", 1: "seq"},
                "attention_mask": {0: "batch", 1: "seq"},
                "last_hidden_state": {0: "batch", 1: "seq"},
                "logits": {0: "batch"},
            },
        ),
    ]:
        p = os.path.join(out, vname + ".onnx")
        export(model, (ids, mask), p, names_in, names_out, axes, 17)
        inputs, outputs = value_info(p)
        entry["variants"].append(
            {
                "name": vname,
                "file": vname + ".onnx",
                "inputs": inputs,
                "outputs": outputs,
                "shape_flags": shape_flags(inputs, {"input_ids": [1, seq], "attention_mask": [1, seq]}),
                "value_range": {"input_ids": [0, 999]},
            }
        )
    # Calibration: ids inside the vocabulary, masks of ones with some
    # trailing padding (axis 0 is the sample axis; keys are input names).
    rng = np.random.default_rng(seed_for(name) + 2)
    cids = rng.integers(0, 1000, (CALIB_SAMPLES, seq), dtype=np.int64)
    cmask = np.ones((CALIB_SAMPLES, seq), dtype=np.int64)
    for i, n in enumerate(rng.integers(seq // 2, seq + 1, CALIB_SAMPLES)):
        cmask[i, n:] = 0
    np.savez(os.path.join(out, "calib.npz"), input_ids=cids, attention_mask=cmask)
    entry["calib"] = "calib.npz"
    return entry


class RNN(nn.Module):
    def __init__(self, cell, feat=16, hidden=32, layers=2):
        super().__init__()
        self.cell = cell
        cls = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = cls(feat, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x, h0, c0=None):
        if self.cell == "lstm":
            y, (hn, cn) = self.rnn(x, (h0, c0))
            return self.head(y), hn, cn
        y, hn = self.rnn(x, h0)
        return self.head(y), hn


def gen_rnn(name, cell, out):
    torch.manual_seed(seed_for(name))
    model = RNN(cell).eval()
    layers, hidden, feat, seq = 2, 32, 16, 8
    g = torch.Generator().manual_seed(5)
    x = torch.randn(1, seq, feat, generator=g)
    h0 = torch.zeros(layers, 1, hidden)
    args = (x, h0) if cell == "gru" else (x, h0, torch.zeros(layers, 1, hidden))
    names_in = ["x", "h0"] + (["c0"] if cell == "lstm" else [])
    names_out = ["y", "hn"] + (["cn"] if cell == "lstm" else [])
    dyn = {"x": {0: "batch", 1: "seq"}, "h0": {1: "batch"}, "y": {0: "batch", 1: "seq"}, "hn": {1: "batch"}}
    if cell == "lstm":
        dyn["c0"] = {1: "batch"}
        dyn["cn"] = {1: "batch"}
    fixed = {"x": [1, seq, feat], "h0": [layers, 1, hidden], "c0": [layers, 1, hidden]}
    entry = {"name": name, "kind": "recurrent", "opset": 13, "variants": []}
    for vname, axes in [("static", None), ("dynamic", dyn)]:
        p = os.path.join(out, vname + ".onnx")
        export(model, args, p, names_in, names_out, axes, 13)
        inputs, outputs = value_info(p)
        entry["variants"].append(
            {
                "name": vname,
                "file": vname + ".onnx",
                "inputs": inputs,
                "outputs": outputs,
                # the state's batch is axis 1: a flag fixes it too
                "shape_flags": shape_flags(inputs, fixed),
                "batch_axis": {"h0": 1, "c0": 1} if cell == "lstm" else {"h0": 1},
            }
        )
    return entry


class Branchy(nn.Module):
    """A conv, then a data-dependent branch (scripted: an ONNX If)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.a = nn.Conv2d(8, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        h = torch.relu(self.conv(x))
        # On the input, so that zero-mean random data takes both branches.
        if bool(x.mean() > 0.0):
            h = torch.relu(self.a(h))
        else:
            h = torch.sigmoid(self.b(h)) * 2.0
        return self.fc(h.mean(dim=[2, 3]))


def gen_if(name, out):
    torch.manual_seed(seed_for(name))
    model = torch.jit.script(Branchy().eval())
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(9))
    entry = {"name": name, "kind": "control-flow", "opset": 13, "variants": []}
    for vname, axes in [("static", None), ("dynbatch", {"input": {0: "batch"}, "logits": {0: "batch"}})]:
        p = os.path.join(out, vname + ".onnx")
        export(model, (x,), p, ["input"], ["logits"], axes, 13)
        m = onnx.load(p)
        if not any(n.op_type == "If" for n in m.graph.node):
            raise SystemExit("gen.py: %s: the export has no If node" % name)
        inputs, outputs = value_info(p)
        entry["variants"].append(
            {
                "name": vname,
                "file": vname + ".onnx",
                "inputs": inputs,
                "outputs": outputs,
                "shape_flags": shape_flags(inputs, {"input": [1, 3, 32, 32]}),
            }
        )
    rng = np.random.default_rng(seed_for(name) + 2)
    np.save(os.path.join(out, "calib.npy"), rng.standard_normal((CALIB_SAMPLES, 3, 32, 32)).astype(np.float32))
    entry["calib"] = "calib.npy"
    return entry


# ---------------------------------------------------------------- the next ring

# Families users bring that the classifiers above do not cover: a U-Net
# (segmentation: GroupNorm, InstanceNorm, ConvTranspose, skip concats, a
# per-pixel class map), a video net (Conv3d), an audio encoder over the
# raw waveform (Conv1d with strides), a recommender (int64 ids into
# embeddings beside float features) and a decoder with a KV cache.


class UNet(nn.Module):
    """Two levels down and up, 3 classes per pixel."""

    def __init__(self, c=8, classes=3):
        super().__init__()

        def block(i, o, norm):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), norm(o), nn.ReLU(), nn.Conv2d(o, o, 3, padding=1), nn.ReLU())

        gn = lambda o: nn.GroupNorm(4, o)  # noqa: E731
        inorm = lambda o: nn.InstanceNorm2d(o, affine=True)  # noqa: E731
        self.d1, self.d2 = block(3, c, gn), block(c, 2 * c, gn)
        self.mid = block(2 * c, 4 * c, inorm)
        self.u2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
        self.c2 = block(4 * c, 2 * c, gn)
        self.u1 = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.c1 = block(2 * c, c, gn)
        self.head = nn.Conv2d(c, classes, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(nn.functional.max_pool2d(a, 2))
        m = self.mid(nn.functional.max_pool2d(b, 2))
        b = self.c2(torch.cat([self.u2(m), b], 1))
        a = self.c1(torch.cat([self.u1(b), a], 1))
        return self.head(a)


class Video(nn.Module):
    """Conv3d over [batch, 3, frames, H, W], pooled into 5 classes."""

    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(
            nn.Conv3d(3, 8, 3, padding=1), nn.BatchNorm3d(8), nn.ReLU(),
            nn.Conv3d(8, 16, 3, stride=2, padding=1), nn.BatchNorm3d(16), nn.ReLU(),
        )
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        return self.fc(self.f(x).mean(dim=[2, 3, 4]))


class Audio(nn.Module):
    """A raw 16 kHz waveform [batch, samples] through strided Conv1d (a
    wav2vec-style front end), then per-frame features and a clip score."""

    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(
            nn.Conv1d(1, 16, 10, stride=5), nn.GroupNorm(16, 16), nn.GELU(),
            nn.Conv1d(16, 32, 3, stride=2), nn.GELU(),
            nn.Conv1d(32, 32, 3, stride=2), nn.GELU(),
        )
        self.proj = nn.Linear(32, 24)
        self.head = nn.Linear(24, 4)

    def forward(self, wav):
        h = self.proj(self.f(wav.unsqueeze(1)).transpose(1, 2))
        return h, self.head(h.mean(1))


class Recommender(nn.Module):
    """User and item ids (int64) into embeddings, dense float features,
    an MLP: a click probability."""

    def __init__(self, users=1000, items=5000, d=16, dense=8):
        super().__init__()
        self.users, self.items = nn.Embedding(users, d), nn.Embedding(items, d)
        self.mlp = nn.Sequential(nn.Linear(2 * d + dense, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, user_id, item_id, dense):
        h = torch.cat([self.users(user_id), self.items(item_id), dense], 1)
        return torch.sigmoid(self.mlp(h))


class DecoderKV(nn.Module):
    """A two-layer causal decoder with a KV cache, as generation exports
    it: token ids [batch, seq], a mask over past and new tokens [batch,
    past+seq], each layer's past keys and values [batch, heads, past, dim]
    in; logits and the present keys and values (past+seq) out."""

    def __init__(self, vocab=256, d=32, heads=2, layers=2):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.emb = nn.Embedding(vocab, d)
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(layers))
        self.o = nn.ModuleList(nn.Linear(d, d) for _ in range(layers))
        self.ln = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, input_ids, attention_mask, pk0, pv0, pk1, pv1):
        b, t = input_ids.shape
        x = self.emb(input_ids)
        past = pk0.shape[2]
        # Causal over the new tokens, all past visible; the mask's 0s
        # (padding) are pushed down, not to -inf, so that an all-zero mask
        # (random data) still gives numbers.
        causal = (torch.arange(past + t)[None, :] <= torch.arange(t)[:, None] + past).to(x.dtype)
        bias = (1.0 - causal) * -1e4 + (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -1e4
        presents = []
        for i, (pk, pv) in enumerate([(pk0, pv0), (pk1, pv1)]):
            q, k, v = self.qkv[i](self.ln[i](x)).split(self.h * self.dh, dim=2)
            q, k, v = (z.reshape(b, t, self.h, self.dh).transpose(1, 2) for z in (q, k, v))
            k, v = torch.cat([pk, k], 2), torch.cat([pv, v], 2)
            presents += [k, v]
            a = torch.softmax(q @ k.transpose(2, 3) / self.dh**0.5 + bias, -1) @ v
            x = x + self.o[i](a.transpose(1, 2).reshape(b, t, self.h * self.dh))
        return (self.head(x), *presents)


def gen_next(name, out):
    """One model of the next ring, static and with a dynamic batch, with
    its calibration data (.npy for one input, .npz for several)."""
    torch.manual_seed(seed_for(name))
    g = torch.Generator().manual_seed(seed_for(name) + 1)
    rng = np.random.default_rng(seed_for(name) + 2)
    if name == "unet_small":
        model, kind = UNet(), "segmentation"
        shapes = {"input": [1, 3, SIZE, SIZE]}
        names_in, names_out = ["input"], ["mask_logits"]
        calib = {"input": rng.standard_normal((CALIB_SAMPLES, 3, SIZE, SIZE)).astype(np.float32)}
    elif name == "video_conv3d":
        model, kind = Video(), "video"
        shapes = {"input": [1, 3, 8, 32, 32]}
        names_in, names_out = ["input"], ["logits"]
        recalibrate_bn(model, lambda: (torch.randn(4, 3, 8, 32, 32, generator=g),))
        calib = {"input": rng.standard_normal((CALIB_SAMPLES, 3, 8, 32, 32)).astype(np.float32)}
    elif name == "audio_conv1d":
        model, kind = Audio(), "audio"
        shapes = {"wav": [1, 16000]}
        names_in, names_out = ["wav"], ["features", "logits"]
        calib = {"wav": (0.1 * rng.standard_normal((CALIB_SAMPLES, 16000))).astype(np.float32)}
    elif name == "recommender":
        model, kind = Recommender(), "recommender"
        shapes = {"user_id": [1], "item_id": [1], "dense": [1, 8]}
        names_in, names_out = ["user_id", "item_id", "dense"], ["score"]
        calib = {
            "user_id": rng.integers(0, 1000, CALIB_SAMPLES).astype(np.int64),
            "item_id": rng.integers(0, 5000, CALIB_SAMPLES).astype(np.int64),
            "dense": rng.standard_normal((CALIB_SAMPLES, 8)).astype(np.float32),
        }
    elif name == "decoder_kv":
        model, kind = DecoderKV(), "decoder"
        t, past, kv = 8, 4, [CALIB_SAMPLES, 2, 4, 16]
        kvn = ["past_key_0", "past_value_0", "past_key_1", "past_value_1"]
        shapes = {"input_ids": [1, t], "attention_mask": [1, past + t]}
        shapes.update({n: [1] + kv[1:] for n in kvn})
        names_in, names_out = ["input_ids", "attention_mask"] + kvn, ["logits"] + [n.replace("past", "present") for n in kvn]
        calib = {"input_ids": rng.integers(0, 256, (CALIB_SAMPLES, t)).astype(np.int64), "attention_mask": np.ones((CALIB_SAMPLES, past + t), np.int64)}
        calib.update({n: rng.standard_normal(kv).astype(np.float32) for n in kvn})
    else:
        raise SystemExit("gen.py: no generator for %s" % name)
    model.eval()
    args = tuple(torch.from_numpy(calib[n][:1]) for n in names_in)
    entry = {"name": name, "kind": kind, "opset": 13, "variants": []}
    dyn = {n: {0: "batch"} for n in names_in + names_out}
    if name == "decoder_kv":
        dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"}, "logits": {0: "batch", 1: "seq"}}
        for n in names_in[2:]:
            dyn[n] = {0: "batch", 2: "past"}
        for n in names_out[1:]:
            dyn[n] = {0: "batch", 2: "total"}
    dynamic = "dynamic" if name == "decoder_kv" else "dynbatch"  # batch, seq and past dynamic
    for vname, axes in [("static", None), (dynamic, dyn)]:
        p = os.path.join(out, vname + ".onnx")
        export(model, args, p, names_in, names_out, axes, 13)
        inputs, outputs = value_info(p)
        entry["variants"].append(
            {"name": vname, "file": vname + ".onnx", "inputs": inputs, "outputs": outputs, "shape_flags": shape_flags(inputs, shapes)}
        )
    if len(calib) == 1:
        np.save(os.path.join(out, "calib.npy"), next(iter(calib.values())))
        entry["calib"] = "calib.npy"
    else:
        np.savez(os.path.join(out, "calib.npz"), **calib)
        entry["calib"] = "calib.npz"
    return entry


NEXT = ["recommender", "audio_conv1d", "unet_small", "video_conv3d", "decoder_kv"]


# ---------------------------------------------------------------- a detector

# detector: a single-stage detector whose graph ends in its own
# post-processing, as torchvision's SSD and RetinaNet export: a score
# threshold (NonZero, Gather), per-class NMS (NonMaxSuppression) and a
# top-k, so its outputs boxes [K,4], scores [K] and labels [K] have a K that
# depends on the image (0 on an empty one). It is trained (about 10 s) on
# synthetic scenes of 0-3 coloured rectangles, the colour the class, so
# that its detections mean something; eval.npy's 64 scenes come with
# their ground truth (eval_labels.json: per image, {"box", "label"}).
DET_SIZE, DET_STRIDE, DET_CLASSES = 64, 8, 3
DET_STEPS = 400
DET_COLORS = np.array([[1, 0.2, 0.2], [0.2, 1, 0.2], [0.2, 0.2, 1]], np.float32)


def det_scenes(rng, n):
    """n images [3, S, S] of noise with 0-3 non-overlapping rectangles, and
    their objects (box x0, y0, x1, y1 in pixels; label the colour)."""
    s = DET_SIZE
    imgs = (0.15 * rng.standard_normal((n, 3, s, s))).astype(np.float32)
    labels = []
    for i in range(n):
        objs = []
        for _ in range(rng.integers(0, 4)):
            w, h = (int(v) for v in rng.integers(10, 28, 2))
            x0, y0 = int(rng.integers(0, s - w)), int(rng.integers(0, s - h))
            k = int(rng.integers(0, DET_CLASSES))
            box = [x0, y0, x0 + w, y0 + h]
            if any(min(box[2], o["box"][2]) > max(box[0], o["box"][0]) and min(box[3], o["box"][3]) > max(box[1], o["box"][1]) for o in objs):
                continue
            imgs[i, :, y0 : y0 + h, x0 : x0 + w] += DET_COLORS[k][:, None, None]
            objs.append({"box": [float(v) for v in box], "label": k})
        labels.append(objs)
    return imgs, labels


class Detector(nn.Module):
    """An anchor-free (FCOS-style) head on an 8x8 grid: per cell, class
    scores and the distances to the box's sides; decoded, thresholded at
    0.3, NMS per class at IoU 0.5, at most 20 boxes."""

    def __init__(self):
        super().__init__()
        g = DET_SIZE // DET_STRIDE
        self.f = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 32, 3, 1, 1), nn.ReLU(),
        )
        self.cls, self.box = nn.Conv2d(32, DET_CLASSES, 1), nn.Conv2d(32, 4, 1)
        ys, xs = torch.meshgrid(torch.arange(g), torch.arange(g), indexing="ij")
        self.register_buffer("centers", torch.stack([xs, ys], -1).reshape(-1, 2).float() * DET_STRIDE + DET_STRIDE / 2)

    def heads(self, x):
        f = self.f(x)
        return self.cls(f).flatten(2).transpose(1, 2), self.box(f).flatten(2).transpose(1, 2)

    def forward(self, x):
        logits, d = self.heads(x)
        scores, labels = torch.sigmoid(logits[0]).max(1)
        ltrb = torch.exp(d[0]) * DET_STRIDE
        boxes = torch.cat([self.centers - ltrb[:, :2], self.centers + ltrb[:, 2:]], 1)
        keep = torch.nonzero(scores > 0.3).squeeze(1)
        boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
        keep = torchvision.ops.batched_nms(boxes, scores, labels, 0.5)[:20]
        return boxes[keep], scores[keep], labels[keep]


def det_targets(labels):
    """Per grid cell: the class of the object whose centre falls in it and
    the log distances from the cell's centre to the box's sides."""
    g = DET_SIZE // DET_STRIDE
    cls = torch.zeros(len(labels), g * g, DET_CLASSES)
    box = torch.zeros(len(labels), g * g, 4)
    pos = torch.zeros(len(labels), g * g, dtype=torch.bool)
    for i, objs in enumerate(labels):
        for o in objs:
            x0, y0, x1, y1 = o["box"]
            j = int((y0 + y1) / 2 // DET_STRIDE) * g + int((x0 + x1) / 2 // DET_STRIDE)
            cx, cy = (j % g) * DET_STRIDE + DET_STRIDE / 2, (j // g) * DET_STRIDE + DET_STRIDE / 2
            cls[i, j, o["label"]], pos[i, j] = 1, True
            box[i, j] = torch.log(torch.tensor([cx - x0, cy - y0, x1 - cx, y1 - cy]).clamp(min=1) / DET_STRIDE)
    return cls, box, pos


def gen_detector(name, out):
    torch.manual_seed(seed_for(name))
    rng = np.random.default_rng(seed_for(name))
    model = Detector()
    opt = torch.optim.Adam(model.parameters(), 3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 5e-3, total_steps=DET_STEPS)
    for _ in range(DET_STEPS):
        imgs, labels = det_scenes(rng, 32)
        cls, box, pos = det_targets(labels)
        lc, lb = model.heads(torch.from_numpy(imgs))
        # Positive cells are few: weighted up so that scores reach 0.5.
        loss = 3 * nn.functional.binary_cross_entropy_with_logits(lc, cls, pos_weight=torch.tensor(30.0))
        if pos.any():
            loss = loss + nn.functional.l1_loss(lb[pos], box[pos])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    calib, _ = det_scenes(np.random.default_rng(seed_for(name) + 1), CALIB_SAMPLES)
    evals, truth = det_scenes(np.random.default_rng(seed_for(name) + 2), 64)
    np.save(os.path.join(out, "calib.npy"), calib)
    np.save(os.path.join(out, "eval.npy"), evals)
    with open(os.path.join(out, "eval_labels.json"), "w") as f:
        json.dump(truth, f)
    p = os.path.join(out, "static.onnx")
    export(model, (torch.from_numpy(calib[:1]),), p, ["image"], ["boxes", "scores", "labels"], None, 13)
    # batched_nms exports its NMS inside an If (skipped when no box is left).
    ops = {n.op_type for n in onnx.load(p).graph.node}
    ops |= {b.op_type for n in onnx.load(p).graph.node for a in n.attribute if a.g is not None for b in a.g.node}
    if "NonMaxSuppression" not in ops:
        raise SystemExit("gen.py: %s: the export has no NonMaxSuppression node" % name)
    inputs, outputs = value_info(p)
    variant = {"name": "static", "file": "static.onnx", "inputs": inputs, "outputs": outputs,
               "shape_flags": shape_flags(inputs, {"image": [1, 3, DET_SIZE, DET_SIZE]})}
    return {"name": name, "kind": "detection", "opset": 13, "variants": [variant], "calib": "calib.npy",
            "eval": "eval.npy", "eval_labels": "eval_labels.json"}


# ---------------------------------------------------------------- language model

# lm_tiny: scripts/lm/train.py's decoder (causal self-attention, LayerNorm,
# GELU), corpus (Debian's license texts, checksummed) and split (each
# file's last 10% held out) at a CI size: about 0.1M parameters trained
# for LM_STEPS steps of 16 x 64 tokens (about a minute on one thread).
LM_MODELS = {"lm_tiny": {"width": 64, "heads": 2, "layers": 2, "max_len": 128}}
LM_STEPS = 400
LM_BATCH = 16
LM_SEQ = 64  # training, calibration and held-out windows
LM_HELDOUT = 32


def lm_train_module():
    sys.path.insert(0, os.path.join(SCRIPTS, "lm"))
    import train  # scripts/lm/train.py: the one home of the LM's code

    return train


def gen_lm(name, out):
    lm = lm_train_module()
    train_parts, held, sources = lm.read_sources()
    torch.manual_seed(seed_for(name))
    model = lm.LM(**LM_MODELS[name])
    loss = lm.train(model, train_parts, LM_STEPS, LM_BATCH, LM_SEQ, seed_for(name) + 1)
    calib = lm.windows(train_parts, CALIB_SAMPLES, LM_SEQ, np.random.default_rng(seed_for(name) + 2))
    heldout = lm.windows(held, LM_HELDOUT, LM_SEQ, np.random.default_rng(seed_for(name) + 3))
    hl = lm.heldout_loss(model, heldout)
    p = os.path.join(out, "dynamic.onnx")
    export(model, (torch.from_numpy(calib[:1]),), p, ["ids"], ["logits"], {"ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}, 17)
    np.save(os.path.join(out, "calib.npy"), calib)
    np.save(os.path.join(out, "heldout.npy"), heldout)
    inputs, outputs = value_info(p)
    entry = {
        "name": name,
        "kind": "lm",
        "opset": 17,
        "variants": [
            {
                "name": "dynamic",
                "file": "dynamic.onnx",
                "inputs": inputs,
                "outputs": outputs,
                "shape_flags": shape_flags(inputs, {"ids": [1, LM_SEQ]}),
                "value_range": {"ids": [0, lm.VOCAB - 1]},
            }
        ],
        "calib": "calib.npy",
        "heldout": "heldout.npy",
        "params": sum(x.numel() for x in model.parameters()),
        "steps": LM_STEPS,
        "final_train_loss": round(loss, 4),
        "heldout_perplexity_torch": round(float(np.exp(hl)), 4),
        "sources": sources,
        # Checks the files against this manifest (not across machines: the
        # training's float arithmetic follows the CPU).
        "sha256": {f: lm.sha256(os.path.join(out, f)) for f in ("dynamic.onnx", "calib.npy", "heldout.npy")},
    }
    return entry


# ---------------------------------------------------------------- driver


def all_models():
    """(name, generator) in generation order: small models first."""
    ms = [
        ("if_branch", lambda o: gen_if("if_branch", o)),
        ("lstm", lambda o: gen_rnn("lstm", "lstm", o)),
        ("gru", lambda o: gen_rnn("gru", "gru", o)),
        ("bert_tiny", lambda o: gen_bert("bert_tiny", o)),
        # An encoder of a width INT8 can pay on (BERT-mini's shape), for
        # the INT8 benchmarks; not in the quick test subset.
        ("bert_small", lambda o: gen_bert("bert_small", o, seq=128, d=256, heads=4, layers=4, ffn=1024)),
        ("lm_tiny", lambda o: gen_lm("lm_tiny", o)),
        ("vit_tiny", lambda o: gen_image("vit_tiny", {}, 17, o, dynhw=False)),
    ]
    for name in NEXT:
        ms.append((name, (lambda n: lambda o: gen_next(n, o))(name)))
    ms.append(("detector", lambda o: gen_detector("detector", o)))
    for name, kw, opset in IMAGE:
        ms.append((name, (lambda n, k, op: lambda o: gen_image(n, k, op, o))(name, kw, opset)))
    return ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    ap.add_argument("--force", action="store_true", help="regenerate even when up to date")
    a = ap.parse_args()
    models = all_models()
    if a.list:
        print("\n".join(n for n, _ in models))
        return
    only = set(filter(None, a.only.split(",")))
    unknown = only - {n for n, _ in models}
    if unknown:
        raise SystemExit("gen.py: unknown model(s): %s" % ", ".join(sorted(unknown)))
    root = os.path.join(cache_dir(), "zoo")
    os.makedirs(root, exist_ok=True)
    h = gen_hash()
    t_all = time.time()
    for name, fn in models:
        if only and name not in only:
            continue
        dest = os.path.join(root, name)
        marker = os.path.join(dest, ".gen")
        mh = model_hash(name, h)
        if not a.force and os.path.exists(marker) and open(marker).read().strip() == mh:
            continue
        t0 = time.time()
        tmp = tempfile.mkdtemp(prefix=".tmp-" + name + "-", dir=root)
        try:
            entry = fn(tmp)
            entry["seconds"] = round(time.time() - t0, 1)
            entry["generator_hash"] = mh
            with open(os.path.join(tmp, "meta.json"), "w") as f:
                json.dump(entry, f, indent=1, sort_keys=True)
            with open(os.path.join(tmp, ".gen"), "w") as f:
                f.write(mh + "\n")
            if os.path.exists(dest):
                shutil.rmtree(dest)
            os.rename(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        print("zoo: %-20s %5.1f s" % (name, time.time() - t0), file=sys.stderr, flush=True)
    write_manifest(root, [n for n, _ in models], h)
    print("zoo: %s (%.1f s)" % (os.path.join(root, "models.json"), time.time() - t_all), file=sys.stderr)


def write_manifest(root, names, h):
    entries = []
    for n in names:
        p = os.path.join(root, n, "meta.json")
        if not os.path.exists(p):
            continue
        with open(p) as f:
            e = json.load(f)
        e["dir"] = n
        e.pop("seconds", None)  # keep the manifest byte-identical between runs
        entries.append(e)
    man = {
        "schema": 1,
        "generator": "scripts/zoo/gen.py",
        "generator_hash": h,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "onnx": onnx.__version__,
        "models": entries,
    }
    tmp = os.path.join(root, ".models.json.tmp")
    with open(tmp, "w") as f:
        json.dump(man, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, os.path.join(root, "models.json"))


if __name__ == "__main__":
    main()
