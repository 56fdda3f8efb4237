"""BROKER_LOGGER config resources (KIP-412): DescribeConfigs lists the broker's loggers with their
levels, IncrementalAlterConfigs sets (SET) or resets (DELETE) them at runtime, as Kafka's
``ConfigAdminManager`` and ``LoggingController`` do for log4j.

Here the loggers are Python ``logging``'s: ``root`` and those under ``kafkawire``. Kafka's level names map
to Python's levels (TRACE is below DEBUG, FATAL is CRITICAL, OFF is above everything); a reset logger
takes its parent's level again.
"""
from __future__ import annotations

import logging

from ...error_codes import ErrorCode

__all__ = ["ROOT_LOGGER", "VALID_LOG_LEVELS", "LoggerError", "logger_levels", "alter_logger_levels"]

ROOT_LOGGER = "root"
_PREFIX = "kafkawire"
TRACE = 5  # below logging.DEBUG, as log4j's TRACE is below DEBUG
_OFF = logging.CRITICAL + 10
# Kafka's LogLevelConfig.VALID_LOG_LEVELS, in its order, with the Python level each becomes
_LEVELS = {"OFF": _OFF, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
           "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": TRACE}
VALID_LOG_LEVELS = tuple(_LEVELS)
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3
_OPERATION_NAMES = {_APPEND: "APPEND", _SUBTRACT: "SUBTRACT"}

logging.addLevelName(TRACE, "TRACE")


class LoggerError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _level_name(level: int) -> str:
    """The Kafka name of a Python level (the nearest at or above it)."""
    for name in reversed(VALID_LOG_LEVELS):  # from TRACE up
        if level <= _LEVELS[name]:
            return name
    return "OFF"


def _loggers() -> dict[str, logging.Logger]:
    """The loggers a client may see and set: root, ``kafkawire`` and the ones under it that exist."""
    found = {ROOT_LOGGER: logging.getLogger(), _PREFIX: logging.getLogger(_PREFIX)}
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if name.startswith(_PREFIX + ".") and isinstance(logger, logging.Logger):
            found[name] = logger
    return found


def logger_levels() -> list[tuple[str, str]]:
    """(logger, Kafka level name) for each logger, root first: its own level, else the one it inherits."""
    loggers = _loggers()
    return [(name, _level_name(loggers[name].getEffectiveLevel()))
            for name in [ROOT_LOGGER] + sorted(n for n in loggers if n != ROOT_LOGGER)]


def alter_logger_levels(operations: list[tuple[int, str, str | None]], validate_only: bool) -> None:
    """Apply (operation, logger, level) SET and DELETE operations, all checked first
    (``ConfigAdminManager.validateLogLevelConfigs``); LoggerError with Kafka's code and message."""
    loggers = _loggers()
    for operation, name, level in operations:
        if operation in (_SET, _DELETE) and name not in loggers:
            raise LoggerError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
        if operation == _SET:
            if level not in _LEVELS:
                raise LoggerError(ErrorCode.INVALID_CONFIG,
                                  f"Cannot set the log level of {name} to {level} as it is not a supported log "
                                  f"level. Valid log levels are {', '.join(VALID_LOG_LEVELS)}")
        elif operation == _DELETE:
            if name == ROOT_LOGGER:
                raise LoggerError(ErrorCode.INVALID_REQUEST,
                                  f"Removing the log level of the {ROOT_LOGGER} logger is not allowed")
        elif operation in _OPERATION_NAMES:
            raise LoggerError(ErrorCode.INVALID_REQUEST, f"{_OPERATION_NAMES[operation]} operation is not allowed "
                                                         f"for the BROKER_LOGGER resource")
        else:
            raise LoggerError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {operation} is not allowed for "
                                                         f"the BROKER_LOGGER resource")
    if validate_only:
        return
    for operation, name, level in operations:
        logger = loggers[name]
        if operation == _SET:
            assert level is not None
            logger.setLevel(_LEVELS[level])
        else:  # DELETE: back to the parent's level
            logger.setLevel(logging.NOTSET)
