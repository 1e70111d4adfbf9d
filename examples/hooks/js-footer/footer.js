// js-footer: appends one line to every tool output, telling the model what it is looking
// at: the tool, how the call ended, and the output's size.
//
//   [bash · done · 5,120 bytes · 80 lines]
//
// Settings: `skip_tools` (a list of tool names that get no footer).
import { settingList, proceed, keep, replace } from '../../../sdk/js/hookhost.js';

// How the footer names each way a call can end.
const HOW = { done: 'done', 'tool-error': 'error', refused: 'refused', failed: 'failed' };

export const toolHook = {
  beforeExecute(_ctx, _call) {
    return proceed();
  },

  afterExecute(_ctx, call, outcome, result) {
    if (settingList('skip_tools').includes(call.name)) return keep();
    const how = HOW[outcome.kind] ?? outcome.kind;
    const bytes = new TextEncoder().encode(result.output).length;
    const text = result.output;
    const lines = text.length === 0 ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    const footer = `[${call.name} · ${how} · ${bytes.toLocaleString('en-US')} bytes · ${lines} lines]`;
    const sep = text.length === 0 || text.endsWith('\n') ? '' : '\n';
    return replace({ ...result, output: `${text}${sep}${footer}` });
  },
};
