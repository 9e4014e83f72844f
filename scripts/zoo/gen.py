#!/usr/bin/python3
"""Generates optc's model zoo: real architectures (torchvision 0.14) and
sequence models with random, seeded weights, exported to ONNX the ways
models are found in the wild.

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
