#!/usr/bin/env python3
"""Writes the largest sweep the planner allows as artifacts: 256 shards x 2 attempts x 500
result rows (one in ten unsupported), and its manifest: 128,000 distinct cases (each
shard's 500 GEMMs have m of their own). Used by bench-summarize.sh and
bench-report.sh.   usage: bench-tree.py DIR"""
import json, os, sys

work = sys.argv[1]
cells = []
for s in range(256):
    sid = "h200-dgxc-%016x" % (s * 7919 + 1)
    args = lambda i: {"m": s * 500 + i, "n": 4096, "k": 4096, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}
    cell = {"id": sid, "runner": "cluster:h200-dgxc", "cluster": "h200_dgxc_8x", "backends": ["vllm"], "world_size": 1, "gpus_per_node": 8,
            "cases": [{"testlist": "t", "shape": {"type": "gemm", "args": args(i), "sources": []}} for i in range(500)]}
    cells.append(cell)
    for attempt in (1, 2):
        d = os.path.join(work, "artifacts", f"operatorx-shard-7-{attempt}-{sid}")
        os.makedirs(os.path.join(d, "results", "nvidia", "h200_dgxc_8x"), exist_ok=True)
        json.dump({"cell": cell, "source_sha": "s", "run_id": "7", "attempt": str(attempt), "stage": "/x"}, open(os.path.join(d, "execution.json"), "w"))
        json.dump({"exit_code": 0, "slurm_jobs": ["1"]}, open(os.path.join(d, "status.json"), "w"))
        rows = [{"op": {"type": "gemm", "args": args(i), "backend": "vllm", "sources": []},
                 "metrics": {"latency_us": 12.5 + i, "tflops": 512.25} if i % 10 else {}, "status": "ok" if i % 10 else "unsupported",
                 "testlist": "t"} for i in range(500)]
        json.dump({"schema_version": "1", "run": {"id": "r", "env": {}}, "rows": rows}, open(os.path.join(d, "results", "nvidia", "h200_dgxc_8x", "r.json"), "w"), indent=2)
json.dump({"version": 1, "excluded_shapes": 0, "include": cells, "source_sha": "s", "run_id": "7", "attempt": "2"}, open(os.path.join(work, "manifest.json"), "w"), indent=2)
