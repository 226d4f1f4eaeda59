"""The package's logger and its switch.

Every module logs to ``logging.getLogger(__name__)``, a child of ``functional_triton``'s logger.
Debug records say what a user debugging a graph wants to know: which alias groups a functional
node clones, and why the reinplace pass keeps or drops each clone. ``FUNCTIONAL_TRITON_LOGS``
(``debug``, ``info``, ``warning``, ... or a number), read at import, sets that logger's level
and gives it a stderr handler; ``logging.getLogger("functional_triton").setLevel(...)`` does the
same from Python, with the application's own handlers.
"""

from __future__ import annotations

import logging
import os

LOGGER_NAME = "functional_triton"
ENV_VAR = "FUNCTIONAL_TRITON_LOGS"


def level_of(text: str) -> int:
    """``"debug"`` -> logging.DEBUG, ``"10"`` -> 10; ValueError naming the variable otherwise."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    level = logging.getLevelName(text.upper())
    if not isinstance(level, int):
        raise ValueError(f"{ENV_VAR}={text!r} is not a logging level (debug, info, warning, error, critical)")
    return level


def configure_from_env() -> None:
    """Apply ``FUNCTIONAL_TRITON_LOGS`` if it is set (once, at import)."""
    text = os.environ.get(ENV_VAR)
    if not text:
        return
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level_of(text))
    if not any(getattr(h, "_functional_triton", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(name)s] %(levelname)s: %(message)s"))
        handler._functional_triton = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
