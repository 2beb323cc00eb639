#!/usr/bin/python3
"""Write the PyTorch fixture of qkv's non-autoregressive (nat) encoder-decoder:
tests/data/ref_nat.safetensors, loaded by tests/models/test_nat_model.c.

    /usr/bin/python3 scripts/gen_reference_nat.py [OUT_DIR]     # default tests/data

The model is gen_reference.py's Seq2SeqTransformer (same parameter names as qkv) with the two
differences of a conditional masked language model (Ghazvininejad et al. 2019): the decoder has
no causal mask, and a length head nn.Linear(C, max_len + 1) reads the mean of the encoder states
over the non-padded source positions (fairseq's NATransformerModel.forward_length). The loss is
the label-smoothed cross-entropy over the masked target positions plus 0.1 x the cross-entropy of
the length logits against the true lengths. Float64 throughout; the file holds param.*, input.*,
out.* (logits, length logits, both loss terms, the loss) and grad.param.* (gradients of the loss).
Kept apart from gen_reference.py so the existing fixtures stay byte-identical.
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_reference import Seq2SeqTransformer, save_safetensors  # noqa: E402  (sets float64)


class NATSeq2SeqTransformer(Seq2SeqTransformer):
    """Seq2SeqTransformer without the decoder's causal mask, plus length_head."""

    def __init__(self, Vs, Vt, C, H, Le, Ld, FF, norm_first, max_len):
        super().__init__(Vs, Vt, C, H, Le, Ld, FF, norm_first)
        self.length_head = nn.Linear(C, max_len + 1)

    def forward(self, src, tgt_in, pad=0):
        memory = self.transformer.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src == pad)
        out = self.transformer.decoder(self.embed(self.tgt_embed, tgt_in), memory, tgt_key_padding_mask=tgt_in == pad,
                                       memory_key_padding_mask=src == pad)
        keep = (src != pad).to(memory.dtype)
        pooled = (memory * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        return self.generator(out), self.length_head(pooled)


def nat_fixture(out_dir, norm_first):
    torch.manual_seed(8)
    Vs, Vt, C, H, Le, Ld, FF, max_len, mask_id, eps, length_weight = 11, 13, 8, 2, 2, 2, 16, 16, 12, 0.1, 0.1
    model = NATSeq2SeqTransformer(Vs, Vt, C, H, Le, Ld, FF, norm_first, max_len)
    model.train()  # dropout 0; the slow (non-fused) path, which computes padded positions as qkv does
    src = torch.tensor([[5, 3, 9, 2, 7, 1], [4, 8, 6, 0, 0, 0]])  # 0 = pad
    tgt = torch.tensor([[10, 4, 7, 11, 3], [6, 11, 3, 0, 0]])
    masked = torch.tensor([[1, 0, 1, 1, 0], [0, 1, 0, 0, 0]], dtype=torch.bool)
    tgt_in = tgt.masked_fill(masked, mask_id)
    targets = tgt.masked_fill(~masked, 0)
    lengths = (tgt != 0).sum(1)
    logits, length_logits = model(src, tgt_in)
    token_ce = F.cross_entropy(logits.reshape(-1, Vt), targets.reshape(-1), ignore_index=0, label_smoothing=eps)
    length_ce = F.cross_entropy(length_logits, lengths)
    loss = token_ce + length_weight * length_ce
    loss.backward()
    tensors = {"param." + n: p for n, p in model.named_parameters()}
    tensors.update({"grad.param." + n: p.grad for n, p in model.named_parameters()})
    tensors.update({"input.src": src, "input.tgt": tgt, "input.masked": masked, "out.logits": logits,
                    "out.length_logits": length_logits, "out.token_ce": token_ce, "out.length_ce": length_ce,
                    "out.loss": loss})
    cfg = {"src_vocab": Vs, "tgt_vocab": Vt, "d_model": C, "n_heads": H, "n_encoder_layers": Le,
           "n_decoder_layers": Ld, "dim_feedforward": FF, "norm_first": norm_first, "max_len": max_len,
           "pad_id": 0, "mask_id": mask_id, "label_smoothing": eps, "length_weight": length_weight}
    name = f"ref_nat_{'pre' if norm_first else 'post'}.safetensors"
    save_safetensors(os.path.join(out_dir, name), tensors, {"config": json.dumps(cfg)})


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data")
    os.makedirs(out_dir, exist_ok=True)
    for norm_first in (False, True):
        nat_fixture(out_dir, norm_first)
    print("NAT fixtures written to", os.path.abspath(out_dir))


if __name__ == "__main__":
    main()
