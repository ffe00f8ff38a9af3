"""Zhou et al.'s (EACL 2021) published numbers, to print beside ours (``experiment debias``'s tables).

Two references per cell where the paper has one:

* **Founta** -- Tables 1, 2 and 4 of the paper: RoBERTa-large on Founta et al. (2018), 3 runs, filtering subsets
  at 33% of the training data. The paper's main results.
* **Davidson** -- Appendix B, Tables 7, 8 and 9: the same methods on Davidson et al. (2017), the data toxiforge's
  ``davidson`` kind reads. One run each (no s.d. printed), filtering subsets at 50% (Table 7's caption: the
  authors "could not perform downsampling" because of the skewed labels), only Original and LMIXIN-TOXTRIG in
  Table 8 and Original and LMIXIN-Dialect in Table 9. Table 9 prints R_AAE 0.4079 for Original, the same value
  as Founta's Table 4, while Table 7 gives 0.4061 for the same training set; :data:`DAVIDSON` keeps Table 7's.

Values are the paper's (rates in %, R as printed); s.d. where printed. Keys are ``experiment debias``'s cell keys:
``accuracy``, ``f1.overall``, ``f1.noi`` / ``fpr.noi`` (and ``oi``, ``oni``, ``aae``), ``train_r.noi`` (and ``oi``,
``oni``, ``aae``) and ``toxic_ratio``. The paper's "Original" (Table 1) and "Vanilla" (Tables 2, 4) are the model
and training set of the method toxiforge calls ``Vanilla``.
"""

from __future__ import annotations

from typing import NamedTuple


class Reported(NamedTuple):
    mean: float
    sd: float | None = None


def _rates(keys: tuple[str, ...], values: str) -> dict[str, Reported]:
    """``"94.21 0.0, 92.33 0.0"`` -> {key: Reported(94.21, 0.0), ...} (a lone number has no s.d.)."""
    out: dict[str, Reported] = {}
    for key, cell in zip(keys, values.split(","), strict=True):
        parts = [float(x) for x in cell.split()]
        out[key] = Reported(parts[0], parts[1] if len(parts) > 1 else None)
    return out


_T2 = ("accuracy", "f1.overall", "f1.noi", "fpr.noi", "f1.oi", "fpr.oi", "f1.oni", "fpr.oni")
_T1 = ("train_r.noi", "train_r.oi", "train_r.oni")
_T7 = ("toxic_ratio", "train_r.noi", "train_r.oi", "train_r.oni", "train_r.aae")

FOUNTA: dict[str, dict[str, Reported]] = {
    "Vanilla": {**_rates(_T1, "0.0445, 0.2641, 0.6718"),
                **_rates(_T2, "94.21 0.0, 92.33 0.0, 89.76 0.3, 10.24 1.3, 98.84 0.1, 85.71 0.0, 97.34 0.1, 64.72 0.8"),
                "train_r.aae": Reported(0.4079), "fpr.aae": Reported(16.84, 0.3)},
    "LMIXIN-ONI": _rates(_T2, "89.65 1.5, 85.59 2.5, 87.04 1.1, 13.99 1.5, 98.87 0.0, 85.71 0.0, 87.87 4.5, 43.74 3.1"),
    "LMIXIN-TOXTRIG": _rates(_T2, "90.44 0.7, 86.94 1.1, 85.47 0.3, 11.15 1.7, 97.64 0.3, 71.43 0.0, 90.41 1.8, "
                                  "44.55 1.5"),
    "LMIXIN-Dialect": {"f1.overall": Reported(92.26, 0.1), "fpr.aae": Reported(16.07, 0.4)},
    "Random": {**_rates(_T1, "0.0345, 0.2603, 0.6683"),
               **_rates(_T2, "94.07 0.1, 92.18 0.1, 89.48 0.4, 9.33 0.7, 98.93 0.0, 83.33 3.4, 97.40 0.1, 67.15 0.6"),
               "train_r.aae": Reported(0.4027), "fpr.aae": Reported(16.67, 0.6)},
    "AFLite": {**_rates(_T1, "0.0434, 0.2458, 0.6016"),
               **_rates(_T2, "93.86 0.1, 91.94 0.1, 90.21 0.4, 11.26 1.1, 98.90 0.0, 85.71 0.0, 97.32 0.1, 67.97 3.4"),
               "train_r.aae": Reported(0.3577), "fpr.aae": Reported(16.84, 0.8)},
    "DataMaps-Ambiguous": {**_rates(_T1, "0.0126, 0.1968, 0.5839"),
                           **_rates(_T2, "94.33 0.1, 92.45 0.1, 89.16 0.7, 7.39 1.0, 98.87 0.0, 85.71 0.0, 97.54 0.0, "
                                         "64.39 1.4"),
                           "train_r.aae": Reported(0.2965), "fpr.aae": Reported(15.99, 0.4)},
    "DataMaps-Hard": {**_rates(_T1, "0.0081, 0.1853, 0.5849"),
                      **_rates(_T2, "94.50 0.0, 92.61 0.1, 89.54 0.4, 6.26 0.9, 98.84 0.0, 85.71 0.0, 97.43 0.0, "
                                    "61.95 1.1"),
                      "train_r.aae": Reported(0.2878), "fpr.aae": Reported(13.71, 0.2)},
    "DataMaps-Easy": {**_rates(_T1, "0.0772, 0.3661, 0.7720"),
                      **_rates(_T2, "94.00 0.1, 91.94 0.2, 86.81 0.6, 5.92 0.7, 98.87 0.0, 83.33 3.4, 97.17 0.1, "
                                    "60.33 3.8"),
                      "train_r.aae": Reported(0.5347), "fpr.aae": Reported(19.46, 2.8)},
    "AAE-relabeled": {"train_r.aae": Reported(0.3453), "f1.overall": Reported(91.64, 0.3),
                      "fpr.aae": Reported(12.69, 0.0)},
}
# Founta test-set sizes printed in Table 2's header (rows with the category, toxic and benign together)
FOUNTA_N = {"all": 12893, "noi": 602, "oi": 553, "oni": 3236}

DAVIDSON: dict[str, dict[str, Reported]] = {
    "Vanilla": {**_rates(_T7, "0.8308, 0.0287, 0.4320, 0.2610, 0.4061"),
                **_rates(_T2, "96.37, 97.81, 96.42, 25.00, 99.86, 57.14, 99.57, 63.64"), "fpr.aae": Reported(24.76)},
    "LMIXIN-TOXTRIG": _rates(_T2, "96.15, 97.69, 96.19, 28.57, 99.78, 42.86, 99.28, 72.73"),
    "LMIXIN-Dialect": {"accuracy": Reported(96.48), "f1.overall": Reported(97.88), "fpr.aae": Reported(22.86)},
    "Random": _rates(_T7, "0.8312, 0.0288, 0.4312, 0.2621, 0.4011"),
    "AFLite": _rates(_T7, "0.7669, 0.0342, 0.4708, 0.2835, 0.4236"),
    "DataMaps-Ambiguous": _rates(_T7, "0.6736, 0.0493, 0.4683, 0.3230, 0.4445"),
    "DataMaps-Hard": _rates(_T7, "0.6645, 0.0521, 0.4533, 0.3190, 0.4426"),
    "DataMaps-Easy": _rates(_T7, "0.9972, 0.0135, 0.0771, 0.0396, 0.0928"),
}

REFERENCES: dict[str, dict[str, dict[str, Reported]]] = {"Founta": FOUNTA, "Davidson": DAVIDSON}
BASELINE = "Vanilla"


def direction(values: dict[str, dict[str, float | None]], method: str, key: str) -> int | None:
    """Sign of ``values[method][key] - values[BASELINE][key]`` (-1, 0, +1), None when either is missing."""
    base, value = values.get(BASELINE, {}).get(key), values.get(method, {}).get(key)
    if base is None or value is None:
        return None
    return (value > base) - (value < base)


def paper_direction(reference: str, method: str, key: str) -> int | None:
    """The paper's sign of ``method`` minus ``Vanilla`` on ``key`` in ``reference`` (Founta or Davidson)."""
    table = REFERENCES[reference]
    return direction({m: {k: r.mean for k, r in cells.items()} for m, cells in table.items()}, method, key)
