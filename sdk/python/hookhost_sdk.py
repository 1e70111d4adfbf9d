"""hookhost_sdk: helpers for hooks written in Python (componentize-py) against the `hook`
world of harness:hooks. Put this directory on componentize-py's path (`-p`).

    setting(key, default)      a setting from the operator's config, as text
    setting_list(key)          a list setting: JSON text (`["a","b"]`) or one comma-separated string
    setting_count(key, n)      a non-negative integer setting
    PassThrough                a base class whose phases let everything through unchanged:
                               override only the phase your hook needs
    refuse(message)            refuse the call from before_execute
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.tool_hook import Proceed
from wit_world.imports import store


def setting(key, default=None):
    value = store.get(key)
    return default if value is None else value


def setting_list(key):
    text = setting(key, "")
    if text.lstrip().startswith("["):
        return [str(item) for item in json.loads(text)]
    return [item.strip() for item in text.split(",") if item.strip()]


def setting_count(key, default):
    text = setting(key)
    if text is None:
        return default
    if not text.isdigit():
        raise ValueError(f"setting {key} must be a non-negative integer, not {text!r}")
    return int(text)


def refuse(message):
    raise Err(message)


class PassThrough(exports.ToolHook):
    def before_execute(self, ctx, call):
        return Proceed(values=None, arguments=None)

    def after_execute(self, ctx, call, outcome):
        return outcome
