#!/usr/bin/env bash
# One GPU session's measurements, in one prepared command (a lent GPU machine is short of time, not of
# memory): the environment, a smoke run of our trainer on the GPU, the PyG-T parity tests with our side on
# the GPU, the step's compilation time under XLA:GPU settings and on threads, the all-pairs evaluation scorer
# against its matmul form (tools/bench_eval_scores.py: chosen on CPU), then tools/bench_torch.py --device cuda
# case by case (ours with DyGNeX-G and PSG on one GPU, PyG-T on the same GPU, whole node set and our
# layout), each case appended to one JSON, none started after the deadline.
#
#   DYGNEX_DATA=/path/to/datasets bash tools/gpu_session.sh OUT_DIR [DEADLINE_S] [EPOCHS] [CASE ...]
#
# OUT_DIR gets env.txt, parity.txt and bench_torch_gpu.json (+ .png; rewritten after every system, so a
# case stopped at the deadline keeps its finished systems); tee the output for the log. Ours also runs a
# second time on its then warm compilation cache (--warm: a GPU compilation took 19.5 s where the step
# took milliseconds, 2026-12-04). The cases default to those without a GPU figure yet (README: On one GPU).
set -u
out=${1:?usage: gpu_session.sh OUT_DIR [DEADLINE_S] [EPOCHS] [CASE ...]}
deadline=${2:-420}
epochs=${3:-3}
shift $(($# < 3 ? $# : 3))
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
    cases=(egcn_o:bitcoin_otc tgcn:uci_collegemsg gcrn_gru:bitcoin_otc tgcn:bitcoin_otc
        gcrn_gru:uci_collegemsg egcn_o:uci_collegemsg)
fi
mkdir -p "$out"
start=$(date +%s)
left() { echo $((deadline - ($(date +%s) - start))); }
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
{
    echo "== environment $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv 2>&1
    python3 -c 'import jax, flax, optax, numpy; print("jax", jax.__version__, jax.devices(), "flax", flax.__version__, "optax", optax.__version__, "numpy", numpy.__version__)' 2>&1
    python3 -c 'import torch, torch_geometric; print("torch", torch.__version__, torch.cuda.get_device_name(0), "pyg", torch_geometric.__version__)' 2>&1
    uptime
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

echo "== smoke: train the embedded default on the GPU ($(left) s left)"
smoke=$(mktemp -d)/smoke
timeout 240 python3 -m dygnex_jax train --out "$smoke" train.epochs=2 2>&1 | tail -n 25
smoke_rc=${PIPESTATUS[0]}
echo "smoke exit $smoke_rc"
[ -f "$smoke/summary.json" ] && python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print({k: s.get(k) for k in ('final','compilations','compile_seconds_ahead','mean_padding_efficiency','median_epoch_seconds')})" "$smoke/summary.json"

echo "== parity with PyG-T, our side on the GPU ($(left) s left)"
JAX_PLATFORMS=${GPU_SESSION_DEVICE:-cuda} timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_parity.py \
    -k "parity_with_pyg_temporal or runner_loss" 2>&1 | tail -n 40 | tee "$out/parity.txt"

echo "== compilation time by XLA:GPU setting: one EGCN-O UCI epoch, no compilation cache ($(left) s left)"
for flags in "" "--xla_gpu_autotune_level=0" "--xla_gpu_enable_triton_gemm=false"; do
    run=$(mktemp -d)/compile
    XLA_FLAGS="$flags" timeout 150 python3 -m dygnex_jax train --config configs/egcn_o_uci.yaml --out "$run" \
        train.epochs=1 parallel.compile_cache=off 2>&1 | grep -E "compiled training step|^epoch" | sed "s|^|[${flags:-default}] |"
done

echo "== 4 budgets compiled one at a time and on 4 threads (parallel.compile_workers; $(left) s left)"
timeout 200 python3 tools/bench_compile.py --configs configs/egcn_o_uci.yaml --workers 4 --repeats 1 \
    --json "$out/bench_compile_gpu.json" 2>&1 | tail -n 4

echo "== all-pairs evaluation scores: the column loop against the matmul form on the GPU ($(left) s left)"
timeout 90 python3 tools/bench_eval_scores.py --sizes 6000x100 20000x100 --repeats 5 \
    --json "$out/bench_eval_scores_gpu.json" 2>&1 | tail -n 4

systems=(ours:dygnex_g torch:full torch:packed ours:psg)
[ "$smoke_rc" -eq 0 ] || systems=(torch:full torch:packed)  # our trainer failed here: PyTorch's figures alone
for case in "${cases[@]}"; do
    t=$(left)
    if [ "$t" -lt 60 ]; then
        echo "== $case: not started ($t s left before the deadline)"
        continue
    fi
    echo "== $case ($t s left, $(date -u +%T))"
    timeout "$t" python3 tools/bench_torch.py --device "${GPU_SESSION_DEVICE:-cuda}" --procs 1 --epochs "$epochs" --seeds 0 --warm \
        --cases "$case" --systems "${systems[@]}" --json "$out/bench_torch_gpu.json" --append 2>&1 | tail -n 30
done
echo "== done after $(( $(date +%s) - start )) s"
