"""`python manage.py requeue_archived --msg-id N`: send one archived message again.

The archived row stays where it is (the record of what failed); the copy is a
new message with a new id and a `requeued_from` header naming the original.
"""

import json
import logging

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from jobqueue import queries

log = logging.getLogger("jobqueue.ops")


class Command(BaseCommand):
    help = "Re-send one archived message as a new message."

    def add_arguments(self, parser):
        parser.add_argument("--msg-id", type=int, required=True)

    def handle(self, *args, msg_id, **options):
        with transaction.atomic(), connection.cursor() as cursor:
            found = queries.archived_message(cursor, msg_id)
            if found is None:
                raise CommandError(f"no archived message with msg_id={msg_id}")
            body, _headers = found
            new_id = queries.send(cursor, body, json.dumps({"requeued_from": msg_id}))
        log.info("requeued", extra={"original_msg_id": msg_id, "msg_id": new_id})
        self.stdout.write(f"requeued original_msg_id={msg_id} new_msg_id={new_id}")
