"""bench/gpu_probe.py's measurements, in PyTorch: a replica of the kit's own unfused Transformer training step
(nmtkit/model/transformer.py, layers.py; nmtkit.training.trainer) at a profile's shapes, its peak memory, a timed
matmul, and PyTorch's FLOP counter. Imported only by gpu_probe.py, and only once torch imports: PyTorch is no
dependency of the kit.

What is replicated, because it sets the memory a step keeps: float32 weights with Adam's two float32 slots; under
mixed_float16 each weight cast to float16 where it is used and the matmuls in float16; pre-norm layers whose
LayerNorm runs in float32 and keeps x-hat and 1/sigma (the kit's written gradient); one matmul for q, k and v in
self-attention (k and v together in cross-attention); scores cast to float32, softmax in float32, its output cast
back; dropout with a boolean mask (the embeddings, the attention weights, the FFN's hidden layer, every residual
branch); the logits through the tied embedding, cast to float32; the label-smoothed loss as the kit keeps it (one
float32 [tokens, vocab] tensor, TensorFlow's fused softmax cross-entropy's backprop, alive for the backward).
Not replicated: the loss scale's multiply (a scalar), Horovod. Attention is PyTorch's plain matmuls: no fused
kernel, as TensorFlow 2.18 without XLA runs it."""
from __future__ import annotations

import math
import time

import torch

PAD, BOS = 0, 2
DTYPE = {"mixed_float16": torch.float16, "float32": torch.float32}


class BoolDropout(torch.autograd.Function):
    """x * scale where a random bool mask keeps it, else 0; only the mask is saved (nmtkit.model.layers.Dropout)."""

    @staticmethod
    def forward(ctx, x, rate):
        keep = torch.rand_like(x) >= rate  # 16-bit draws in float16, as the kit's uint16 ones
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - rate)
        return torch.where(keep, x * ctx.scale, torch.zeros((), dtype=x.dtype, device=x.device))

    @staticmethod
    def backward(ctx, dy):
        (keep,) = ctx.saved_tensors
        return torch.where(keep, dy * ctx.scale, torch.zeros((), dtype=dy.dtype, device=dy.device)), None


class KitLayerNorm(torch.autograd.Function):
    """nmtkit.model.layers.layer_norm: float32, its gradient written out from x-hat, 1/sigma and gamma."""

    @staticmethod
    def forward(ctx, x, gamma, beta, eps):
        xc = x - x.mean(-1, keepdim=True)
        inv = torch.rsqrt(xc.square().mean(-1, keepdim=True) + eps)
        xhat = xc * inv
        ctx.save_for_backward(xhat, inv, gamma)
        return xhat * gamma + beta

    @staticmethod
    def backward(ctx, dy):
        xhat, inv, gamma = ctx.saved_tensors
        g = dy * gamma
        dx = inv * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
        rows = tuple(range(dy.dim() - 1))
        return dx, (dy * xhat).sum(rows), dy.sum(rows), None


class SmoothedXent(torch.autograd.Function):
    """nmtkit.model.transformer._smoothed_loss: per-position label-smoothed cross-entropy from float32 logits,
    keeping only the fused kernel's backprop (softmax - one-hot) for the backward."""

    @staticmethod
    def forward(ctx, flat, ids, smoothing):
        n = flat.shape[-1]
        low = smoothing / (n - 1)
        lse = torch.logsumexp(flat, -1)
        nll = lse - flat.gather(1, ids[:, None])[:, 0]
        backprop = torch.softmax(flat, -1)
        rows = torch.arange(ids.shape[0], device=ids.device)
        backprop[rows, ids] -= 1.0
        sum_logp = flat.sum(-1) - n * lse
        ctx.save_for_backward(backprop, ids)
        ctx.low, ctx.smoothing = low, smoothing
        return (1.0 - smoothing - low) * nll - low * sum_logp

    @staticmethod
    def backward(ctx, dy):
        backprop, ids = ctx.saved_tensors
        g = backprop - ctx.low
        g[torch.arange(ids.shape[0], device=ids.device), ids] += ctx.smoothing + ctx.low
        return g * dy[:, None], None, None


class Replica(torch.nn.Module):
    """The kit's Transformer's variables (float32; a block's weights by name: "self_qkv", "cross_kv", "up",
    "up_b", "norm1_g", ...) and its training forward in `dtype`."""

    def __init__(self, m, vocab: int, dtype, rate: float):
        super().__init__()
        self.m, self.dtype, self.rate, d, f = m, dtype, rate, m.d_model, m.d_ff

        def block(cross: bool):
            shapes = {"self_qkv": (d, 3 * d), "self_o": (d, d), "up": (d, f), "up_b": (f,), "down": (f, d),
                      "down_b": (d,)}
            if cross:
                shapes.update({"cross_q": (d, d), "cross_kv": (d, 2 * d), "cross_o": (d, d)})
            if m.attention_bias:
                shapes.update({k + "_b": (v[1],) for k, v in list(shapes.items()) if k[:5] in ("self_", "cross")})
            p = {k: torch.nn.Parameter(torch.randn(*v) * 0.02) for k, v in shapes.items()}
            for name in ("norm1", "norm2", "norm3")[:3 if cross else 2]:
                p.update({name + "_g": torch.nn.Parameter(torch.ones(d)),
                          name + "_beta": torch.nn.Parameter(torch.zeros(d))})
            return torch.nn.ParameterDict(p)

        self.embedding = torch.nn.Parameter(torch.randn(vocab, d) * d ** -0.5)
        self.enc = torch.nn.ModuleList([block(False) for _ in range(m.encoder_layers)])
        self.dec = torch.nn.ModuleList([block(True) for _ in range(m.decoder_layers)])
        self.final = torch.nn.ParameterDict({f"{s}_{k}": torch.nn.Parameter(torch.ones(d) * (k == "g"))
                                             for s in ("enc", "dec") for k in ("g", "beta")})
        pos = torch.arange(m.max_positions, dtype=torch.float64)[:, None]
        half = d // 2
        inv = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float64) / max(half - 1, 1))
        self.register_buffer("positions", torch.cat([torch.sin(pos * inv), torch.cos(pos * inv)], 1).float())

    def drop(self, x):
        return BoolDropout.apply(x, self.rate) if self.rate > 0 else x

    def norm(self, x, p, name):
        return KitLayerNorm.apply(x.float(), p[name + "_g"], p[name + "_beta"], 1e-6).to(self.dtype)

    def linear(self, x, p, name):
        y = x @ p[name].to(self.dtype)
        return y + p[name + "_b"].to(self.dtype) if name + "_b" in p else y

    def attention(self, x, mem, p, kind, bias):
        b, t, d = x.shape
        h = self.m.num_heads
        if mem is None:
            q, k, v = self.linear(x, p, kind + "_qkv").split(d, -1)
        else:
            q, (k, v) = self.linear(x, p, kind + "_q"), self.linear(mem, p, kind + "_kv").split(d, -1)
        heads = lambda z: z.reshape(z.shape[0], z.shape[1], h, d // h).transpose(1, 2)  # noqa: E731
        q, k, v = heads(q) * (d // h) ** -0.5, heads(k), heads(v)
        scores = (q @ k.transpose(-1, -2)).float() + bias
        weights = torch.softmax(scores, -1).to(self.dtype)
        out = self.drop(weights) @ v
        return self.linear(out.transpose(1, 2).reshape(b, t, d), p, kind + "_o")

    def ffn(self, x, p):
        return self.linear(self.drop(torch.relu(self.linear(x, p, "up"))), p, "down")

    def embed(self, ids):
        x = self.embedding.to(self.dtype)[ids] * math.sqrt(self.m.d_model) * (ids != PAD)[..., None].to(self.dtype)
        return self.drop(x + self.positions[:ids.shape[1]].to(self.dtype)[None])

    def forward(self, src, tgt_in):
        big = -1e9
        src_bias = (src == PAD).float()[:, None, None, :] * big
        causal = torch.triu(torch.ones(tgt_in.shape[1], tgt_in.shape[1], device=src.device), 1)[None, None] * big
        x = self.embed(src)
        for p in self.enc:
            x = x + self.drop(self.attention(self.norm(x, p, "norm1"), None, p, "self", src_bias))
            x = x + self.drop(self.ffn(self.norm(x, p, "norm2"), p))
        mem = self.norm(x, self.final, "enc")
        y = self.embed(tgt_in)
        for p in self.dec:
            y = y + self.drop(self.attention(self.norm(y, p, "norm1"), None, p, "self", causal))
            y = y + self.drop(self.attention(self.norm(y, p, "norm2"), mem, p, "cross", src_bias))
            y = y + self.drop(self.ffn(self.norm(y, p, "norm3"), p))
        return (self.norm(y, self.final, "dec") @ self.embedding.to(self.dtype).t()).float()  # tied logits


def loss_of(model, src, tgt, smoothing: float):
    tgt_in, labels = tgt[:, :-1], tgt[:, 1:]
    logits = model(src, tgt_in)
    per = SmoothedXent.apply(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), smoothing)
    mask = (labels != PAD).float().reshape(-1)
    return (per * mask).sum() / mask.sum()


def batch(vocab: int, size: int, length: int, device):
    """Synthetic ids of the homework's longest sentences (bench/gpu.py's): src [size, length], tgt BOS + length."""
    g = torch.Generator(device="cpu").manual_seed(size)
    src = torch.randint(4, vocab, (size, length), generator=g)
    tgt = torch.cat([torch.full((size, 1), BOS), torch.randint(4, vocab, (size, length), generator=g)], 1)
    return src.to(device), tgt.to(device)


def peak_step(cfg, vocab: int, length: int, size: int, precision: str, dropout: float, device,
              cap_bytes: float | None = None) -> dict:
    """One steady training step's peak allocated bytes (a warm-up step first: Adam's slots exist), fresh weights;
    under `cap_bytes` (the allocator refuses beyond it): whether the step ran out of memory."""
    cuda = device.type == "cuda"
    if cuda and cap_bytes:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / total))
    model = opt = None
    try:
        model = Replica(cfg.model, vocab, DTYPE[precision], dropout).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=False)
        src, tgt = batch(vocab, size, length, device)
        for i in range(2):
            if cuda and i == 1:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            opt.zero_grad(set_to_none=True)
            loss_of(model, src, tgt, cfg.model.label_smoothing).backward()
            opt.step()
        peak = torch.cuda.max_memory_allocated() if cuda else None
        return {"batch": size, "precision": precision, "dropout": dropout, "peak_bytes": peak, "oom": False,
                "params": sum(p.numel() for p in model.parameters())}
    except torch.cuda.OutOfMemoryError:
        return {"batch": size, "precision": precision, "dropout": dropout, "peak_bytes": None, "oom": True}
    finally:
        del model, opt
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.set_per_process_memory_fraction(1.0)


def timed_matmul(precision: str, device, n: int, reps: int = 20) -> dict:
    """Best FLOP/s of an n x n matmul in the precision's compute dtype (float32 on TF32 tensor cores where there are
    some: TensorFlow's default, and so the kit's peak table's)."""
    torch.backends.cuda.matmul.allow_tf32 = True
    a, b = (torch.randn(n, n, device=device, dtype=DTYPE[precision]) for _ in range(2))
    best = 0.0
    for _ in range(3):
        (a @ b).sum().item()
        t0 = time.perf_counter()
        for _ in range(reps):
            c = a @ b
        c.sum().item()  # waits for the GPU
        best = max(best, reps * 2 * n ** 3 / (time.perf_counter() - t0))
    return {"precision": precision, "n": n, "flops_per_s": best}


def counted_flops(cfg, vocab: int, length: int, size: int, device) -> dict:
    """PyTorch's FLOP counter over one forward and backward of `size` sentences (float32: the count is the shape's)."""
    from torch.utils.flop_counter import FlopCounterMode
    model = Replica(cfg.model, vocab, torch.float32, 0.0).to(device)
    src, tgt = batch(vocab, size, length, device)
    with FlopCounterMode(display=False) as counter:
        loss_of(model, src, tgt, cfg.model.label_smoothing).backward()
    return {"batch": size, "length": length, "torch_flops": int(counter.get_total_flops())}
