"""A worker's /health, read as nginx or an operator would."""

import json
import urllib.error
import urllib.request


def health(port: int, method: str = "GET") -> tuple[int, dict]:
    """(HTTP status, body); (0, {}) while nothing answers on the port."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/health", method=method)
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")
    except OSError:
        return 0, {}
