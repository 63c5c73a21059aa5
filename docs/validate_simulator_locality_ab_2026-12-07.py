# offline A/B on one validation's measurements: the cost model with the locality terms (as trained) vs
# the same profiles fitted blind to the span (every dataset's span 0 = the model before), each run's
# model refitted around its steps as the trainer does; per row the median over trials of the median over
# epochs of (predicted epoch steps / measured - 1), an epoch's last step priced alone
import dataclasses
import glob
import json
import re
import sys

import numpy as np

from dygnex_jax import cost_cache

V = sys.argv[1]
DS = ["bitcoin_otc", "uci_collegemsg", "as733", "bitcoin_alpha", "synthetic"]
RUNS = {"p1": "train", "p2": "train", "p4": "train", "p8": "train", "proc2": "2proc"}
out = {}
for k, pre in RUNS.items():
    caches = glob.glob(f"{V}/{k}/**/cache/*.json", recursive=True)
    if not caches:
        continue
    entry = json.load(open(caches[0]))
    blind = dict(entry, datasets={n: d | {"span": 0.0} for n, d in entry["datasets"].items()})
    for ds in DS:
        errs = {"span": [], "blind": []}
        for f in sorted(glob.glob(f"{V}/{k}/{pre}_{ds}*.json")):
            t = json.load(open(f))
            scale = float(re.search(r"around steps of (\d+) pairs", t["cost_note"]).group(1))
            span = float(t["cost_model"].get("span", 0.0))
            for name, e in (("span", entry), ("blind", blind)):
                m = dataclasses.replace(cost_cache.entry_model(e, scale), window=t["window"], span=span)
                by = {}
                steps = [s for s in t["steps"]]
                for i, s in enumerate(steps):
                    last = i + 1 == len(steps) or steps[i + 1]["epoch"] != s["epoch"]
                    p = float(m.predict_costs(np.array([s["budget"][:3]], float), alone=last)[0])
                    b = by.setdefault(s["epoch"], [0.0, 0.0, False])
                    b[0] += s["seconds"]
                    b[1] += p
                    b[2] |= s["compiled"]
                errs[name].append(np.median([p / m_ - 1 for m_, p, c in by.values() if not c]))
        if errs["span"]:
            out[(k, ds)] = {n: float(np.median(v)) for n, v in errs.items()}
for name in ("blind", "span"):
    a = np.abs([v[name] for v in out.values()])
    print(
        f"{name:6s} within 15 %: {int(np.sum(a <= 0.15))}/{len(a)}  median |err| {np.median(a):.3f}  max {a.max():.3f}"
    )
for (k, ds), v in out.items():
    print(f"  {k:6s} {ds:15s} blind {v['blind']:+.3f}  span {v['span']:+.3f}")
