# offline A/B on one validation's measurements: the cost model with the locality terms (as trained) vs
# the same profiles fitted blind to the span (every dataset's span 0 = the model before), each run's
# model refitted around its steps as the trainer does; per row the median over trials of the median over
# epochs of (predicted epoch steps / measured - 1), an epoch's last step priced alone. Its output beside it
# is of code 2db209f, the locality columns fitted free; since a4f7069 ``fit`` ties them (the same script on
# the same measurements now prices with the tied fit: docs/validate_simulator_tied_ab_2026-12-07.py A/Bs the two)
import glob
import json
import sys

import numpy as np

from dygnex_jax.research import simulator_validation as validation

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
            for name, e in (("span", entry), ("blind", blind)):
                errs[name].append(validation.repriced_error(validation.run_model(e, t), t))
        if errs["span"]:
            out[(k, ds)] = {n: float(np.median(v)) for n, v in errs.items()}
for name in ("blind", "span"):
    a = np.abs([v[name] for v in out.values()])
    print(
        f"{name:6s} within 15 %: {int(np.sum(a <= 0.15))}/{len(a)}  median |err| {np.median(a):.3f}  max {a.max():.3f}"
    )
for (k, ds), v in out.items():
    print(f"  {k:6s} {ds:15s} blind {v['blind']:+.3f}  span {v['span']:+.3f}")
