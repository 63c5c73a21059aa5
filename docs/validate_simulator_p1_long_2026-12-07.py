# one validation's rows trained with --min-steps 48: each row's error on its first 3 epochs (what the
# default --min-steps 12 trains for the small datasets: 3 epochs, >= 12 steps) against all its epochs,
# on the same trials (the median trial of three, chosen by measured epoch as median_trial does)
import glob
import json
import statistics
import sys

import numpy as np

V = sys.argv[1]
rows = json.load(open(f"{V}/validate_simulator.json"))["rows"]
out = {}
for r in rows:
    sim = dict(zip(r["epochs"], r["per_epoch"]["simulated"]))
    pre = "train" if r["processes"] == 1 else "2proc"
    k = f"p{r['devices']}" if r["processes"] == 1 else "proc2"
    res = {}
    for label, cap in (("first 3 epochs", 3), ("all epochs", 10**9)):
        trials = []
        for f in sorted(
            glob.glob(f"{V}/{k}/{pre}_{r['dataset']}.json")
            + glob.glob(f"{V}/{k}/{pre}_{r['dataset']}_t*.json")
        ):
            t = json.load(open(f))
            by = {}
            for s in t["steps"]:
                b = by.setdefault(s["epoch"], [0.0, False])
                b[0] += s["seconds"]
                b[1] |= s["compiled"]
            eps = [e for e, (m, c) in by.items() if not c and e <= cap and e in sim]
            meas = statistics.median(by[e][0] for e in eps)
            err = statistics.median(sim[e] / by[e][0] - 1 for e in eps)
            trials.append((meas, err, len(eps), sum(by[e][0] for e in eps)))
        trials.sort()
        mid = trials[(len(trials) - 1) // 2]
        spread = trials[-1][0] / trials[0][0] - 1
        res[label] = (mid[1], spread, mid[2], mid[3])
    out[(r["run"], r["dataset"])] = res
    print(
        f"{r['run']:6s} {r['dataset']:15s} "
        + "  ".join(
            f"{what}: err {v[0]:+.3f} spread {v[1]:.3f} ({v[2]} epochs, {v[3]:.1f} s of steps)"
            for what, v in res.items()
        )
    )
for what in ("first 3 epochs", "all epochs"):
    e = [abs(v[what][0]) for v in out.values()]
    sp = [v[what][1] for v in out.values()]
    print(
        f"{what}: within 15 % {sum(x <= 0.15 for x in e)}/{len(e)}, median |err| {np.median(e):.3f}, spread median {np.median(sp):.3f}"
    )
