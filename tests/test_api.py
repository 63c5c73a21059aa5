"""README's Python API example runs as written (its output folder moved under tmp_path)."""

import contextlib
import io
import json
import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def readme_example() -> str:
    text = (REPO / "README.md").read_text()
    match = re.search(r"<!-- api-example -->\n```python\n(.*?)```", text, flags=re.S)
    assert match, "README lost its Python API example"
    return match.group(1)


def test_readme_python_api_example_trains_and_returns_the_summary(tmp_path):
    code = readme_example()
    assert '"runs/api-example"' in code
    out = tmp_path / "api-example"
    code = code.replace('"runs/api-example"', repr(str(out)))
    scope: dict = {}
    printed = io.StringIO()
    cwd = os.getcwd()
    os.chdir(REPO)  # the example reads configs/ relative to the checkout, as a user in it would
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "README.md (Python API)", "exec"), scope)
    finally:
        os.chdir(cwd)
    summary = scope["summary"]
    assert summary == json.loads((out / "summary.json").read_text())
    assert summary["model"] == "tgcn" and summary["epochs"] == 2
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    val_map, compilations, efficiency = printed.getvalue().split()[-3:]
    assert float(val_map) == summary["final"]["val_map"] and 0 < float(val_map) <= 1
    assert int(compilations) == summary["compilations"] >= 1
    assert 0 < float(efficiency) <= 1
    assert scope["config"].model.name == "gcrn_gru" and scope["config"].train.epochs == 1
