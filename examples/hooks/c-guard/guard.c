// c-guard: refuses commands that match the operator's patterns.
//
// Settings (hookhost config, `[hooks.settings]`):
//   deny  = ["*rm -rf /*", "*curl *|*sh*"]   glob patterns (fnmatch); a command matching
//                                            any of them is refused
//   field = "command"                        the argument holding the command (default)
//
// Give the layer `tools = ["bash"]` so it sees bash calls only.

#include "hook.h"
#include "hookhost.h"

#include <fnmatch.h>
#include <stdio.h>

bool exports_harness_hooks_tool_hook_before_execute(
    exports_harness_hooks_tool_hook_call_context_t *ctx,
    exports_harness_hooks_tool_hook_tool_call_t *call,
    exports_harness_hooks_tool_hook_proceed_t *ret, hook_string_t *err) {
    char *field = hh_setting("field");
    char *command = hh_json_field((const char *)call->arguments.ptr, call->arguments.len,
                                  field ? field : "command");
    char *deny = hh_setting("deny");
    size_t n = 0;
    char **patterns = hh_json_strings(deny, deny ? strlen(deny) : 0, &n);
    const char *matched = NULL;
    for (size_t i = 0; command && i < n && !matched; i++)
        if (fnmatch(patterns[i], command, 0) == 0)
            matched = patterns[i];

    bool allowed = matched == NULL;
    if (!allowed) {
        char message[512];
        snprintf(message, sizeof message,
                 "refused by policy: the command matches the operator's pattern `%s`", matched);
        hook_string_dup(err, message);
        fprintf(stderr, "c-guard: refused %s: %s\n", command, matched);
    } else {
        ret->values.is_some = false;
        ret->arguments.is_some = false;
    }
    hh_strings_free(patterns, n);
    free(deny);
    free(command);
    free(field);
    exports_harness_hooks_tool_hook_call_context_free(ctx);
    exports_harness_hooks_tool_hook_tool_call_free(call);
    return allowed;
}

void exports_harness_hooks_tool_hook_after_execute(
    exports_harness_hooks_tool_hook_call_context_t *ctx,
    exports_harness_hooks_tool_hook_tool_call_t *call,
    exports_harness_hooks_tool_hook_tool_result_t *outcome,
    exports_harness_hooks_tool_hook_tool_result_t *ret) {
    hh_result_move(ret, outcome);
    exports_harness_hooks_tool_hook_call_context_free(ctx);
    exports_harness_hooks_tool_hook_tool_call_free(call);
}
