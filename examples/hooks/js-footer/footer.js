// js-footer: appends one line to every tool output, telling the model what it is looking
// at: the tool, how the call ended, and the output's size.
//
//   [bash · done · 5,120 bytes · 80 lines]
//
// Settings: `skip_tools` (a list of tool names that get no footer).
import { settingList, proceed } from '../../../sdk/js/hookhost.js';

export const toolHook = {
  beforeExecute(_ctx, _call) {
    return proceed();
  },

  afterExecute(ctx, call, outcome) {
    if (settingList('skip_tools').includes(call.name)) return outcome;
    const values = new Map(ctx.values);
    let how = values.get('hookhost.outcome') ?? 'done';
    if (how === 'done' && outcome.isError) how = 'error';
    const bytes = new TextEncoder().encode(outcome.output).length;
    const text = outcome.output;
    const lines = text.length === 0 ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    const footer = `[${call.name} · ${how} · ${bytes.toLocaleString('en-US')} bytes · ${lines} lines]`;
    const sep = text.length === 0 || text.endsWith('\n') ? '' : '\n';
    return { ...outcome, output: `${text}${sep}${footer}` };
  },
};
