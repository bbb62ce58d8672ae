"""Where a folder export waits while the next one moves in (zoo.exporting.target), apart from any exporter's
dependencies."""

from __future__ import annotations

import os


def test_a_folder_export_of_a_long_legal_name_sets_its_earlier_export_aside_and_back(tmp_path):
    """Before: the aside name appended ".zoo-export.previous" to a 236-255-byte folder name: ENAMETOOLONG, an
    internal path the user never gave, even for a new folder."""
    import warnings

    from zoo.exporting.target import aside_path, recover_aside

    target = tmp_path / ("e" * 240)
    aside = aside_path(target)
    assert len(os.fsencode(aside.name)) <= 255 and aside.parent == tmp_path and aside_path(target) == aside
    aside.mkdir()
    (aside / "export.json").write_text("{}")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        recover_aside(target)  # the earlier export, killed while aside, is put back
    assert (target / "export.json").is_file() and not aside.exists()
