/**
 * The registry of world variables (common/world-variables.ts) against the code that reads them: each variable it
 * names is the one that code reads, each default it shows is the code's, and no other `BATON_` name turns up in the
 * code that reads worlds without being registered (here, or as an environment variable in worker/environment.ts).
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { SHELL_NETWORK_VARIABLE } from '../../activities/tools/shell-sandbox';
import { SHELL_RUN_MARKER, toolVariables } from '../../activities/tools/shell';
import { watchLimitsFrom } from '../../activities/watchers';
import { contextLimitsFor, limitsFromVariables, stepModeFor } from '../../activities/worlds';
import { mcpServersOfWorld } from '../../common/capabilities';
import { WORKING_DIRECTORY_VARIABLE } from '../../common/env-text';
import {
  CONTEXT_LIMIT_VARIABLES,
  DELEGATION_LIMIT_VARIABLES,
  MCP_SERVERS_WORLD_VARIABLE,
  SHELL_NETWORK_WORLD_VARIABLE,
  STEPS_WORLD_VARIABLE,
  TOOL_WORLD_VARIABLES,
  WATCH_LIMIT_VARIABLES,
  WORKING_DIRECTORY_WORLD_VARIABLE,
  WORLD_VARIABLES,
} from '../../common/world-variables';
import { environmentVariables } from '../../worker/environment';

const ROOT = path.join(__dirname, '..', '..');

/** Runs `read` where the activity logger works: the readers warn through it about values they ignore. */
function inActivity<T>(read: () => T): Promise<T> {
  return new MockActivityEnvironment().run(async () => Promise.resolve(read()));
}

test('world variables: each limit the registry names is the one the code reads into that limit', async () => {
  for (const [field, variable] of Object.entries(DELEGATION_LIMIT_VARIABLES)) {
    const limits = await inActivity(() => limitsFromVariables({ [variable.name]: '7' }));
    assert.equal(limits[field as keyof typeof limits], 7, `${variable.name} sets ${field}`);
  }
  for (const [field, variable] of Object.entries(CONTEXT_LIMIT_VARIABLES)) {
    const limits = await inActivity(() => contextLimitsFor({}, { [variable.name]: '7' }));
    assert.equal(limits[field as keyof typeof limits], 7, `${variable.name} sets ${field}`);
  }
  for (const [field, variable] of Object.entries(WATCH_LIMIT_VARIABLES)) {
    const limits = watchLimitsFrom({ [variable.name]: '7' });
    assert.equal(limits[field as keyof typeof limits], 7, `${variable.name} sets ${field}`);
  }
});

test('world variables: the step mode, MCP servers, shell and file tools read the names the registry gives', async () => {
  assert.equal(await inActivity(() => stepModeFor({}, { [STEPS_WORLD_VARIABLE.name]: 'local' }, 'activity')), 'local');
  assert.deepEqual(mcpServersOfWorld({ [MCP_SERVERS_WORLD_VARIABLE.name]: 'memory, files' }), ['memory', 'files']);
  assert.equal(SHELL_NETWORK_VARIABLE, SHELL_NETWORK_WORLD_VARIABLE.name);
  assert.equal(WORKING_DIRECTORY_VARIABLE, WORKING_DIRECTORY_WORLD_VARIABLE.name);
  const toolName = TOOL_WORLD_VARIABLES.name.replace(/NAME$/, 'TOKEN');
  assert.deepEqual(toolVariables({ [toolName]: 'for-tools', TOKEN: 'not for tools' }), { TOKEN: 'for-tools' });
});

test('world variables: the defaults the registry shows are what the code uses when a world sets nothing', async () => {
  const limits = await inActivity(() => limitsFromVariables({}));
  for (const [field, variable] of Object.entries(DELEGATION_LIMIT_VARIABLES)) {
    const value = limits[field as keyof typeof limits];
    if (value === undefined) assert.equal(variable.default, 'no budget', variable.name);
    else assert.equal(variable.default.split(' ')[0], String(value), variable.name);
  }
  const context = await inActivity(() => contextLimitsFor({}, {}));
  for (const [field, variable] of Object.entries(CONTEXT_LIMIT_VARIABLES)) {
    assert.equal(context[field as keyof typeof context], undefined);
    assert.equal(variable.default, 'no limit', variable.name);
  }
  const watch = watchLimitsFrom({});
  for (const [field, variable] of Object.entries(WATCH_LIMIT_VARIABLES)) {
    assert.equal(variable.default, String(watch[field as keyof typeof watch]), variable.name);
  }
  assert.equal(mcpServersOfWorld({}), undefined, 'a world without BATON_MCP_SERVERS narrows nothing');
});

test('world variables: every name is registered once, with a guide that exists', () => {
  const names = WORLD_VARIABLES.map((variable) => variable.name);
  assert.equal(new Set(names).size, names.length, 'no name twice');
  for (const variable of WORLD_VARIABLES) {
    assert.ok(fs.existsSync(path.join(ROOT, 'docs', variable.guide)), `${variable.name}: docs/${variable.guide}`);
  }
});

/** Every `BATON_…` name written in the files under `dirs`, comments included, with a file naming it. */
function batonNamesIn(dirs: readonly string[]): Map<string, string> {
  const found = new Map<string, string>();
  const visit = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) visit(file);
      else if (entry.name.endsWith('.ts')) {
        for (const match of fs.readFileSync(file, 'utf8').matchAll(/\bBATON_[A-Z0-9_]*[A-Z0-9]\b/g)) {
          if (!found.has(match[0])) found.set(match[0], path.relative(ROOT, file));
        }
      }
    }
  };
  for (const dir of dirs) visit(path.join(ROOT, dir));
  return found;
}

test('world variables: every BATON_ name in the code that reads worlds is a registered world or environment variable', () => {
  const registered = new Set([
    ...WORLD_VARIABLES.map((variable) => variable.name),
    ...environmentVariables().map((variable) => variable.name),
    SHELL_RUN_MARKER,
  ]);
  const named = batonNamesIn(['common', 'activities', 'workflows']);
  assert.ok(named.size > 20, `names were found (${named.size})`);
  for (const [name, file] of named) {
    assert.ok(registered.has(name), `${file} names ${name}, which neither registry holds`);
  }
});
