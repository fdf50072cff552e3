import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  buildDelegationPreamble,
  truncateChars,
  withDelegationPreamble,
  type DelegationPreambleInput,
} from '../../common/delegation-preamble';

const base: DelegationPreambleInput = {
  detail: 'standard',
  caller: { name: 'solver', description: 'Solves ARC-AGI puzzles.' },
  chain: ['coordinator', 'solver'],
  callee: 'observer',
  rootMessage: 'Solve ARC task 007bbfb7',
  hasEnvData: false,
};

test('delegation preamble: standard names the caller, its description, the chain and the task', () => {
  assert.equal(
    buildDelegationPreamble(base),
    [
      '---',
      '[Delegation Context]',
      'Called by: solver',
      'solver is: "Solves ARC-AGI puzzles."',
      'Delegation chain: human → coordinator → solver → you (observer)',
      'Task context: Solve ARC task 007bbfb7',
      '---',
    ].join('\n'),
  );
});

test('delegation preamble: the env-data line appears only when the scope holds entries', () => {
  assert.match(
    buildDelegationPreamble({ ...base, hasEnvData: true }) ?? '',
    /\nShared environment data is available — call list_env_data\(\) to see what has been stored\.\n---$/,
  );
  assert.doesNotMatch(buildDelegationPreamble(base) ?? '', /list_env_data/);
});

test('delegation preamble: context_keys entries are listed with their descriptions', () => {
  const text = buildDelegationPreamble({
    ...base,
    hasEnvData: true,
    contextEntries: [{ key: 'arc_task', shortDescription: 'The current ARC task, 3x3 grids.' }],
  });
  assert.match(
    text ?? '',
    /\nsolver points you to these entries \(read them with get_env_data\):\n- arc_task: The current ARC task, 3x3 grids\.\n---$/,
  );
});

test('delegation preamble: minimal keeps only the caller and the chain', () => {
  assert.equal(
    buildDelegationPreamble({ ...base, detail: 'minimal', hasEnvData: true }),
    '---\n[Delegation Context]\nCalled by: solver\nDelegation chain: human → coordinator → solver → you (observer)\n---',
  );
});

test('delegation preamble: verbose adds the caller latest assistant message', () => {
  const text = buildDelegationPreamble({ ...base, detail: 'verbose', callerLatest: 'I loaded the task.' });
  assert.match(text ?? '', /\nTask context: Solve ARC task 007bbfb7\nsolver last said: I loaded the task\.\n---$/);
});

test('delegation preamble: false means none, and the message is passed unchanged', () => {
  assert.equal(buildDelegationPreamble({ ...base, detail: false }), undefined);
  assert.equal(withDelegationPreamble('Look at the grid.', { ...base, detail: false }), 'Look at the grid.');
  assert.ok(withDelegationPreamble('Look at the grid.', base).endsWith('---\n\nLook at the grid.'));
});

test('delegation preamble: the task context is truncated with an ellipsis past the limit', () => {
  const text = buildDelegationPreamble({ ...base, rootMessage: 'a'.repeat(30), taskContextLimit: 10 });
  assert.match(text ?? '', /\nTask context: a{9}…\n/);
  assert.equal(truncateChars('short', 10), 'short');
  assert.equal(truncateChars('line one\n\nline two', 100), 'line one line two');
});
