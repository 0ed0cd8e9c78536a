"""The ``http:`` backend (a decision service over HTTP) and the HTTP pieces ``openai:`` shares:
:mod:`~pfr.models.http.backend` is the backend, :mod:`~pfr.models.http.body` writes request bodies,
:mod:`~pfr.models.http.answers` reads decisions from JSON answers, and :mod:`~pfr.models.http.client`
sends with retries and keeps secrets out of messages."""
