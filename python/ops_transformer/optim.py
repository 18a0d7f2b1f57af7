"""AdamW as a torch.optim.Optimizer, each parameter updated by libot's fused kernel
(one pass over p, g, m, v). torch.optim.AdamW's semantics and defaults."""
import ctypes

import torch

from . import _lib


def _bump(p):
    # the kernel writes p through its pointer: tell autograd the tensor changed
    inc = getattr(torch.autograd.graph, "increment_version", None)
    if inc is not None:
        inc(p)


class AdamW(torch.optim.Optimizer):
    """p -= lr * (weight_decay * p + m_hat / (sqrt(v_hat) + eps)) with bias-corrected moments,
    as torch.optim.AdamW (amsgrad, maximize, capturable and differentiable are not offered).
    Parameters and gradients: contiguous CPU float32 (keep float32 master weights)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, *,
                 amsgrad=False, maximize=False):
        if amsgrad or maximize:
            raise ValueError("ops_transformer.AdamW: amsgrad and maximize are not supported "
                             "(use torch.optim.AdamW for them)")
        if not 0.0 <= lr or not 0.0 <= eps or not 0.0 <= weight_decay:
            raise ValueError(f"ops_transformer.AdamW: lr={lr}, eps={eps}, weight_decay={weight_decay} "
                             f"must be >= 0")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"ops_transformer.AdamW: betas={betas} must be in [0, 1)")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        _lib.sync_threads()
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.dtype != torch.float32 or p.device.type != "cpu" or not p.is_contiguous():
                    raise TypeError(f"ops_transformer.AdamW: parameter {tuple(p.shape)} {p.dtype} on "
                                    f"{p.device} must be a contiguous CPU float32 tensor")
                if p.grad.is_sparse:
                    raise TypeError("ops_transformer.AdamW: sparse gradients are not supported")
                g = p.grad.float().contiguous()
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = torch.zeros_like(p, memory_format=torch.contiguous_format)
                    st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.contiguous_format)
                st["step"] += 1
                cfg = _lib.AdamWCfg(group["lr"], b1, b2, group["eps"], group["weight_decay"], st["step"])
                _lib.check(_lib.lib.ot_adamw(p.data_ptr(), g.data_ptr(), st["exp_avg"].data_ptr(),
                                             st["exp_avg_sq"].data_ptr(), None, p.numel(),
                                             ctypes.byref(cfg), 1.0))
                _bump(p)
        return loss
