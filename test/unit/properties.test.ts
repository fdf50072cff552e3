/**
 * Properties (fast-check) of the rules every key, value and `.env` text passes through (issue 13): the tool schema and
 * the store agree on keys, values round-trip or are refused whole, `.env` edits keep everything else, and text is
 * always made storable.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { createEnvDataTools } from '../../activities/tools/env-data';
import { envKeyProblem, MAX_ENV_KEY_LENGTH } from '../../common/env-data';
import {
  ENV_NAME_PATTERN,
  envAssignmentProblem,
  parseEnvText,
  setEnvVariables,
  unsetEnvVariable,
} from '../../common/env-text';
import { hasUnstorableText, storableText } from '../../common/text';
import { EnvDataError, toJson } from '../../db/env-data';

const RUNS = { numRuns: 500 };
const storeTool = createEnvDataTools().find((tool) => tool.name === 'store_env_data');

/** Strings from every corner: any code unit (lone surrogates and NUL included), and key-like text. */
const anyText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: fc.constantFrom('a', 'Z', '0', '_', '-', '.', '/', ' ', '\u0000', '\ud800', 'é'), maxLength: 30 }),
);
const keySegment = fc.string({ unit: fc.constantFrom('a', 'b', '0', '_', '-', '.'), minLength: 1, maxLength: 12 });
const wellFormedKey = fc.array(keySegment, { minLength: 1, maxLength: 4 }).map((segments) => segments.join('/'));

test('property: the store_env_data schema and the store accept exactly the same keys', () => {
  assert.ok(storeTool);
  fc.assert(
    fc.property(fc.oneof(anyText, wellFormedKey, fc.constant('k'.repeat(MAX_ENV_KEY_LENGTH + 1))), (key) => {
      const bySchema = storeTool.parameters.safeParse({ key, short_description: 'd', value: 1 }).success;
      assert.equal(bySchema, envKeyProblem(key) === undefined, `key ${JSON.stringify(key)}`);
    }),
    RUNS,
  );
  fc.assert(
    fc.property(wellFormedKey, (key) => {
      // Namespaced keys ('a/b/c') of allowed characters are always valid.
      assert.equal(envKeyProblem(key), undefined, key);
    }),
    RUNS,
  );
});

/** Whether any string in a JSON value (property names included) holds text Postgres cannot store. */
function holdsUnstorable(value: unknown): boolean {
  if (typeof value === 'string') return hasUnstorableText(value);
  if (Array.isArray(value)) return value.some(holdsUnstorable);
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).some(([key, item]) => hasUnstorableText(key) || holdsUnstorable(item));
  }
  return false;
}

test('property: a JSON value is stored whole and reads back the same, or is refused whole', () => {
  const jsonWithOddText = fc.jsonValue({ maxDepth: 3 }).chain((value) =>
    fc.oneof(
      fc.constant(value),
      fc.string({ unit: 'binary', maxLength: 8 }).map((text) => ({ value, text })),
    ),
  );
  fc.assert(
    fc.property(jsonWithOddText, (value) => {
      if (holdsUnstorable(value)) {
        assert.throws(() => toJson(value), EnvDataError);
        return;
      }
      const json = toJson(value);
      // Stable: what Postgres stores serialises back to the same text (no key or element silently lost).
      assert.equal(JSON.stringify(JSON.parse(json)), json);
      assert.equal(json, JSON.stringify(value));
    }),
    RUNS,
  );
});

const variableName = fc
  .tuple(
    fc.constantFrom('A', 'b', '_', 'Z'),
    fc.string({ unit: fc.constantFrom('a', 'B', '0', '_', '.', '-'), maxLength: 8 }),
  )
  .map(([first, rest]) => first + rest)
  .filter((name) => ENV_NAME_PATTERN.test(name));
/** Values a world variable may hold: anything but line breaks and text Postgres cannot store. */
const variableValue = fc
  .string({ unit: 'grapheme', maxLength: 20 })
  .filter((value) => envAssignmentProblem('X', value) === undefined);
const envText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc
    .array(
      fc.oneof(
        fc.tuple(variableName, variableValue).map(([name, value]) => `${name}=${value}`),
        fc.constantFrom('# comment', '', '   ', 'not an assignment', 'export X=1', '=empty'),
      ),
      { maxLength: 8 },
    )
    .chain((lines) => fc.constantFrom('\n', '\r\n', '\r').map((end) => lines.join(end))),
);

test('property: parsing .env text never throws, and setting variables keeps every other one', () => {
  fc.assert(
    fc.property(envText, fc.dictionary(variableName, variableValue, { maxKeys: 4 }), (text, assignments) => {
      const before = { ...parseEnvText(text) };
      const after = { ...parseEnvText(setEnvVariables(text, assignments)) };
      assert.deepEqual(after, { ...before, ...assignments });
    }),
    RUNS,
  );
});

test('property: unsetting a variable removes it and only it', () => {
  fc.assert(
    fc.property(envText, variableName, (text, name) => {
      const before = { ...parseEnvText(text) };
      const after = { ...parseEnvText(unsetEnvVariable(text, name)) };
      const { [name]: _removed, ...rest } = before;
      assert.deepEqual(after, rest);
    }),
    RUNS,
  );
});

test('property: storableText always yields text Postgres can store, and leaves storable text alone', () => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary', maxLength: 60 }), (text) => {
      const clean = storableText(text);
      assert.equal(hasUnstorableText(clean), false);
      assert.equal(clean.length, text.length);
      assert.equal(storableText(clean), clean);
      if (!hasUnstorableText(text)) assert.equal(clean, text);
    }),
    RUNS,
  );
});
