/* A 0.2.0 hook in C, built with -Wall -Werror and sdk/c/hookhost.h: it refuses a command
 * that says "forbidden", replaces an output holding "!" with "replaced", and keeps every
 * other (hh_keep / hh_replace; the helpers it does not use cost no warning). */
#include "hook.h"
#include "hookhost.h"
bool exports_harness_hooks_tool_hook_before_execute(exports_harness_hooks_tool_hook_call_context_t *ctx, exports_harness_hooks_tool_hook_tool_call_t *call, exports_harness_hooks_tool_hook_proceed_t *ret, hook_string_t *err) {
    char *cmd = hh_json_field((const char *)call->arguments.ptr, call->arguments.len, "command");
    bool refuse = cmd && strstr(cmd, "forbidden");
    free(cmd);
    exports_harness_hooks_tool_hook_call_context_free(ctx);
    exports_harness_hooks_tool_hook_tool_call_free(call);
    if (refuse) { hook_string_dup(err, "refused: forbidden"); return false; }
    ret->values.is_some = false; ret->arguments.is_some = false;
    return true;
}
void exports_harness_hooks_tool_hook_after_execute(exports_harness_hooks_tool_hook_call_context_t *ctx, exports_harness_hooks_tool_hook_tool_call_t *call, exports_harness_hooks_tool_hook_call_outcome_t *outcome, exports_harness_hooks_tool_hook_tool_result_t *result, exports_harness_hooks_tool_hook_after_t *ret) {
    exports_harness_hooks_tool_hook_call_context_free(ctx);
    exports_harness_hooks_tool_hook_tool_call_free(call);
    exports_harness_hooks_tool_hook_call_outcome_free(outcome);
    if (result->output.len > 0 && memchr(result->output.ptr, '!', result->output.len)) {
        hook_string_free(&result->output);
        hook_string_dup(&result->output, "replaced");
        hh_replace(ret, result);
    } else {
        hh_keep(ret, result);
    }
}
