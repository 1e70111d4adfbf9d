// hookhost.js: helpers for hooks written in JavaScript (componentize-js) against the
// `hook` world of harness:hooks. Import it from your hook's module; componentize-js
// bundles it.
//
//   setting(key, fallback)  a setting from the operator's config, as text
//   settingList(key)        a list setting: JSON text (`["a","b"]`) or one comma-separated string
//   settingCount(key, n)    a non-negative integer setting
//   proceed()               let the call through unchanged (before-execute)
//   refuse(message)         refuse the call (before-execute): throws, which the bindings
//                           turn into `err(message)`
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
