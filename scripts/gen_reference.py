#!/usr/bin/python3
"""Write the PyTorch reference fixtures that qkv's parity tests load (tests/data/*.safetensors).

Run with Debian's interpreter, which has python3-torch (no PyPI needed):

    scripts/setup.sh --torch           # apt-get install python3-torch python3-numpy
    /usr/bin/python3 scripts/gen_reference.py [OUT_DIR]   # default tests/data

Everything is computed in float64 so the C double build can match tightly and the float build to
1e-5 relative. Each file holds, under PyTorch state_dict names:
    param.<name>   module parameters            input.<name>   inputs (masks as I32, 1 = masked)
    out.<name>     forward outputs              dout.<name>    the upstream gradient used
    grad.<name>    gradients of sum(out * dout) w.r.t. params (grad.param.<name>) and inputs
and a JSON configuration in the metadata key "config". The script uses only torch, numpy's absence
is fine, and the standard library (the safetensors writer below is 30 lines of json + struct).
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def save_safetensors(path, tensors, metadata):
    """Write a safetensors file: u64 header size, JSON header padded to 8 bytes, raw data."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        if t.dtype == torch.float64:
            dtype, fmt = "F64", "d"
        elif t.dtype == torch.float32:
            dtype, fmt = "F32", "f"
        elif t.dtype in (torch.int32, torch.int64, torch.bool):
            t, dtype, fmt = t.to(torch.int32), "I32", "i"
        else:
            raise ValueError(f"{name}: unsupported dtype {t.dtype}")
        flat = t.reshape(-1).tolist()
        blob = struct.pack("<%d%s" % (len(flat), fmt), *flat)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def record(module, inputs, forward, extra_params=None):
    """Run forward, backprop sum(out * dout) and collect params, inputs, outputs and gradients."""
    tensors = {}
    params = dict(module.named_parameters()) if module is not None else {}
    if extra_params:
        params.update(extra_params)
    for name, p in params.items():
        tensors["param." + name] = p
    for name, x in inputs.items():
        tensors["input." + name] = x
    outs = forward()
    loss = 0
    for name, y in outs.items():
        dy = torch.randn_like(y) if y.dim() > 0 else torch.ones_like(y)
        tensors["out." + name] = y
        tensors["dout." + name] = dy
        loss = loss + (y * dy).sum()
    loss.backward()
    for name, p in params.items():
        tensors["grad.param." + name] = p.grad
    for name, x in inputs.items():
        if x.requires_grad:
            tensors["grad.input." + name] = x.grad
    return tensors


def mha_fixture(out_dir):
    torch.manual_seed(1)
    B, T, S, C, H = 2, 5, 4, 8, 2
    m = nn.MultiheadAttention(C, H, batch_first=True, dropout=0.0)
    with torch.no_grad():  # non-zero biases so the test sees them
        m.in_proj_bias.uniform_(-0.5, 0.5)
        m.out_proj.bias.uniform_(-0.5, 0.5)
    q = torch.randn(B, T, C, requires_grad=True)
    kv = torch.randn(B, S, C, requires_grad=True)
    pad_self = torch.zeros(B, T, dtype=torch.bool)
    pad_self[1, 3:] = True  # batch 1 has 3 valid tokens
    pad_cross = torch.zeros(B, S, dtype=torch.bool)
    pad_cross[0, 2:] = True
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)

    def forward():
        self_pad, w_self_pad = m(q, q, q, key_padding_mask=pad_self, need_weights=True,
                                 average_attn_weights=False)
        self_causal, w_causal = m(q, q, q, attn_mask=causal, need_weights=True, average_attn_weights=False)
        cross, w_cross = m(q, kv, kv, key_padding_mask=pad_cross, need_weights=True,
                           average_attn_weights=False)
        return {"self_pad": self_pad, "self_causal": self_causal, "cross": cross,
                "weights_self_pad": w_self_pad, "weights_causal": w_causal, "weights_cross": w_cross}

    tensors = record(m, {"q": q, "kv": kv}, forward)
    tensors["input.pad_self"] = pad_self
    tensors["input.pad_cross"] = pad_cross
    save_safetensors(os.path.join(out_dir, "ref_mha.safetensors"), tensors,
                     {"config": json.dumps({"d_model": C, "n_heads": H}), "torch": torch.__version__})


def layer_fixture(out_dir, kind, norm_first):
    torch.manual_seed(2 if kind == "encoder" else 3)
    B, T, S, C, H, FF = 2, 5, 4, 8, 2, 16
    cls = nn.TransformerEncoderLayer if kind == "encoder" else nn.TransformerDecoderLayer
    layer = cls(C, H, dim_feedforward=FF, dropout=0.0, activation="relu", batch_first=True,
                norm_first=norm_first)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if name.endswith("bias") or name.startswith("norm"):
                p.uniform_(-0.5, 0.5) if name.endswith("bias") else p.uniform_(0.5, 1.5)
    layer.train()  # dropout 0 and train mode: no fused fast path, same math as the documented one
    x = torch.randn(B, T, C, requires_grad=True)
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1, 4:] = True
    inputs = {"x": x}
    if kind == "encoder":
        def forward():
            return {"y": layer(x, src_key_padding_mask=pad)}
    else:
        mem = torch.randn(B, S, C, requires_grad=True)
        mem_pad = torch.zeros(B, S, dtype=torch.bool)
        mem_pad[0, 3:] = True
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        inputs["memory"] = mem

        def forward():
            return {"y": layer(x, mem, tgt_mask=causal, tgt_key_padding_mask=pad,
                               memory_key_padding_mask=mem_pad)}
    tensors = record(layer, inputs, forward)
    tensors["input.pad"] = pad
    if kind == "decoder":
        tensors["input.memory_pad"] = mem_pad
    cfg = {"d_model": C, "n_heads": H, "dim_feedforward": FF, "norm_first": norm_first,
           "activation": "relu", "layer_norm_eps": 1e-5}
    name = f"ref_{kind}_layer_{'pre' if norm_first else 'post'}.safetensors"
    save_safetensors(os.path.join(out_dir, name), tensors, {"config": json.dumps(cfg)})


def ops_fixture(out_dir):
    torch.manual_seed(4)
    N, C, V = 6, 7, 11
    ln = nn.LayerNorm(C)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-0.5, 0.5)
    x = torch.randn(N, C, requires_grad=True)
    g = torch.randn(N, C, requires_grad=True)
    logits = torch.randn(N, V, requires_grad=True)
    targets = torch.tensor([3, 0, 10, -100, 5, 5])

    def forward():
        return {"layernorm": ln(x), "gelu_erf": F.gelu(g), "gelu_tanh": F.gelu(g, approximate="tanh"),
                "ce_smooth": F.cross_entropy(logits, targets, ignore_index=-100, label_smoothing=0.1),
                "ce_plain": F.cross_entropy(logits, targets, ignore_index=-100)}

    tensors = record(ln, {"x": x, "g": g, "logits": logits}, forward)
    tensors["input.targets"] = targets
    save_safetensors(os.path.join(out_dir, "ref_ops.safetensors"), tensors,
                     {"config": json.dumps({"N": N, "C": C, "V": V, "eps": 1e-5, "ignore_index": -100,
                                            "label_smoothing": 0.1})})


class TinyTagger(nn.Module):
    """Embedding -> post-LN encoder layer -> linear: the model of the AdamW trajectory test."""

    def __init__(self, V, C, H, FF, K):
        super().__init__()
        self.embed = nn.Embedding(V, C)
        self.layer = nn.TransformerEncoderLayer(C, H, FF, dropout=0.0, batch_first=True)
        self.head = nn.Linear(C, K)

    def forward(self, ids):
        return self.head(self.layer(self.embed(ids)))


def adamw_fixture(out_dir):
    torch.manual_seed(5)
    V, C, H, FF, K, B, T, steps = 10, 8, 2, 16, 5, 3, 6, 10
    model = TinyTagger(V, C, H, FF, K)
    model.train()
    ids = torch.randint(0, V, (B, T))
    labels = torch.randint(0, K, (B, T))
    tensors = {"init." + n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(ids).reshape(-1, K), labels.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    tensors.update({"final." + n: p.detach().clone() for n, p in model.named_parameters()})
    tensors["input.ids"] = ids
    tensors["input.labels"] = labels
    tensors["out.losses"] = torch.tensor(losses)
    cfg = {"V": V, "d_model": C, "n_heads": H, "dim_feedforward": FF, "classes": K, "steps": steps,
           "lr": 1e-2, "beta1": 0.9, "beta2": 0.98, "eps": 1e-9, "weight_decay": 0.01}
    save_safetensors(os.path.join(out_dir, "ref_adamw.safetensors"), tensors, {"config": json.dumps(cfg)})


def sinusoidal(L, C):
    """pe[t, 2i] = sin(t / 10000^(2i/C)), pe[t, 2i+1] = cos(...), as qkv_sinusoidal_pe."""
    pe = torch.zeros(L, C)
    t = torch.arange(L).unsqueeze(1)
    div = torch.exp(torch.arange(0, C, 2) * (-math.log(10000.0) / C))
    pe[:, 0::2] = torch.sin(t * div)
    pe[:, 1::2] = torch.cos(t * div[: C // 2])
    return pe


class Seq2SeqTransformer(nn.Module):
    """The PyTorch twin of qkv's encoder-decoder model: same parameter names (qkv_model.h)."""

    def __init__(self, Vs, Vt, C, H, Le, Ld, FF, norm_first):
        super().__init__()
        self.C = C
        self.src_embed = nn.Embedding(Vs, C)
        self.tgt_embed = nn.Embedding(Vt, C)
        self.transformer = nn.Transformer(C, H, Le, Ld, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
        self.generator = nn.Linear(C, Vt)

    def embed(self, table, ids):
        return table(ids) * math.sqrt(self.C) + sinusoidal(ids.shape[1], self.C)

    def forward(self, src, tgt_in, pad=0):
        T = tgt_in.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        out = self.transformer(self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt_in), tgt_mask=causal,
                               src_key_padding_mask=src == pad, tgt_key_padding_mask=tgt_in == pad,
                               memory_key_padding_mask=src == pad)
        return self.generator(out)


def seq2seq_fixture(out_dir, norm_first):
    torch.manual_seed(6)
    Vs, Vt, C, H, Le, Ld, FF = 11, 13, 8, 2, 2, 2, 16
    model = Seq2SeqTransformer(Vs, Vt, C, H, Le, Ld, FF, norm_first)
    model.train()
    src = torch.tensor([[5, 3, 9, 2, 7, 1], [4, 8, 6, 0, 0, 0]])  # 0 = pad
    tgt_in = torch.tensor([[2, 10, 4, 7, 12], [2, 6, 11, 0, 0]])
    tgt_out = torch.tensor([[10, 4, 7, 12, 3], [6, 11, 3, 0, 0]])
    tensors = {"param." + n: p for n, p in model.named_parameters()}
    logits = model(src, tgt_in)
    loss = F.cross_entropy(logits.reshape(-1, Vt), tgt_out.reshape(-1), ignore_index=0, label_smoothing=0.1)
    loss.backward()
    tensors.update({"grad.param." + n: p.grad for n, p in model.named_parameters()})
    tensors.update({"input.src": src, "input.tgt_in": tgt_in, "input.tgt_out": tgt_out, "out.logits": logits,
                    "out.loss": loss})
    cfg = {"src_vocab": Vs, "tgt_vocab": Vt, "d_model": C, "n_heads": H, "n_encoder_layers": Le,
           "n_decoder_layers": Ld, "dim_feedforward": FF, "norm_first": norm_first, "pad_id": 0,
           "label_smoothing": 0.1}
    name = f"ref_seq2seq_{'pre' if norm_first else 'post'}.safetensors"
    save_safetensors(os.path.join(out_dir, name), tensors, {"config": json.dumps(cfg)})


def spread_biases_and_norms(model):
    """Biases uniform in [-0.5, 0.5), LayerNorm gains in [0.5, 1.5): a test then sees them."""
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("bias"):
                p.uniform_(-0.5, 0.5)
            elif "norm" in n:
                p.uniform_(0.5, 1.5)


def sincos_2d(rows, cols, C):
    """2-D sin-cos positions as qkv_sincos_2d_pe: [sin(r w) | cos(r w) | sin(c w) | cos(c w)],
    w_k = 10000^(-k / Q), Q = C / 4, cells in raster order (MoCo v3's layout)."""
    Q = C // 4
    omega = 1.0 / 10000.0 ** (torch.arange(Q) / Q)
    r = torch.arange(rows).repeat_interleave(cols).unsqueeze(1) * omega
    c = torch.arange(cols).repeat(rows).unsqueeze(1) * omega
    return torch.cat([torch.sin(r), torch.cos(r), torch.sin(c), torch.cos(c)], dim=1)


class PatchEmbed(nn.Module):
    """Patches of a channels-last image flattened as (row in patch, column, channel), then a
    Linear: vit-pytorch's Rearrange('b (h p1) (w p2) c -> b (h w) (p1 p2 c)') + nn.Linear.
    With a window W > P each token is the W x W window centred on its patch, zero-padded
    (F.unfold with padding (W - P) / 2, reordered to (row, column, channel))."""

    def __init__(self, P, Ch, C, window=None):
        super().__init__()
        self.P, self.W = P, window or P
        self.proj = nn.Linear(self.W * self.W * Ch, C)

    def patches(self, x):
        B, Hi, Wi, Ch = x.shape
        P, W = self.P, self.W
        if W == P:
            x = x.reshape(B, Hi // P, P, Wi // P, P, Ch).permute(0, 1, 3, 2, 4, 5)
            return x.reshape(B, (Hi // P) * (Wi // P), P * P * Ch)
        cols = F.unfold(x.permute(0, 3, 1, 2), W, padding=(W - P) // 2, stride=P)  # (B, Ch W W, N)
        N = cols.shape[2]
        return cols.reshape(B, Ch, W, W, N).permute(0, 4, 2, 3, 1).reshape(B, N, W * W * Ch)

    def forward(self, x):
        return self.proj(self.patches(x))

    def as_conv2d(self, x):
        """The same map as a convolutional stem: Conv2d(Ch, C, W, stride=P, padding=(W - P) / 2)
        on NCHW (torchvision's conv_proj when W = P)."""
        C, Ch, W = self.proj.weight.shape[0], x.shape[3], self.W
        conv = nn.Conv2d(Ch, C, W, stride=self.P, padding=(W - self.P) // 2)
        with torch.no_grad():
            conv.weight.copy_(self.proj.weight.reshape(C, W, W, Ch).permute(0, 3, 1, 2))
            conv.bias.copy_(self.proj.bias)
        return conv(x.permute(0, 3, 1, 2)).flatten(2).transpose(1, 2)


class TinyViT(nn.Module):
    """The PyTorch twin of qkv's image model (qkv_model.h, src/nn/patch_embed.c): same names."""

    def __init__(self, Hi, Wi, Ch, P, C, H, layers, FF, K, class_token, pos, norm_first, activation, window=None):
        super().__init__()
        self.grid, self.C, self.pos = (Hi // P, Wi // P), C, pos
        N = self.grid[0] * self.grid[1]
        self.patch_embed = PatchEmbed(P, Ch, C, window)
        self.class_token = nn.Parameter(torch.randn(1, 1, C) * 0.5) if class_token else None
        if pos == "learned":
            self.pos_embedding = nn.Parameter(torch.randn(1, N + int(class_token), C) * 0.5)
        layer = nn.TransformerEncoderLayer(C, H, FF, dropout=0.0, activation=activation, batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(C), enable_nested_tensor=False)
        self.head = nn.Linear(C, K)

    def forward(self, x):
        z = self.patch_embed(x)
        if self.pos == "sincos_2d":
            z = z + sincos_2d(*self.grid, self.C)
        if self.class_token is not None:
            z = torch.cat([self.class_token.expand(x.shape[0], -1, -1), z], dim=1)
        if self.pos == "learned":
            z = z + self.pos_embedding
        h = self.encoder(z)
        return self.head(h[:, 0] if self.class_token is not None else h.mean(dim=1))


def vit_fixture(out_dir, class_token, pos, norm_first, activation, name, window=None):
    """A small ViT on a non-square, two-channel image (rows and columns, channels cannot be
    confused): logits, label-smoothed loss, every parameter gradient and the pixels' gradient;
    window: overlapping W x W windows instead of the patches (a convolutional stem)."""
    torch.manual_seed(7)
    B, Hi, Wi, Ch, P, C, H, layers, FF, K = 3, 4, 6, 2, 2, 8, 2, 2, 16, 5
    model = TinyViT(Hi, Wi, Ch, P, C, H, layers, FF, K, class_token, pos, norm_first, activation, window)
    spread_biases_and_norms(model)
    model.train()  # dropout 0 and train mode: no fused fast path
    pixels = torch.rand(B, Hi, Wi, Ch, requires_grad=True)
    labels = torch.tensor([3, 0, 4])
    conv_gap = (model.patch_embed(pixels) - model.patch_embed.as_conv2d(pixels)).abs().max().item()
    assert conv_gap < 1e-12, conv_gap  # the Linear over patches (or windows) is the Conv2d
    logits = model(pixels)
    loss = F.cross_entropy(logits, labels, label_smoothing=0.1)
    loss.backward()
    tensors = {"param." + n: p for n, p in model.named_parameters()}
    tensors.update({"grad.param." + n: p.grad for n, p in model.named_parameters()})
    tensors.update({"input.pixels": pixels, "input.labels": labels, "out.logits": logits, "out.loss": loss,
                    "out.patches": model.patch_embed.patches(pixels), "grad.input.pixels": pixels.grad})
    image = {"height": Hi, "width": Wi, "channels": Ch, "patch_size": P, "class_token": class_token}
    if window:
        image["window"] = window
    cfg = {"image": image,
           "pos": pos, "d_model": C, "n_heads": H, "n_encoder_layers": layers, "dim_feedforward": FF, "classes": K,
           "norm_first": norm_first, "activation": activation, "label_smoothing": 0.1}
    save_safetensors(os.path.join(out_dir, name), tensors, {"config": json.dumps(cfg)})


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data")
    os.makedirs(out_dir, exist_ok=True)
    mha_fixture(out_dir)
    for kind in ("encoder", "decoder"):
        for norm_first in (False, True):
            layer_fixture(out_dir, kind, norm_first)
    ops_fixture(out_dir)
    adamw_fixture(out_dir)
    for norm_first in (False, True):
        seq2seq_fixture(out_dir, norm_first)
    vit_fixture(out_dir, True, "learned", True, "gelu", "ref_vit_cls_learned.safetensors")
    vit_fixture(out_dir, False, "sincos_2d", False, "relu", "ref_vit_mean_sincos.safetensors")
    vit_fixture(out_dir, False, "sincos_2d", True, "gelu", "ref_vit_window.safetensors", window=4)
    print("fixtures written to", os.path.abspath(out_dir))


if __name__ == "__main__":
    main()
