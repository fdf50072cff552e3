import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Script, StepSelection } from '../../scripted-model';
import { ScriptError, loadScript, parseScript, selectStep, validateScript } from '../../scripted-model';

const ARCHITECTURE_SCRIPT = `agents:
  coordinator:
    - call: solver
      args: { message: "Solve ARC task 007bbfb7" }
    - say: "The solver is done."
  solver:
    - calls:
        - { call: load_arc_task, args: { task_id: "007bbfb7" } }
        - { call: note, args: '{"broken": ' }
    - say: "Solved."
  slow_worker:
    - { say: "late", delay_ms: 5000 }
    - { fail: 503, times: 1 }
    - say: "recovered"
`;

function scriptError(run: () => unknown): ScriptError {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof ScriptError, `expected a ScriptError, got ${String(error)}`);
    assert.equal(error.name, 'ScriptError');
    return error;
  }
  assert.fail('expected a ScriptError');
}

test('scripted-model script: parses the example of docs/architecture.md §7 into tagged steps with defaults', () => {
  const script = parseScript(ARCHITECTURE_SCRIPT, 'architecture.yaml');
  assert.deepEqual(script, {
    agents: {
      coordinator: [
        { kind: 'call', call: 'solver', args: { message: 'Solve ARC task 007bbfb7' } },
        { kind: 'say', say: 'The solver is done.' },
      ],
      solver: [
        {
          kind: 'calls',
          calls: [
            { call: 'load_arc_task', args: { task_id: '007bbfb7' } },
            { call: 'note', args: '{"broken": ' },
          ],
        },
        { kind: 'say', say: 'Solved.' },
      ],
      slow_worker: [
        { kind: 'say', say: 'late', delay_ms: 5000 },
        { kind: 'fail', fail: 503, times: 1 },
        { kind: 'say', say: 'recovered' },
      ],
    },
  });
});

test('scripted-model script: JSON text parses the same as YAML', () => {
  const json = JSON.stringify({ agents: { a: [{ call: 't' }, { fail: 429, retry_after_s: 2 }, { say: 'ok' }] } });
  assert.deepEqual(parseScript(json, 'a.json'), {
    agents: {
      a: [
        { kind: 'call', call: 't', args: {} },
        { kind: 'fail', fail: 429, times: 1, retry_after_s: 2 },
        { kind: 'say', say: 'ok' },
      ],
    },
  });
});

test('scripted-model script: selectStep picks the answering step by assistant count', () => {
  const script = parseScript(ARCHITECTURE_SCRIPT, 'architecture.yaml');
  const first = selectStep(script, 'coordinator', 0, 0);
  const second = selectStep(script, 'coordinator', 1, 0);
  assert.equal(first.kind, 'answer');
  assert.equal(second.kind, 'answer');
  assert.deepEqual(first.kind === 'answer' && [first.stepNumber, first.step.kind], [1, 'call']);
  assert.deepEqual(second.kind === 'answer' && [second.stepNumber, second.step.kind], [2, 'say']);
});

test('scripted-model script: fail entries fail the next answering step `times` times, then it answers', () => {
  const script = validateScript({
    agents: {
      w: [
        { fail: 503, times: 2, retry_after_s: 1 },
        { fail: 429, message: 'slow down' },
        { say: 'one' },
        { fail: 500 },
        { say: 'two' },
      ],
    },
  });
  const at = (assistantCount: number, failuresSoFar: number) => selectStep(script, 'w', assistantCount, failuresSoFar);
  assert.deepEqual(at(0, 0), {
    kind: 'fail',
    agent: 'w',
    stepNumber: 1,
    status: 503,
    retryAfterS: 1,
    message: "Scripted model: scripted failure 503 for agent 'w' at step 1 (1 of 2).",
    attempt: 1,
    times: 2,
  });
  const third = at(0, 2);
  assert.equal(third.kind, 'fail');
  assert.deepEqual(third.kind === 'fail' && [third.status, third.message, third.retryAfterS], [
    429,
    'slow down',
    undefined,
  ]);
  // failuresSoFar counts across the fail entries before a step; then the step answers.
  const outline = (selection: StepSelection) =>
    selection.kind === 'answer'
      ? `answer ${selection.stepNumber}: ${selection.step.kind === 'say' ? selection.step.say : selection.step.kind}`
      : selection.kind === 'fail'
        ? `fail ${selection.stepNumber}: ${selection.status} (${selection.attempt} of ${selection.times})`
        : selection.kind;
  assert.deepEqual([at(0, 1), at(0, 2), at(0, 3), at(0, 9), at(1, 0), at(1, 1), at(2, 0)].map(outline), [
    'fail 1: 503 (2 of 2)',
    'fail 1: 429 (1 of 1)',
    'answer 1: one',
    'answer 1: one',
    'fail 2: 500 (1 of 1)',
    'answer 2: two',
    'exhausted',
  ]);
});

test('scripted-model script: a script that runs out names the agent and the step', () => {
  const script = parseScript(ARCHITECTURE_SCRIPT, 'architecture.yaml');
  assert.deepEqual(selectStep(script, 'solver', 2, 0), {
    kind: 'exhausted',
    agent: 'solver',
    stepNumber: 3,
    answeringSteps: 2,
    message: "Scripted model: the script for agent 'solver' has no step 3 (it has 2 answering steps).",
  });
  const one: Script = validateScript({ agents: { solo: [{ say: 'x' }] } });
  const exhausted = selectStep(one, 'solo', 1, 0);
  assert.equal(
    exhausted.kind === 'exhausted' && exhausted.message,
    "Scripted model: the script for agent 'solo' has no step 2 (it has 1 answering step).",
  );
});

test('scripted-model script: an unknown agent lists the agents the script has', () => {
  const script = parseScript(ARCHITECTURE_SCRIPT, 'architecture.yaml');
  assert.deepEqual(selectStep(script, 'constructor', 0, 0), {
    kind: 'unknown_agent',
    agent: 'constructor',
    agents: ['coordinator', 'solver', 'slow_worker'],
    message: "Scripted model: the script has no agent 'constructor' (it has: 'coordinator', 'solver', 'slow_worker').",
  });
});

test('scripted-model script: a YAML syntax error names the file, line and column', () => {
  const error = scriptError(() => parseScript('agents:\n  a:\n    - say: [unclosed\n', 'broken.yaml'));
  assert.equal(error.source, 'broken.yaml');
  assert.equal(error.problems.length, 1);
  assert.match(error.problems[0] ?? '', /^broken\.yaml:4:1: Flow sequence/);
  assert.match(error.message, /^Scripted model: invalid script broken\.yaml:\n {2}- broken\.yaml:4:1: /);
});

test('scripted-model script: steps of unknown shape are reported with file, position and path', () => {
  const text = [
    'agents:',
    '  a:',
    '    - ask: x',
    '    - say: hi',
    '      call: t',
    '    - say: hi',
    '      delay: 3',
    '    - call: t',
    '      args: 3',
    '    - calls: [{ call: t, arg: 1 }]',
    '    - say: 4',
    '    - fail: 200',
    '      times: 0',
    '    - say: ok',
    '',
  ].join('\n');
  const error = scriptError(() => parseScript(text, 'shapes.yaml'));
  assert.deepEqual(error.problems, [
    "shapes.yaml:3:7: agents.a[0]: a step needs one of say, call, calls, fail; got fields 'ask'",
    'shapes.yaml:4:7: agents.a[1]: a step has exactly one of say, call, calls, fail, this one has say and call',
    "shapes.yaml:6:7: agents.a[2]: unknown field 'delay' in a say step (it takes: say, delay_ms, hold, hold_end, chunk_delay_ms)",
    'shapes.yaml:9:13: agents.a[3].args: args must be an object (sent as JSON) or a string (sent verbatim)',
    "shapes.yaml:10:15: agents.a[4].calls[0]: unknown field 'arg' in a tool call (it takes: call, args, id)",
    'shapes.yaml:11:12: agents.a[5].say: say must be a string',
    'shapes.yaml:12:13: agents.a[6].fail: fail must be an HTTP error status (400-599)',
    'shapes.yaml:13:14: agents.a[6].times: times must be at least 1',
  ]);
});

test('scripted-model script: a fail entry with no answering step after it is refused', () => {
  const error = scriptError(() => parseScript('agents:\n  a:\n    - say: ok\n    - fail: 503\n', 'trailing.yaml'));
  assert.deepEqual(error.problems, [
    'trailing.yaml:4:7: agents.a[1]: a fail entry fails requests for the answering step after it, but no say, call or calls follows',
  ]);
});

test('scripted-model script: a script without agents says what a script needs', () => {
  const error = scriptError(() => parseScript('agent:\n  a: []\n', 'typo.yaml'));
  assert.deepEqual(error.problems, [
    "typo.yaml:1:1: agents: the script needs an 'agents' mapping of agent name to a list of steps",
    "typo.yaml:1:1: (top level): unknown top-level field 'agent' (a script has only 'agents')",
  ]);
});

test('scripted-model script: loadScript reads a file and names it in errors', () => {
  const dir = mkdtempSync(join(tmpdir(), 'baton-scripted-model-'));
  const good = join(dir, 'good.yaml');
  const bad = join(dir, 'bad.json');
  writeFileSync(good, ARCHITECTURE_SCRIPT);
  writeFileSync(bad, '{"agents": {"a": [{"say": "x", "delay_ms": -1}]}}');
  assert.deepEqual(Object.keys(loadScript(good).agents), ['coordinator', 'solver', 'slow_worker']);

  const invalid = scriptError(() => loadScript(bad));
  assert.equal(invalid.source, bad);
  assert.deepEqual(invalid.problems, [`${bad}:1:44: agents.a[0].delay_ms: delay_ms must not be negative`]);

  const missing = join(dir, 'missing.yaml');
  const unreadable = scriptError(() => loadScript(missing));
  assert.equal(unreadable.source, missing);
  assert.match(unreadable.message, new RegExp(`invalid script ${missing}:\\n {2}- cannot read the file: ENOENT`));
  assert.equal((unreadable.cause as NodeJS.ErrnoException).code, 'ENOENT');
});
