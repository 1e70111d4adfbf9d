"""python-redactor: masks API keys, tokens and passwords in tool outputs.

Put it inside offload (after it in the config's list): after-execute runs innermost
first, so offload then writes the redacted text to its file too.

Settings:
    patterns  more regular expressions to mask (a list); each match becomes [REDACTED]
"""

import re
import sys

from hookhost_sdk import PassThrough, keep, replace, setting_list
from wit_world.imports.types import ToolResult

# What a secret looks like: the well-known token formats, then `key = value` pairs whose
# key says it is a secret (the value is masked, the key kept).
KNOWN = [
    ("openai", r"sk-(?:proj-)?[A-Za-z0-9_-]{20,}"),
    ("anthropic", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    ("github", r"gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,}"),
    ("aws", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("slack", r"xox[abprs]-[A-Za-z0-9-]{10,}"),
    ("google", r"AIza[0-9A-Za-z_-]{35}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("bearer", r"(?<=Bearer )[A-Za-z0-9._~+/-]{16,}=*"),
    ("private-key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
]
ASSIGNED = re.compile(
    r"(?i)\b([A-Za-z0-9_.-]*(?:api[_-]?key|secret|token|password|passwd)[A-Za-z0-9_.-]*"
    r"[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED)([^\s\"',;]{6,})"
)


class ToolHook(PassThrough):
    def after_execute(self, ctx, call, outcome, result):
        text = result.output
        count = 0
        for kind, pattern in KNOWN:
            text, n = re.subn(pattern, f"[REDACTED:{kind}]", text)
            count += n
        text, n = ASSIGNED.subn(lambda m: m.group(1) + "[REDACTED]", text)
        count += n
        for pattern in setting_list("patterns"):
            text, n = re.subn(pattern, "[REDACTED]", text)
            count += n
        if count == 0:
            return keep()
        print(f"redactor: masked {count} secret(s) in {call.name} {call.id}", file=sys.stderr)
        return replace(ToolResult(output=text, is_error=result.is_error, media_type=result.media_type))
