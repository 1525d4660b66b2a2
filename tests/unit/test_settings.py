"""Settings that name things defined elsewhere name the same things."""

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from faces.engines.packs import PACKS
from momentlens import env


def test_face_model_pack_accepts_exactly_the_packs_there_are():
    assert sorted(settings.FACE_MODEL_PACKS) == sorted(PACKS)


@pytest.mark.parametrize(
    ("names", "set_", "fails"),
    [
        ((), {}, False),
        (("A", "B"), {}, False),
        (("A", "B"), {"A": "1", "B": "2"}, False),
        (("A", "B"), {"A": "1"}, True),
        (("A", "B"), {"B": "2", "A": ""}, True),
    ],
)
def test_settings_that_go_together_are_all_set_or_none(monkeypatch, names, set_, fails):
    for name in ("A", "B"):
        monkeypatch.delenv(name, raising=False)
    for name, value in set_.items():
        monkeypatch.setenv(name, value)
    if fails:
        with pytest.raises(ImproperlyConfigured, match="set together or not at all"):
            env.together(names)
    else:
        assert env.together(names) == {name: set_.get(name, "") for name in names}


def test_a_bad_sentry_dsn_is_named_without_its_value(monkeypatch):
    monkeypatch.setenv("SENTRY_DSN", "https://secret-key-123@")
    with pytest.raises(ImproperlyConfigured) as raised:
        env.sentry_dsn("SENTRY_DSN")
    assert "SENTRY_DSN: not a Sentry DSN" in str(raised.value)
    assert "secret-key-123" not in str(raised.value)
    monkeypatch.setenv("SENTRY_DSN", "http://publickey@127.0.0.1:9/1")
    assert env.sentry_dsn("SENTRY_DSN") == "http://publickey@127.0.0.1:9/1"


def test_every_media_setting_is_a_media_limit(settings):
    """Each MEDIA_MAX_* setting reaches faces.media.upload.MediaLimits through `from_settings`."""
    from django import conf

    from faces.media.upload import MediaLimits

    names = sorted(name for name in dir(conf.settings) if name.startswith("MEDIA_MAX_"))
    for value, name in enumerate(names, 1):
        setattr(settings, name, value)
    limits = list(vars(MediaLimits.from_settings()).values())
    assert len(names) == 7
    assert all(value in limits for value in range(1, len(names) + 1))
