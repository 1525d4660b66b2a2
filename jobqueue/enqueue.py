"""Send a job from inside a handler: it commits with the handler's transaction."""

import json

from django.db import connection

from jobqueue import queries


def enqueue(payload: dict) -> int:
    with connection.cursor() as cursor:
        return queries.send(cursor, json.dumps(payload))
