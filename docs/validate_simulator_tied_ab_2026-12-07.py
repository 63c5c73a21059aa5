# offline A/B on one validation's measurements: the cost model's locality columns fitted free (the fit
# before a4f7069: a coefficient each) vs tied to edges and pairs (one slope a <= 0.25 per doubling,
# schedule.cost._nnls, the fit since); each run's model refitted around its steps from the run's own
# cost-model cache as the trainer does; per row the median over trials of the median over clean epochs of
# (predicted epoch steps / measured - 1), an epoch's last step priced alone (the trainer's per-step
# pricing). Run with the checkout on the path: python docs/validate_simulator_tied_ab_2026-12-07.py V
import glob
import json
import sys

import numpy as np
from scipy.optimize import nnls

from dygnex_jax.research import simulator_validation as validation
from dygnex_jax.schedule import cost

V = sys.argv[1]
DS = ["bitcoin_otc", "uci_collegemsg", "as733", "bitcoin_alpha", "synthetic"]
RUNS = {"p1": "train", "p2": "train", "p4": "train", "p8": "train", "proc2": "2proc"}
tied = cost._nnls


def free(features, seconds):  # the fit before the change: the locality columns free
    features = np.array(features, dtype=np.float64)
    if cost.one_span(features):
        features[:, cost.BASE_FEATURES :] = 0.0
    scale = np.linalg.norm(features, axis=0)
    scale[scale == 0] = 1.0
    return nnls(features / scale, seconds)[0] / scale


out, coefs = {}, {}
for k, pre in RUNS.items():
    caches = glob.glob(f"{V}/{k}/**/cache/*.json", recursive=True)
    if not caches:
        continue
    entry = json.load(open(caches[0]))
    for ds in DS:
        errs = {"free": [], "tied": []}
        for f in sorted(glob.glob(f"{V}/{k}/{pre}_{ds}*.json")):
            t = json.load(open(f))
            for name, fn in (("free", free), ("tied", tied)):
                cost._nnls = fn
                m = validation.run_model(entry, t)
                coefs[(k, ds, name)] = m.coef
                errs[name].append(validation.repriced_error(m, t))
        if errs["free"]:
            out[(k, ds)] = {n: float(np.median(v)) for n, v in errs.items()}
cost._nnls = tied
for name in ("free", "tied"):
    a = np.abs([v[name] for v in out.values()])
    print(
        f"{name:5s} within 15 %: {int(np.sum(a <= 0.15))}/{len(a)}  median |err| {np.median(a):.3f}  max {a.max():.3f}"
    )
for (k, ds), v in out.items():
    c = coefs[(k, ds, "tied")]
    a = c[6] / c[2] if c[2] > 0 else 0.0
    print(
        f"  {k:6s} {ds:15s} free {v['free']:+.3f}  tied {v['tied']:+.3f}   (tied slope {a:.3f}; free coef x1e6 {np.round(coefs[(k, ds, 'free')] * 1e6, 3).tolist()})"
    )
