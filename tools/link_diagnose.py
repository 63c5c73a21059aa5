"""Where a trained link model's MAP goes: a checkpoint (the newest; --epoch N) re-scored, background last.

    python tools/link_diagnose.py runs/repro/egcn_o_bitcoin_alpha/evolvegcn/seed0 --split test --json d.json

Prints, per target snapshot of the split, its edges, those touching a node without history edges (the
background node), AP and MRR as the run evaluates them, and the same with every background pair scored
last (dygnex_jax/research/link_diagnosis.py); then the split's MAP / MRR both ways.
"""

from __future__ import annotations

import sys

from dygnex_jax.errors import ArgumentParser, run_tool
from dygnex_jax.files import atomic_write_text, json_text, output_file
from dygnex_jax.research.link_diagnosis import diagnose


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a training run's --out folder (its config.yaml and checkpoints)")
    ap.add_argument("--split", default="test", choices=["train", "val", "test"])
    ap.add_argument("--epoch", type=int, help="re-score this epoch's checkpoint (default: the newest)")
    ap.add_argument("--json", type=output_file, help="write the figures here")
    a = ap.parse_args(argv)
    d = diagnose(a.run, a.split, epoch=a.epoch)
    print(f"{d['run']}: epoch {d['epoch']}, {a.split}")
    print(
        "| target | edges | touching background | background nodes | AP | AP, background last | MRR | MRR, background last |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in d["windows"]:
        print(
            f"| {r['target']} | {r['positives']} | {r['touching_background']} | {r['background_nodes']} "
            f"| {r['ap']:.5f} | {r['ap_background_last']:.5f} | {r['mrr']:.4f} | {r['mrr_background_last']:.4f} |"
        )
    print(
        f"MAP {d['map']:.5f} -> {d['map_background_last']:.5f} with the background last; MRR {d['mrr']:.4f} -> "
        f"{d['mrr_background_last']:.4f}; {d['positives']} edges, {100 * d['touching_background']:.1f} % touch "
        f"the background, {100 * d['silent_in_last_snapshot']:.1f} % have both ends silent in the last snapshot"
    )
    print(
        f"MAP {d['map']:.5f} -> {d['map_rows_centred']:.5f} with each source's scores less their mean (MRR "
        f"{d['mrr_rows_centred']:.4f}, unchanged): what the sources' own offsets cost the pooled ranking"
    )
    if a.json:
        atomic_write_text(a.json, json_text(d, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(lambda: main()))
