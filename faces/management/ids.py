"""Ids as operators type them: a whole uuid, or the short prefix `make demo` and the reports print."""

import re

from django.core.management.base import CommandError
from django.db.models import Model, TextField
from django.db.models.functions import Cast

PREFIX = re.compile(r"[0-9a-fA-F-]{4,36}")


def row_by_id(model: type[Model], text: str, what: str, queryset=None) -> Model:
    """The one row whose id is `text` or starts with it; one line of CommandError otherwise."""
    if not PREFIX.fullmatch(text):
        raise CommandError(f"{text!r} is not the id of any {what}: give the uuid, or at least its first 4 characters")
    rows = queryset if queryset is not None else model.objects.all()
    found = list(rows.annotate(id_text=Cast("id", TextField())).filter(id_text__startswith=text.lower())[:2])
    if not found:
        raise CommandError(f"no {what} with an id starting {text!r}")
    if len(found) > 1:
        raise CommandError(f"{text!r} is the start of more than one {what} id: give more characters")
    return found[0]
