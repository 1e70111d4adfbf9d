"""hookhost_sdk: helpers for hooks written in Python (componentize-py) against the `hook`
world of harness:hooks, 0.2.0 or 0.1.0. Put this directory on componentize-py's path
(`-p`).

    setting(key, default)      a setting from the operator's config, as text
    setting_list(key)          a list setting: JSON text (`["a","b"]`) or one comma-separated string
    setting_count(key, n)      a non-negative integer setting
    PassThrough                a base class whose phases let everything through unchanged,
                               on either version: override only the phase your hook needs
    refuse(message)            refuse the call from before_execute
    keep()                     (0.2.0) after_execute: hand the result outward unchanged
    replace(result)            (0.2.0) after_execute: hand `result` (a ToolResult) outward
    fail(message)              (0.2.0) after_execute: the hook could not do its job

In 0.2.0, `after_execute(self, ctx, call, outcome, result)` gets how the call went
(`outcome`) and what the inner layers returned (`result`), and returns keep(), replace(…)
or fail(…). In 0.1.0 it is `after_execute(self, ctx, call, result)` and returns a result.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import tool_hook
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


def keep():
    return tool_hook.After_Keep()


def replace(result):
    return tool_hook.After_Replace(result)


def fail(message):
    return tool_hook.After_Fail(message)


class PassThrough(exports.ToolHook):
    def before_execute(self, ctx, call):
        return Proceed(values=None, arguments=None)

    def after_execute(self, ctx, call, *given):
        # 0.2.0 passes (outcome, result) and takes an `after`; 0.1.0 passes the result
        # and takes it back.
        if len(given) == 2:
            return keep()
        return given[0]
