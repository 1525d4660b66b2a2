"""measure_thresholds reads person folders and reports genuine/impostor rates."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from momentlens.devservices import samples


def test_genuine_and_impostor_pairs_are_counted_and_rated(tmp_path):
    people = {"tom_hanks": samples.tom_hanks(), "astronaut": samples.astronaut()}
    for index, (person, image) in enumerate(people.items()):
        folder = tmp_path / person
        folder.mkdir()
        for number, variant in enumerate(samples.variants(image, 3, seed=index)):
            (folder / f"{number}.jpg").write_bytes(samples.encode_jpeg(variant))
    (tmp_path / "astronaut" / "notes.txt").write_text("not an image")

    out = StringIO()
    call_command("measure_thresholds", str(tmp_path), "--candidates", "0.5,0.999", stdout=out)
    text = out.getvalue()
    assert "people=2 images=6" in text
    assert "genuine_pairs=6 impostor_pairs=9" in text
    # Nothing is below 0.5 and nothing reaches 0.999: the extremes of the rate table are certain.
    assert "| 0.50 | 9/9 (100.00%) | 0/6 (0.00%) |" in text
    assert "| 1.00 | 0/9 (0.00%) | 6/6 (100.00%) |" in text


def test_one_person_is_not_enough(tmp_path):
    (tmp_path / "only").mkdir()
    with pytest.raises(CommandError, match="at least two person folders"):
        call_command("measure_thresholds", str(tmp_path))
