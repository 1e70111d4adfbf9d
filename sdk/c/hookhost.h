/*
 * hookhost.h: helpers for hooks written in C against the `hook` world of
 * harness:hooks, 0.2.0 or 0.1.0 (bindings made by `guest-kit c-bindings
 * wit/hooks@0.2.0 --world hook`).
 *
 * Include it after "hook.h" in one source file. It gives:
 *   - settings:  hh_setting("key") -> malloc'd text or NULL (wasi:config/store);
 *   - JSON:      hh_json_field(json, len, "key") -> a top-level string field, unescaped;
 *                hh_json_strings(text, len, &n) -> a JSON list of strings, or one
 *                comma-separated string (how hookhost hands over a TOML list setting);
 *   - results:   0.2.0: hh_keep(ret, result) -> after-execute's `keep`;
 *                hh_replace(ret, result) -> `replace` with `result`, moved;
 *                hh_fail(ret, "why") -> `fail`;
 *                0.1.0: hh_result_move(ret, outcome) -> passes an outcome on unchanged.
 * Every helper is `static inline`: a hook that uses some builds clean with -Wall -Werror.
 * Everything returned is malloc'd; free it with free() / hh_strings_free().
 *
 * Ownership, as wit-bindgen's C bindings define it: the arguments of an exported
 * function belong to the callee (free them, or move them into the return value); what
 * an export returns must be allocated with malloc (hook_string_dup, not a literal) and
 * belongs to the host from then on.
 */
#ifndef HOOKHOST_H
#define HOOKHOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A setting from the operator's config, or NULL when it is not set. */
static inline char *hh_setting(const char *key) {
    hook_string_t k;
    hook_string_set(&k, key);
    hook_option_string_t value;
    wasi_config_store_error_t err;
    if (!wasi_config_store_get(&k, &value, &err)) {
        wasi_config_store_error_free(&err);
        return NULL;
    }
    if (!value.is_some)
        return NULL;
    char *text = malloc(value.val.len + 1);
    if (text) {
        memcpy(text, value.val.ptr, value.val.len);
        text[value.val.len] = '\0';
    }
    hook_string_free(&value.val);
    return text;
}

/* --- a small JSON reader: enough for arguments and settings, never reads past len --- */

typedef struct {
    const char *p;
    const char *end;
} hh_json;

static inline void hh_json_ws(hh_json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static inline void hh_utf8(char **out, uint32_t c) {
    char *o = *out;
    if (c < 0x80) {
        *o++ = (char)c;
    } else if (c < 0x800) {
        *o++ = (char)(0xC0 | (c >> 6));
        *o++ = (char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        *o++ = (char)(0xE0 | (c >> 12));
        *o++ = (char)(0x80 | ((c >> 6) & 0x3F));
        *o++ = (char)(0x80 | (c & 0x3F));
    } else {
        *o++ = (char)(0xF0 | (c >> 18));
        *o++ = (char)(0x80 | ((c >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((c >> 6) & 0x3F));
        *o++ = (char)(0x80 | (c & 0x3F));
    }
    *out = o;
}

static inline bool hh_hex4(hh_json *j, uint32_t *v) {
    if (j->end - j->p < 4)
        return false;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *j->p++;
        *v <<= 4;
        if (c >= '0' && c <= '9') *v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') *v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') *v |= (uint32_t)(c - 'A' + 10);
        else return false;
    }
    return true;
}

/* Reads a string at j->p (which is at its opening quote); returns it malloc'd and
 * unescaped when `keep`, else NULL; *ok says whether it was well formed. */
static inline char *hh_json_string(hh_json *j, bool keep, bool *ok) {
    *ok = false;
    if (j->p >= j->end || *j->p != '"')
        return NULL;
    j->p++;
    /* Unescaping never makes a string longer (\uXXXX is 6 bytes for at most 4). */
    char *text = keep ? malloc((size_t)(j->end - j->p) + 1) : NULL;
    char *o = text;
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++;
        if (c != '\\') {
            if (o) *o++ = c;
            continue;
        }
        if (j->p >= j->end)
            break;
        char e = *j->p++;
        uint32_t cp;
        switch (e) {
        case 'n': cp = '\n'; break;
        case 't': cp = '\t'; break;
        case 'r': cp = '\r'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case '"': case '\\': case '/': cp = (uint32_t)e; break;
        case 'u':
            if (!hh_hex4(j, &cp)) goto bad;
            if (cp >= 0xD800 && cp < 0xDC00 && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u') {
                uint32_t lo;
                j->p += 2;
                if (!hh_hex4(j, &lo) || lo < 0xDC00 || lo > 0xDFFF) goto bad;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            break;
        default: goto bad;
        }
        if (o) hh_utf8(&o, cp);
    }
    if (j->p >= j->end)
        goto bad;
    j->p++; /* the closing quote */
    if (o) *o = '\0';
    *ok = true;
    return text;
bad:
    free(text);
    return NULL;
}

/* Skips one value of any kind; false when it is malformed. */
static inline bool hh_json_skip(hh_json *j, int depth) {
    bool ok;
    hh_json_ws(j);
    if (j->p >= j->end || depth > 64)
        return false;
    char c = *j->p;
    if (c == '"') {
        hh_json_string(j, false, &ok);
        return ok;
    }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->p++;
        hh_json_ws(j);
        if (j->p < j->end && *j->p == close) {
            j->p++;
            return true;
        }
        for (;;) {
            if (c == '{') {
                hh_json_ws(j);
                hh_json_string(j, false, &ok);
                hh_json_ws(j);
                if (!ok || j->p >= j->end || *j->p++ != ':')
                    return false;
            }
            if (!hh_json_skip(j, depth + 1))
                return false;
            hh_json_ws(j);
            if (j->p >= j->end)
                return false;
            char next = *j->p++;
            if (next == close)
                return true;
            if (next != ',')
                return false;
        }
    }
    /* A number, true, false or null. */
    const char *start = j->p;
    while (j->p < j->end && strchr(",}] \t\r\n", *j->p) == NULL)
        j->p++;
    return j->p > start;
}

/* The string value of the top-level `key` of a JSON object, or NULL (absent, not a
 * string, or not an object). */
static inline char *hh_json_field(const char *json, size_t len, const char *key) {
    hh_json j = {json, json + len};
    bool ok;
    hh_json_ws(&j);
    if (j.p >= j.end || *j.p++ != '{')
        return NULL;
    for (;;) {
        hh_json_ws(&j);
        char *name = hh_json_string(&j, true, &ok);
        if (!ok)
            return NULL;
        bool wanted = strcmp(name, key) == 0;
        free(name);
        hh_json_ws(&j);
        if (j.p >= j.end || *j.p++ != ':')
            return NULL;
        hh_json_ws(&j);
        if (wanted)
            return j.p < j.end && *j.p == '"' ? hh_json_string(&j, true, &ok) : NULL;
        if (!hh_json_skip(&j, 0))
            return NULL;
        hh_json_ws(&j);
        if (j.p >= j.end || *j.p++ != ',')
            return NULL;
    }
}

/* A list of strings: a JSON list (`["a","b"]`), or else one comma-separated string.
 * NULL when `text` is NULL or a malformed list; *n is the count. */
static inline char **hh_json_strings(const char *text, size_t len, size_t *n) {
    *n = 0;
    if (!text)
        return NULL;
    char **items = calloc(len / 2 + 2, sizeof(char *));
    if (!items)
        return NULL;
    hh_json j = {text, text + len};
    hh_json_ws(&j);
    if (j.p < j.end && *j.p == '[') {
        bool ok;
        j.p++;
        hh_json_ws(&j);
        if (j.p < j.end && *j.p == ']')
            return items;
        for (;;) {
            hh_json_ws(&j);
            char *item = hh_json_string(&j, true, &ok);
            if (!ok)
                goto bad;
            items[(*n)++] = item;
            hh_json_ws(&j);
            if (j.p >= j.end)
                goto bad;
            char next = *j.p++;
            if (next == ']')
                return items;
            if (next != ',')
                goto bad;
        }
    }
    for (const char *p = text, *end = text + len; p < end;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        while (p < stop && *p == ' ') p++;
        const char *last = stop;
        while (last > p && last[-1] == ' ') last--;
        if (last > p) {
            char *item = malloc((size_t)(last - p) + 1);
            memcpy(item, p, (size_t)(last - p));
            item[last - p] = '\0';
            items[(*n)++] = item;
        }
        p = stop + 1;
    }
    return items;
bad:
    for (size_t i = 0; i < *n; i++) free(items[i]);
    free(items);
    *n = 0;
    return NULL;
}

static inline void hh_strings_free(char **items, size_t n) {
    for (size_t i = 0; i < n; i++) free(items[i]);
    free(items);
}

#ifdef EXPORTS_HARNESS_HOOKS_TOOL_HOOK_AFTER_KEEP
/* 0.2.0 after-execute: hands the result it was given outward unchanged (nothing is
 * copied back), freeing the hook's copy of it. */
static inline void hh_keep(exports_harness_hooks_tool_hook_after_t *ret,
                           exports_harness_hooks_tool_hook_tool_result_t *result) {
    exports_harness_hooks_tool_hook_tool_result_free(result);
    ret->tag = EXPORTS_HARNESS_HOOKS_TOOL_HOOK_AFTER_KEEP;
}

/* 0.2.0 after-execute: hands `result` outward instead: moved into `ret`, not copied
 * (change result->output with hook_string_dup first). */
static inline void hh_replace(exports_harness_hooks_tool_hook_after_t *ret,
                              exports_harness_hooks_tool_hook_tool_result_t *result) {
    ret->tag = EXPORTS_HARNESS_HOOKS_TOOL_HOOK_AFTER_REPLACE;
    ret->val.replace = *result;
    memset(result, 0, sizeof *result);
}

/* 0.2.0 after-execute: the hook could not do its job; the operator's on_failure decides.
 * Frees `result`. */
static inline void hh_fail(exports_harness_hooks_tool_hook_after_t *ret,
                           exports_harness_hooks_tool_hook_tool_result_t *result,
                           const char *why) {
    exports_harness_hooks_tool_hook_tool_result_free(result);
    ret->tag = EXPORTS_HARNESS_HOOKS_TOOL_HOOK_AFTER_FAIL;
    hook_string_dup(&ret->val.fail, why);
}
#else
/* 0.1.0 after-execute: passes `outcome` on unchanged: moves it into `ret` (no copy). */
static inline void hh_result_move(exports_harness_hooks_tool_hook_tool_result_t *ret,
                           exports_harness_hooks_tool_hook_tool_result_t *outcome) {
    *ret = *outcome;
    memset(outcome, 0, sizeof *outcome);
}
#endif

#endif
