"""Where the time of a cached load of the embedded SmolLM2 GGUF goes (issue 27 #12).

The README once said "later loads take ~0.3 s"; a new user measured 3.5-7.6 s per command. Each repeat runs in a
fresh Python process (as a command does) with the dequantized weights already cached, and times, in order:

* ``import torch`` and ``import transformers`` (plus the Auto classes), what every model-loading command imports,
  and the Llama model and fast-tokenizer modules that transformers imports lazily on the first load;
* ``import toxiforge.cli`` (the command line's own modules, after torch/transformers are in);
* ``cache lookup``: ``convert_gguf`` finding the cached safetensors (hash of path, size, mtime);
* ``tokenizer``: ``AutoTokenizer.from_pretrained`` on the cached folder;
* ``weights``: ``AutoModelForCausalLM.from_pretrained`` on the cached folder (reading the fp32 safetensors);
* ``wrap``: ``TransformersLM(...)`` (vocabulary tables, eos ids);
* ``load_language_model total``: the call ``toxiforge generate`` makes, timed alone in another fresh process.

Medians over ``--repeats`` processes are printed and written as JSON (``--json``).

    python benchmarks/gguf_load.py --repeats 5 --json gguf_load.json
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import _common

STAGES = r"""
import json, time
t = {}
s = time.perf_counter(); import torch; t["import torch"] = time.perf_counter() - s
s = time.perf_counter()
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
t["import transformers"] = time.perf_counter() - s
s = time.perf_counter()
import transformers.models.llama.modeling_llama, transformers.models.llama.configuration_llama
from transformers import PreTrainedTokenizerFast
t["import the Llama model and tokenizer code"] = time.perf_counter() - s
s = time.perf_counter(); import toxiforge.cli; t["import toxiforge.cli"] = time.perf_counter() - s
from toxiforge.models.embedded import smollm2_gguf
from toxiforge.models.transformers_lm import TransformersLM, convert_gguf
s = time.perf_counter(); folder = convert_gguf(smollm2_gguf()); t["cache lookup"] = time.perf_counter() - s
s = time.perf_counter(); tok = AutoTokenizer.from_pretrained(folder); t["tokenizer"] = time.perf_counter() - s
s = time.perf_counter()
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
t["weights"] = time.perf_counter() - s
s = time.perf_counter(); TransformersLM(model, tok, name="smollm2-135m"); t["wrap"] = time.perf_counter() - s
print(json.dumps(t))
"""

TOTAL = r"""
import json, time
s = time.perf_counter()
from toxiforge.models import load_language_model
load_language_model("smollm2-135m")
print(json.dumps({"load_language_model total (imports included)": time.perf_counter() - s}))
"""


def run(code: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = _common.parser(__doc__)
    _common.add_repeats(parser, 5, help="fresh processes per measurement; medians printed (default: 5)")
    parser.add_argument("--json", default=None, help="write the medians (and every repeat) here")
    args = parser.parse_args()
    run(TOTAL)  # fills the cache if it is cold; not timed
    stages = [run(STAGES) for _ in range(args.repeats)]
    totals = [run(TOTAL) for _ in range(args.repeats)]
    medians = {k: statistics.median(r[k] for r in stages) for k in stages[0]}
    medians.update({k: statistics.median(r[k] for r in totals) for k in totals[0]})
    for name, seconds in medians.items():
        print(f"{name:48s} {seconds:6.2f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"medians_s": medians, "stages": stages, "totals": totals}, fh, indent=2)


if __name__ == "__main__":
    main()
