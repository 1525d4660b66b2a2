"""`python -m momentlens.worker_url ADMIN_URL ROLE PASSWORD` prints the worker's DATABASE_URL: the owner's
URL (its host, port, database and options) with the worker's role and password (docs/OPERATIONS.md, step 4).

Supabase's pooler names a user `role.PROJECT-REF`: the project part of the owner's user is kept.
"""

import sys
from urllib.parse import quote, urlsplit, urlunsplit


def worker_url(admin_url: str, role: str, password: str) -> str:
    parts = urlsplit(admin_url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ValueError("the owner's URL must be a postgresql:// URL")
    project = (parts.username or "").partition(".")[2]
    login = f"{role}.{project}" if project else role
    where = parts.netloc.rpartition("@")[2]
    netloc = f"{quote(login, safe='')}:{quote(password, safe='')}@{where}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python -m momentlens.worker_url ADMIN_URL ROLE PASSWORD")
    try:
        print(worker_url(*sys.argv[1:]))
    except ValueError as error:
        sys.exit(str(error))
