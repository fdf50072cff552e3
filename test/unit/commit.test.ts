import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  defaultForkPrefix,
  embeddedObjects,
  forkAggregate,
  MAX_COMMIT_SCAN_CHARS,
  mergedKey,
  parseCommit,
} from '../../common/commit';
import { buildDelegationPreamble } from '../../common/delegation-preamble';

const commit = {
  commit_id: 'c1',
  creates: [{ id: 'e1', description: 'Evidence.', content: { size: 9 } }],
  links: [{ type: 'supports', src: 'e1', dst: 'arc/task' }],
  proposes_updates: [{ target_id: 'arc/plan', patch: { count: 5 } }],
};

test('commit parser: a whole-JSON answer, a fenced block and an object embedded in prose are all found', () => {
  for (const answer of [
    JSON.stringify(commit),
    `Here is what I found.\n\`\`\`json\n${JSON.stringify(commit, null, 2)}\n\`\`\`\nDone.`,
    `I found it: ${JSON.stringify(commit)} and that is all.`,
  ]) {
    const parsed = parseCommit(answer);
    assert.equal(parsed.kind, 'commit', answer);
    if (parsed.kind !== 'commit') continue;
    assert.equal(parsed.commit.commit_id, 'c1');
    assert.deepEqual(parsed.commit.creates[0]?.content, { size: 9 });
    assert.equal(parsed.commit.links[0]?.type, 'supports');
    assert.deepEqual(parsed.commit.proposes_updates[0]?.patch, { count: 5 });
  }
});

test('commit parser: prose, and JSON that is not a commit, hold no commit', () => {
  assert.deepEqual(parseCommit('The rule is tiling.'), { kind: 'none' });
  assert.deepEqual(parseCommit(''), { kind: 'none' });
  assert.deepEqual(parseCommit('The grid is {3x3} and the answer is {"size": 9}.'), { kind: 'none' });
  assert.deepEqual(parseCommit('```\nnot json at all\n```'), { kind: 'none' }, 'an untyped fence is not a claim');
});

test('commit parser: a commit that was meant but is broken becomes an error, never a throw', () => {
  const broken = parseCommit('```json\n{ "creates": [ { "id": "x"\n```');
  assert.equal(broken.kind, 'error');
  assert.match(broken.kind === 'error' ? broken.error : '', /^the commit is not valid JSON/);
  const invalid = parseCommit(JSON.stringify({ creates: [{ id: 'bad key!', description: 'd', content: 1 }] }));
  assert.equal(invalid.kind, 'error');
  assert.match(invalid.kind === 'error' ? invalid.error : '', /'creates\.0\.id' may hold only letters/);
  const badLink = parseCommit(JSON.stringify({ links: [{ type: 'likes', src: 'a', dst: 'b' }] }));
  assert.equal(badLink.kind, 'error');
  assert.match(badLink.kind === 'error' ? badLink.error : '', /'links\.0\.type'/);
});

test('commit parser: never throws, whatever the answer (property)', () => {
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string(),
        fc.json().map((json) => `text ${json} text`),
        fc.json().map((json) => `\`\`\`json\n${json}\n\`\`\``),
        fc.jsonValue().map((value) => JSON.stringify({ creates: value, links: value })),
      ),
      (answer) => {
        const parsed = parseCommit(answer);
        assert.ok(['none', 'commit', 'error'].includes(parsed.kind));
      },
    ),
    { numRuns: 500 },
  );
});

/**
 * Answers that made the search for embedded objects read the rest of the text again from every `{` that never
 * closes: unclosed braces, braces opening strings that never end, escapes, nesting.
 */
function braceHeavy(size: number): Record<string, string> {
  const fill = (unit: string) => unit.repeat(Math.ceil(size / unit.length)).slice(0, size);
  return {
    'unclosed braces': fill('{'),
    'braces and quotes': fill('{"'),
    'braces in prose': fill('{ a '),
    'nested, never closed': fill('{{}'),
    'escaped quotes': fill('{"\\"'),
    'a commit after unclosed braces': `${fill('{ ')}${JSON.stringify(commit)}`,
  };
}

test('commit parser: finding embedded objects reads each character a bounded number of times (linear work)', () => {
  for (const size of [1_000, 10_000, 100_000]) {
    for (const [shape, text] of Object.entries(braceHeavy(size))) {
      const { steps } = embeddedObjects(text);
      // Each character is looked at a fixed number of times, whatever the answer holds: no rescans.
      assert.ok(steps <= 3 * (text.length + 2), `${shape}, ${text.length} characters: ${steps} steps`);
    }
  }
  // The search still finds what it found before: a commit after 100,000 unclosed braces.
  const found = parseCommit(braceHeavy(100_000)['a commit after unclosed braces'] ?? '');
  assert.equal(found.kind === 'commit' ? found.commit.commit_id : found.kind, 'c1');
});

/** The search as it was (quadratic): from each `{` not inside an earlier span, read on until the brace closes. */
function embeddedObjectsByRescanning(text: string): string[] {
  const spans: string[] = [];
  for (let start = text.indexOf('{'); start !== -1 && spans.length < 20; start = text.indexOf('{', start + 1)) {
    let depth = 0;
    let inString = false;
    let end = -1;
    for (let i = start; i < text.length && end === -1; i++) {
      const char = text[i];
      if (inString) {
        if (char === '\\') i++;
        else if (char === '"') inString = false;
      } else if (char === '"') inString = true;
      else if (char === '{') depth++;
      else if (char === '}' && --depth === 0) end = i;
    }
    if (end !== -1) {
      spans.push(text.slice(start, end + 1));
      start = end;
    }
  }
  return spans;
}

test('commit parser: the linear search finds the same spans as reading on from every brace (property)', () => {
  fc.assert(
    fc.property(fc.string({ unit: fc.constantFrom('{', '}', '"', '\\', 'a', ' '), maxLength: 80 }), (text) => {
      assert.deepEqual(embeddedObjects(text).spans, embeddedObjectsByRescanning(text));
    }),
    { numRuns: 2000 },
  );
});

test('commit parser: an answer longer than the scan bound is not searched; a whole-JSON commit still counts', () => {
  const prose = 'x'.repeat(MAX_COMMIT_SCAN_CHARS);
  const tooLong = parseCommit(`${prose} ${JSON.stringify(commit)}`);
  assert.equal(tooLong.kind, 'error');
  assert.match(
    tooLong.kind === 'error' ? tooLong.error : '',
    new RegExp(
      `^the answer is ${MAX_COMMIT_SCAN_CHARS + 1 + JSON.stringify(commit).length} characters long: a commit is looked for inside answers of at most ${MAX_COMMIT_SCAN_CHARS}`,
    ),
  );
  const whole = parseCommit(
    JSON.stringify({ ...commit, creates: [{ id: 'big', description: 'Big.', content: prose }] }),
  );
  assert.equal(whole.kind === 'commit' ? whole.commit.creates[0]?.id : whole.kind, 'big');
  assert.deepEqual(parseCommit(prose), { kind: 'none' }, 'prose that cannot hold a commit is no error');
});

test('fork aggregate: success, partial, failed and timeout follow the documented rules', () => {
  assert.equal(forkAggregate(['success', 'success']), 'success');
  assert.equal(forkAggregate(['success', 'failed']), 'partial');
  assert.equal(forkAggregate(['success', 'timeout'], 'deadline'), 'partial');
  assert.equal(forkAggregate(['timeout', 'failed'], 'deadline'), 'timeout');
  assert.equal(forkAggregate(['failed', 'failed']), 'failed');
  assert.equal(forkAggregate(['success', 'failed', 'cancelled'], 'fail_fast'), 'failed');
  assert.equal(forkAggregate([]), 'failed');
});

test('fork keys: findings land under <prefix>/<task index>/<key>', () => {
  assert.equal(defaultForkPrefix(3), 'fork/3');
  assert.equal(mergedKey('fork/3', 2, 'arc/hypothesis'), 'fork/3/2/arc/hypothesis');
});

test('delegation preamble: a fork task is told its place, its siblings and how its store works, even at minimal detail', () => {
  const base = {
    caller: { name: 'lead', description: 'Leads.' },
    chain: ['lead'],
    callee: 'scout',
    rootMessage: 'Solve it.',
    hasEnvData: false,
  };
  const fork = { forkNumber: 1, taskIndex: 2, taskCount: 3, agents: ['scout', 'scout', 'judge'], prefix: 'fork/1' };
  const isolated = buildDelegationPreamble({ ...base, detail: 'minimal', fork: { ...fork, store: 'isolated' } }) ?? '';
  assert.match(
    isolated,
    /Fork: you are task 2 of 3 of fork 1, running in parallel with scout \(task 1\), judge \(task 3\)\./,
  );
  assert.match(isolated, /merged under fork\/1\/2\//);
  const shared = buildDelegationPreamble({ ...base, detail: 'standard', fork: { ...fork, store: 'shared' } }) ?? '';
  assert.match(shared, /Your store is shared/);
  assert.match(shared, /exclude_self: true/);
  assert.equal(buildDelegationPreamble({ ...base, detail: false, fork: { ...fork, store: 'shared' } }), undefined);
});
