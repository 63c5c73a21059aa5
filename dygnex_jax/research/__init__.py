"""The measurement logic behind the benchmark and validation scripts of ``tools/``.

Each script in ``tools/`` is a thin command line (argument parsing, printing, writing files) over one
group of these modules:

- ``schedulers``, ``scheduler_timing``, ``scheduler_costs``, ``scheduler_report``:
  ``tools/bench_schedulers.py`` (DyGNeX schedulers against PSG: schedule figures, measured epoch
  times, cost vectors, timing at scale; its tables and plots);
- ``epoch_bench``: ``tools/bench_epoch.py`` (all five methods in one trainer, per epoch);
- ``simulator_validation``: ``tools/validate_simulator.py`` (simulated vs measured epoch time);
- ``torch_bench``: ``tools/bench_torch.py`` and ``tools/bench_padded.py`` (dygnex_jax vs PyG-Temporal);
- ``sweep``: ``tools/sweep.py`` (a config over the cross product of value grids).

Importing a module of this package imports no JAX: the scripts request fake CPU devices after parsing
their arguments, which must happen before JAX starts; JAX is imported inside the functions that train.
Some of these benchmarks read files of the source checkout (``configs/``) or start ``tools/`` scripts
as subprocesses: they run from a checkout, not from an installed wheel.
"""
