"""toxiforge._io: the one output-folder check."""

from __future__ import annotations

import pytest

from toxiforge._io import require_empty_dir
from toxiforge.errors import InputError


def test_require_empty_dir_names_the_flag_that_allows_reuse(tmp_path):
    assert require_empty_dir(tmp_path / "new", False) == tmp_path / "new"
    (tmp_path / "used" / "x").mkdir(parents=True)
    with pytest.raises(InputError, match="not empty") as err:
        require_empty_dir(tmp_path / "used", False, flag="--resume")
    assert "pass --resume" in str(err.value)
    assert require_empty_dir(tmp_path / "used", True) == tmp_path / "used"
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="not a folder"):
        require_empty_dir(tmp_path / "f", True)
