/**
 * `baton setup`'s Temporal half against a fake connection: what it creates, what it leaves alone, and the error
 * `baton worker` gives on an unprepared namespace. The real servers are exercised by the production-topology test.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  assertSearchAttributes,
  describeSetup,
  ensureNamespace,
  ensureSearchAttributes,
  SearchAttributeConflictError,
  SetupRequiredError,
  type SetupConnection,
} from '../../stack/temporal-setup';
import { batonSearchAttributeKeys } from '../../common/search-attributes';

/** Indexed value type 2 is KEYWORD in Temporal's enum. */
const KEYWORD = 2;

function grpcError(code: number, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/** A server holding namespaces and their custom search attributes, recording the calls that change them. */
function fakeServer(namespaces: Record<string, Record<string, number>>) {
  const changes: string[] = [];
  const connection = {
    workflowService: {
      describeNamespace: ({ namespace }: { namespace: string }) =>
        namespace in namespaces
          ? Promise.resolve({})
          : Promise.reject(grpcError(5, `Namespace ${namespace} is not found.`)),
      registerNamespace: ({
        namespace,
        workflowExecutionRetentionPeriod,
      }: {
        namespace: string;
        workflowExecutionRetentionPeriod: { seconds: unknown };
      }) => {
        if (namespace in namespaces) return Promise.reject(grpcError(6, 'Namespace already exists.'));
        namespaces[namespace] = {};
        changes.push(`register ${namespace} ${String(workflowExecutionRetentionPeriod.seconds)}s`);
        return Promise.resolve({});
      },
    },
    operatorService: {
      listSearchAttributes: ({ namespace }: { namespace: string }) =>
        Promise.resolve({ customAttributes: { ...namespaces[namespace] } }),
      addSearchAttributes: ({
        namespace,
        searchAttributes,
      }: {
        namespace: string;
        searchAttributes: Record<string, number>;
      }) => {
        Object.assign(namespaces[namespace] ?? {}, searchAttributes);
        changes.push(`add ${Object.keys(searchAttributes).join(',')}`);
        return Promise.resolve({});
      },
    },
  } as unknown as SetupConnection;
  return { connection, changes, namespaces };
}

const NAMES = batonSearchAttributeKeys.map((key) => key.name);

test('temporal setup: a missing namespace is created with the retention asked for; an existing one is left', async () => {
  const server = fakeServer({ default: {} });
  assert.equal(await ensureNamespace(server.connection, 'agents', 3), true);
  assert.equal(await ensureNamespace(server.connection, 'agents', 3), false);
  assert.equal(await ensureNamespace(server.connection, 'default', 3), false);
  assert.deepEqual(server.changes, [`register agents ${3 * 86_400}s`]);
});

test('temporal setup: search attributes are added once, then found present', async () => {
  const server = fakeServer({ default: { BatonAgent: KEYWORD } });
  const first = await ensureSearchAttributes(server.connection, 'default', batonSearchAttributeKeys);
  assert.deepEqual(first, { added: NAMES.filter((name) => name !== 'BatonAgent'), present: ['BatonAgent'] });
  const second = await ensureSearchAttributes(server.connection, 'default', batonSearchAttributeKeys);
  assert.deepEqual(second, { added: [], present: NAMES });
  assert.equal(server.changes.length, 1);
});

test('temporal setup: an attribute of another type is a conflict, and nothing is added', async () => {
  const server = fakeServer({ default: { BatonThreadId: 1 } });
  await assert.rejects(
    ensureSearchAttributes(server.connection, 'default', batonSearchAttributeKeys),
    (error: unknown) => error instanceof SearchAttributeConflictError && error.attribute === 'BatonThreadId',
  );
  assert.deepEqual(server.changes, []);
});

test('temporal setup: the worker check names what is missing and says to run baton setup', async () => {
  const server = fakeServer({ default: { BatonAgent: KEYWORD } });
  await assert.rejects(
    assertSearchAttributes(server.connection, 'default'),
    (error: unknown) =>
      error instanceof SetupRequiredError &&
      error.missing.length === 3 &&
      /lacks Baton's search attributes BatonRootThreadId, BatonThreadId, BatonParentThreadId: run `baton setup`/.test(
        error.message,
      ),
  );
  await assert.rejects(assertSearchAttributes(server.connection, 'nope'), /'nope' does not exist: run `baton setup`/);
  await ensureSearchAttributes(server.connection, 'default', batonSearchAttributeKeys);
  await assertSearchAttributes(server.connection, 'default');
});

test('temporal setup: the summary says what changed, or that nothing did', () => {
  assert.equal(
    describeSetup({
      namespace: { name: 'default', created: true, retentionDays: 7 },
      searchAttributes: { added: NAMES, present: [] },
      migrations: { applied: ['001_a.sql'] },
      changed: true,
    }),
    [
      'namespace default: created (retention 7 days)',
      `search attributes: registered ${NAMES.join(', ')}`,
      'migrations: applied 001_a.sql',
      'Baton is set up.',
    ].join('\n'),
  );
  assert.match(
    describeSetup({
      namespace: { name: 'default', created: false },
      searchAttributes: { added: [], present: NAMES },
      migrations: { applied: [] },
      changed: false,
    }),
    /exists, unchanged\n.*already registered.*\nmigrations: up to date\nNothing to change/,
  );
});
