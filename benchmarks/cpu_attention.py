"""Self-attention formulations on this CPU, next to torch's fused kernel (what guided the CPU attention backend).

    python benchmarks/cpu_attention.py        # B=2, H=12, S=1280, D=128, fp32; median of 5 runs each
"""

import time

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.attention import einsum_attention
from vidax_core.attention.kernels import blockwise, per_head

B, S, H, D = 2, 1280, 12, 128


def median_time(fn, *args, n=5):
    fn(*args).block_until_ready()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn(*args).block_until_ready()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main():
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.standard_normal((B, S, H, D)).astype(np.float32)) for _ in range(3))
    rows = [
        ("XLA, one (B, H, S, S) einsum + softmax", einsum_attention),
        ("XLA, blockwise online softmax", blockwise.attention),
        ('XLA, jax.nn.dot_product_attention(implementation="xla")',
         lambda a, b, c: jax.nn.dot_product_attention(a, b, c, implementation="xla")),
        ("XLA, lax.map over the B*H heads (per_head)", per_head.attention),
    ]
    for name, fn in rows:
        print(f"| {name} | {median_time(jax.jit(fn), q, k, v):.3f} |")
    try:
        import torch
    except ImportError:
        return
    tq, tk, tv = (torch.from_numpy(np.array(x)).permute(0, 2, 1, 3).contiguous() for x in (q, k, v))
    with torch.no_grad():
        sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)  # noqa: E731
        sdpa()
        times = []
        for _ in range(5):
            t = time.perf_counter()
            sdpa()
            times.append(time.perf_counter() - t)
    print(f"| torch scaled_dot_product_attention | {np.median(times):.3f} |")


if __name__ == "__main__":
    main()
