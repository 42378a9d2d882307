"""Whether a server that accepts connections also answers: one request, seconds, no retries.

A tracking or Prefect server that accepts connections but never answers (hung, stopped with
SIGSTOP, a proxy whose upstream is gone) held a run for minutes in the clients' own timeouts and
retries: MLflow's 120 s read timeout times 4 tries (8 minutes), Prefect's 60 s times 4, before
anything was evaluated. The commands ask once, with :data:`ANSWER_TIMEOUT_S`, before they rely
on a server; a refused or reset connection is left to the clients (their retries ride out a
server's restart) and to their usual errors.
"""

from __future__ import annotations

#: Seconds a server gets to answer the first request of a command (its health endpoint).
ANSWER_TIMEOUT_S = 5.0


def silent(url: str, timeout_s: float = ANSWER_TIMEOUT_S) -> bool:
    """Whether ``url`` (an HTTP(S) URL) does not answer within ``timeout_s``: no connection, or
    no response, in that time. Any response counts as an answer (an error status, a redirect,
    a login page), and so does a refused or broken connection (it is not a wait). The URL's
    user and password are left out of the request: the question needs no credentials."""
    from urllib.parse import urlsplit, urlunsplit

    import httpx

    parts = urlsplit(url)
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    try:
        with httpx.Client(timeout=timeout_s, follow_redirects=False) as client:
            client.get(bare)
    except httpx.TimeoutException:
        return True
    except httpx.HTTPError:
        return False
    return False
