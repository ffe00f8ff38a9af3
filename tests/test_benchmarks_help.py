"""Every script in benchmarks/ answers ``--help`` (exit 0, a usage line) without importing a heavy library: the
suite stays runnable as a whole, and a script's options can be read without loading torch or a model
(benchmarks/README.md; the scripts import those below ``parse_args()``). A smoke test, not a timing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))
# what --help must not import: ML frameworks, model runtimes, data-frame and database layers
HEAVY = {"torch", "transformers", "llama_cpp", "ray", "sklearn", "scipy", "pandas", "pyarrow", "datasets", "lm_eval",
         "sqlalchemy", "httpx", "statsmodels"}


def test_every_script_is_listed_in_the_readme():
    readme = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    assert SCRIPTS and [s for s in SCRIPTS if f"`{s}`" not in readme] == []


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_exits_0_without_heavy_imports(script):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-X", "importtime", str(BENCHMARKS / script), "--help"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"usage: {script}"), done.stdout[:500]
    # -X importtime writes "import time: self | cumulative | name" per module, the name indented by its depth
    imported = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in done.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert sorted(imported & HEAVY) == [], f"{script} --help imports {sorted(imported & HEAVY)}"
