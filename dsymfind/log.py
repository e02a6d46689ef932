"""The log file: where every diagnostic goes, since the helper may never write to stderr."""

from __future__ import annotations

import logging
import logging.handlers
import os
import threading  # logging has loaded it already
from collections.abc import Mapping

LOGGER_NAME = "dsymfind"
# Size-rotated so a helper that runs for years keeps at most a few MB of log.
MAX_LOG_BYTES = 1 << 20
LOG_BACKUPS = 3
_FORMAT = "%(asctime)s %(process)d %(levelname)s %(message)s"
# Downloads in threads each set the logger up; without it, several saw no handler yet, each
# added one, and every line was written once per handler.
_SETUP = threading.Lock()


def get_logger(log_file: str) -> logging.Logger:
    """The dsymfind logger writing to `log_file`; silent when the file cannot be opened.

    One handler per process, for the file last asked for: a caller naming another file (a
    test's, or a command's after the configuration changed) gets it, never the first
    caller's."""
    # logging's own handler failures print to stderr unless told not to.
    logging.raiseExceptions = False
    logger = logging.getLogger(LOGGER_NAME)
    with _SETUP:
        if getattr(logger, _FILE_ATTRIBUTE, None) != log_file:
            for old in list(logger.handlers):
                logger.removeHandler(old)
                old.close()
            logger.setLevel(logging.INFO)
            logger.propagate = False
            logger.addHandler(_handler(log_file))
            setattr(logger, _FILE_ATTRIBUTE, log_file)
    return logger


# Where the logger's one handler writes (set on the logger by get_logger).
_FILE_ATTRIBUTE = "dsymfind_log_file"


def _handler(log_file: str) -> logging.Handler:
    if os.path.exists(log_file) and not os.path.isfile(log_file):
        return logging.NullHandler()  # a FIFO or device there would block the helper
    try:
        os.makedirs(os.path.dirname(log_file), mode=0o700, exist_ok=True)
        handler: logging.Handler = logging.handlers.RotatingFileHandler(
            log_file, maxBytes=MAX_LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
        )
    except (OSError, ValueError):
        return logging.NullHandler()
    handler.setFormatter(logging.Formatter(_FORMAT))
    return handler


def configured_log_file(env: Mapping[str, str]) -> str:
    """The configured log file, or the default one when the configuration is what failed."""
    from dsymfind import paths, settings

    try:
        return settings.load(env)["log_file"]
    except Exception:  # noqa: BLE001 - a broken configuration must not hide the original error
        return paths.default_log_file(env)


def log_internal_error(exc: BaseException, env: Mapping[str, str]) -> str:
    """Record a bug with its traceback; returns where, for the one-line message."""
    log_file = configured_log_file(env)
    get_logger(log_file).error("internal error", exc_info=exc)
    return log_file
