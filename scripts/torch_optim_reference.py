#!/usr/bin/env python3
"""Reference values for tests/train/test_optim.c from PyTorch's optimisers (float64).

Two steps of torch.optim.SGD (momentum, plain and Nesterov), Adam (L2 weight decay) and AdamW
(decoupled weight decay) on the 3-element parameter and fixed gradients the test uses, and
torch.nn.utils.clip_grad_norm_ on a known vector. Run with the system Python that has torch
(scripts/setup.sh --torch):   /usr/bin/python3 scripts/torch_optim_reference.py
"""
import torch

torch.set_default_dtype(torch.float64)
P0 = [1.0, -2.0, 0.5]
GRADS = [[0.1, -0.2, 0.3], [-0.4, 0.5, 0.0]]


def run(make):
    p = torch.nn.Parameter(torch.tensor(P0))
    opt = make([p])
    out = []
    for g in GRADS:
        p.grad = torch.tensor(g)
        opt.step()
        out.append(p.detach().clone().tolist())
    return out


cases = {
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    "sgd_nesterov": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01,
                                               nesterov=True),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.9, 0.999), eps=1e-3,
                                        weight_decay=0.1),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.8, 0.99), eps=1e-3,
                                          weight_decay=0.5),
}
print("torch", torch.__version__)
for name, make in cases.items():
    for step, p in enumerate(run(make), 1):
        print(f"{name} step {step}: {{{', '.join(repr(x) for x in p)}}}")

g = [torch.tensor([3.0, 4.0]), torch.tensor([12.0])]
ps = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))]
for p, x in zip(ps, g):
    p.grad = x.clone()
norm = torch.nn.utils.clip_grad_norm_(ps, 6.5)
print("clip norm", repr(norm.item()), "grads", [p.grad.tolist() for p in ps])
