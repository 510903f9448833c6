# Host cost per op of PyTorch on this node: the time the host spends
# issuing an op when the GPU work is tiny, so the host is the bottleneck.
# Printed as one JSON object; run by cgtune's probes with python3.
import json, sys, time

import torch
import torch.nn.functional as F

dev = "cuda"
x = torch.randn(64, 64, device=dev)
y = torch.randn(64, 64, device=dev)
lin = torch.nn.Linear(64, 64, device=dev)
q = torch.randn(1, 4, 64, 64, device=dev, dtype=torch.bfloat16)


def host_us(fn, n=3000):
    for _ in range(300):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


out = {
    "torch": torch.__version__,
    "add_us": host_us(lambda: x + y),
    "mm_us": host_us(lambda: x @ y),
    "linear_us": host_us(lambda: lin(x)),
    "rms_norm_us": host_us(lambda: F.rms_norm(x, (64,))),
    "sdpa_us": host_us(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True)),
    "item_us": host_us(lambda: x.sum().item(), n=1000),
}
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        lin(x)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    static = lin(x)
out["graph_replay_us"] = host_us(g.replay)
json.dump(out, sys.stdout)
