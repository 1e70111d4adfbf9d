// hookhost.js: helpers for hooks written in JavaScript (componentize-js) against the
// `hook` world of harness:hooks, 0.2.0 or 0.1.0. Import it from your hook's module;
// componentize-js bundles it.
//
//   setting(key, fallback)  a setting from the operator's config, as text
//   settingList(key)        a list setting: JSON text (`["a","b"]`) or one comma-separated string
//   settingCount(key, n)    a non-negative integer setting
//   proceed()               let the call through unchanged (before-execute)
//   refuse(message)         refuse the call (before-execute): throws, which the bindings
//                           turn into `err(message)`
//   keep()                  (0.2.0) afterExecute: hand the result outward unchanged
//   replace(result)         (0.2.0) afterExecute: hand `result` ({output, isError,
//                           mediaType}) outward instead
//   fail(message)           (0.2.0) afterExecute: the hook could not do its job
//
// In 0.2.0, `afterExecute(ctx, call, outcome, result)` gets how the call went (`outcome`:
// {kind: 'done' | 'tool-error' | 'refused' | 'failed', refusedBy, failures}) and what the
// inner layers returned (`result`), and returns keep(), replace(…) or fail(…): the
// bindings take a variant as `{tag, val}`, and `component check` tries a replace.
// In 0.1.0 it is `afterExecute(ctx, call, result)` and returns a result.
import { get } from 'wasi:config/store@0.2.0-rc.1';

export function setting(key, fallback) {
  const value = get(key);
  return value === undefined || value === null ? fallback : value;
}

export function settingList(key) {
  const text = setting(key, '');
  if (text.trimStart().startsWith('[')) return JSON.parse(text).map(String);
  return text.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
}

export function settingCount(key, fallback) {
  const text = setting(key, undefined);
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0) throw new Error(`setting ${key} must be a non-negative integer, not ${text}`);
  return n;
}

export function proceed() {
  return { values: undefined, arguments: undefined };
}

export function refuse(message) {
  throw message;
}

export function keep() {
  return { tag: 'keep' };
}

export function replace(result) {
  return { tag: 'replace', val: result };
}

export function fail(message) {
  return { tag: 'fail', val: message };
}
