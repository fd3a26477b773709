#!/usr/bin/env python3
"""Convert django/django-asv's published nightly results (MIT licence) into the compact
table opx's real-history benchmark reads (internal/history/testdata/real/).

    python3 scripts/real-history-django.py GITDIR > internal/history/testdata/real/django-asv.tsv
    gzip -9n internal/history/testdata/real/django-asv.tsv

GITDIR is a clone of https://github.com/django/django-asv (results/ubuntu-latest: one
asv results file per Django commit and Python environment, written by its nightly GitHub
Actions job on a hosted ubuntu-latest runner). Nothing is changed but the layout: a
line per results file — its measurement time (the file's earliest started_at, ms), commit
and environment — then each benchmark's result (seconds, 5 significant digits) and asv's 99%
interval when the file records one (its ends over the result, 3 significant digits).
"""
import json
import subprocess
import sys


def main():
    git = sys.argv[1]
    head = subprocess.run(["git", "-C", git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    names = subprocess.run(["git", "-C", git, "ls-tree", "--name-only", "HEAD", "results/ubuntu-latest/"],
                           capture_output=True, text=True, check=True).stdout.split()
    names = [n for n in names if not n.endswith("machine.json")]
    batch = subprocess.Popen(["git", "-C", git, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    rows = []
    for n in names:
        batch.stdin.write(("HEAD:" + n + "\n").encode())
        batch.stdin.flush()
        size = int(batch.stdout.readline().split()[2])
        d = json.loads(batch.stdout.read(size))
        batch.stdout.read(1)
        cols = d["result_columns"]
        env = d["env_name"].replace("conda-", "")
        started = [r[cols.index("started_at")] for r in d["results"].values() if "started_at" in cols and r[cols.index("started_at")]]
        at = min(started) if started else d["date"]  # older files record only the commit's date
        for bench, r in d["results"].items():
            row = dict(zip(cols, r))
            v = row["result"]
            if not v or len(v) != 1 or v[0] is None or not isinstance(v[0], (int, float)) or v[0] <= 0:
                continue
            lo = row.get("stats_ci_99_a") or [None]
            hi = row.get("stats_ci_99_b") or [None]
            ci = ""
            if lo[0] is not None and hi[0] is not None:
                ci = ",%.3g,%.3g" % (lo[0] / v[0], hi[0] / v[0])
            rows.append((at, d["commit_hash"][:12], env, bench, "%.5g%s" % (v[0], ci)))
    rows.sort()
    benches = sorted({r[3] for r in rows})
    print("# django/django-asv results/ubuntu-latest at %s (MIT licence: LICENSE-django-asv), converted by scripts/real-history-django.py" % head)
    print("# a line per results file: started_at_ms, commit, env, then per benchmark below: seconds[,ci99_lo,ci99_hi as fractions of it] (empty: not measured)")
    print("\t".join(["benchmarks", "", ""] + benches))
    files = {}
    for r in rows:
        files.setdefault(r[:3], {})[r[3]] = r[4]
    for k in sorted(files):
        print("\t".join([str(k[0]), k[1], k[2]] + [files[k].get(b, "") for b in benches]))

main()
