import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { watchPatternSchema } from '../../common/agent-definition';
import { keyMatches, MAX_WATCH_PATTERN_WILDCARDS, watchPatternProblem } from '../../common/watchers';
import { parseAgentFile } from '../../worker/agents';

/**
 * The meaning of a key pattern written as plainly as it can be: tables of which prefixes match which, one over the
 * characters of a segment and one over the segments of a key. Slow (it fills whole tables) but obviously right, so
 * the fast matcher is checked against it.
 */
function referenceSegment(glob: string, segment: string): boolean {
  // matches[i][j]: the first i characters of the glob match the first j of the segment.
  const matches = Array.from({ length: glob.length + 1 }, () => new Array<boolean>(segment.length + 1).fill(false));
  (matches[0] as boolean[])[0] = true;
  for (let i = 1; i <= glob.length; i += 1) {
    const row = matches[i] as boolean[];
    const above = matches[i - 1] as boolean[];
    for (let j = 0; j <= segment.length; j += 1) {
      row[j] =
        glob[i - 1] === '*'
          ? (above[j] as boolean) || (j > 0 && (row[j - 1] as boolean))
          : j > 0 && glob[i - 1] === segment[j - 1] && (above[j - 1] as boolean);
    }
  }
  return (matches[glob.length] as boolean[])[segment.length] as boolean;
}

function referenceMatches(pattern: string, key: string): boolean {
  const globs = pattern.split('/');
  const segments = key.split('/');
  const matches = Array.from({ length: globs.length + 1 }, () => new Array<boolean>(segments.length + 1).fill(false));
  (matches[0] as boolean[])[0] = true;
  for (let i = 1; i <= globs.length; i += 1) {
    const row = matches[i] as boolean[];
    const above = matches[i - 1] as boolean[];
    const glob = globs[i - 1] as string;
    for (let j = 0; j <= segments.length; j += 1) {
      row[j] =
        glob === '**'
          ? (above[j] as boolean) || (j > 0 && (row[j - 1] as boolean))
          : j > 0 && referenceSegment(glob, segments[j - 1] as string) && (above[j - 1] as boolean);
    }
  }
  return (matches[globs.length] as boolean[])[segments.length] as boolean;
}

/** The least of three timings of `run` (ms): a pause of the machine in one of them does not count. */
function leastMs(run: () => void): number {
  let least = Infinity;
  for (let round = 0; round < 3; round += 1) {
    const started = process.hrtime.bigint();
    run();
    least = Math.min(least, Number(process.hrtime.bigint() - started) / 1e6);
  }
  return least;
}

test('key patterns: 30 stars against a long key, and eight ** against 24 segments, match without backtracking', () => {
  const stars = '*a'.repeat(30);
  const long = 'a'.repeat(39) + 'b';
  assert.equal(keyMatches([stars], long), false);
  assert.equal(keyMatches([stars], 'a'.repeat(40)), true);
  // A thousand matches in well under a second: under a millisecond each (a backtracking matcher took 53 s for one).
  assert.ok(
    leastMs(() => {
      for (let i = 0; i < 1000; i += 1) keyMatches([stars], long);
    }) < 1000,
  );

  const deep = Array.from({ length: 8 }, () => '**').join('/') + '/z';
  const segments = Array.from({ length: 24 }, (_, i) => `s${i}`).join('/');
  assert.equal(keyMatches([deep], segments), false);
  assert.equal(keyMatches([deep], `${segments}/z`), true);
  assert.ok(
    leastMs(() => {
      for (let i = 0; i < 1000; i += 1) keyMatches([deep], segments);
    }) < 1000,
  );
});

test('key patterns: the matcher agrees with the plain definition on every pattern and key (property)', () => {
  const glob = fc.stringMatching(/^[ab*]{1,5}$/);
  const segment = fc.oneof({ weight: 1, arbitrary: fc.constant('**') }, { weight: 4, arbitrary: glob });
  const pattern = fc.array(segment, { minLength: 1, maxLength: 5 }).map((parts) => parts.join('/'));
  const key = fc
    .array(fc.stringMatching(/^[ab]{1,5}$/), { minLength: 1, maxLength: 6 })
    .map((parts) => parts.join('/'));
  fc.assert(
    fc.property(pattern, key, (p, k) => keyMatches([p], k) === referenceMatches(p, k)),
    { numRuns: 3000 },
  );
});

test('key patterns: any pattern of up to 200 characters against any key of up to 200 matches in bounded time (property)', () => {
  // Patterns built to make a backtracking matcher explode: many stars, many `**`, pieces that almost match.
  const piece = fc.constantFrom('*', '*a', 'a*', 'a', 'aa*', '**');
  const pattern = fc
    .array(fc.array(piece, { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 16 })
    .map((segments) =>
      segments
        .map((parts) => (parts.includes('**') ? '**' : parts.join('').replace(/\*+/g, '*')))
        .join('/')
        .slice(0, 200)
        .replace(/\/+$/, ''),
    )
    .filter((p) => p.length > 0 && !p.endsWith('/'));
  const key = fc
    .array(fc.stringMatching(/^a{1,30}b?$/), { minLength: 1, maxLength: 24 })
    .map((segments) => segments.join('/').slice(0, 200).replace(/\/+$/, ''));
  fc.assert(
    fc.property(pattern, key, (p, k) => {
      // 20 matches in 20 ms: about a millisecond each at worst, on a loaded machine.
      return (
        leastMs(() => {
          for (let i = 0; i < 20; i += 1) keyMatches([p], k);
        }) < 20
      );
    }),
    { numRuns: 300 },
  );
});

test('key patterns: more wildcards than allowed, or a pattern longer than a key, are refused', () => {
  const many = Array.from({ length: MAX_WATCH_PATTERN_WILDCARDS + 1 }, () => '*a').join('');
  assert.match(watchPatternProblem(many) ?? '', new RegExp(`holds ${MAX_WATCH_PATTERN_WILDCARDS + 1} wildcards`));
  const deep = Array.from({ length: MAX_WATCH_PATTERN_WILDCARDS + 1 }, () => '**').join('/');
  assert.match(watchPatternProblem(deep) ?? '', /wildcards; at most/);
  assert.equal(
    watchPatternProblem(Array.from({ length: MAX_WATCH_PATTERN_WILDCARDS }, () => '*a').join('')),
    undefined,
  );
  assert.match(watchPatternProblem('a'.repeat(201)) ?? '', /longer than 200 characters/);
});

test('key patterns: a refused pattern says why, in the watch tool and in frontmatter alike', () => {
  const tooWild = '*a'.repeat(MAX_WATCH_PATTERN_WILDCARDS + 1);
  const parsed = watchPatternSchema.safeParse(tooWild);
  assert.equal(parsed.success, false);
  assert.match(parsed.error?.issues[0]?.message ?? '', /holds 17 wildcards; at most 16 are allowed/);
  assert.throws(
    () => parseAgentFile(`---\nname: w\ndescription: W.\nwatches:\n  - keys: ["${tooWild}"]\n---\nBody\n`, 'w'),
    /holds 17 wildcards/,
  );
});
