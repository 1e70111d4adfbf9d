// A 0.2.0 hook in JavaScript with a mistake a newcomer makes: when an output holds a
// password it returns the new result itself, not `{ tag: 'replace', val: result }`.
// Ordinary outputs are kept, so only a check that makes it replace finds the mistake.
export const toolHook = {
  beforeExecute(_ctx, _call) {
    return { values: undefined, arguments: undefined };
  },

  afterExecute(_ctx, _call, _outcome, result) {
    if (!result.output.includes('password')) return { tag: 'keep' };
    return { ...result, output: result.output.replaceAll('hunter2', '*******') };
  },
};
