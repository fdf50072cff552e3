import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildSystemContext, buildSystemPrompt } from '../../common/system-context';

const base = { name: 'observer', declared: ['read_file', 'list_files'], universal: ['think', 'ask_human'] };

test('system context: names the agent, says what a prompt object is and lists its capabilities', () => {
  const block = buildSystemContext({ ...base, hasEnvData: false });
  assert.match(block, /^## System Context\n/);
  assert.match(block, /You are a prompt object named "observer", running in Baton\./);
  assert.match(block, /A prompt object is an agent defined by a markdown file/);
  assert.match(block, /called by a human, or by another prompt object/);
  assert.match(block, /\nDeclared capabilities: read_file, list_files\n/);
  assert.match(block, /\nUniversal capabilities \(always available\): think, ask_human\n/);
  assert.doesNotMatch(block, /list_env_data/);
});

test('system context: the env-data hint appears only when the conversation has entries', () => {
  assert.match(buildSystemContext({ ...base, hasEnvData: true }), /call list_env_data\(\) to see what has been stored/);
});

test('system context: an agent without declared capabilities says so', () => {
  assert.match(buildSystemContext({ ...base, declared: [], hasEnvData: false }), /Declared capabilities: \(none\)/);
});

test('system prompt: the body comes first, then the block; it stays short', () => {
  const prompt = buildSystemPrompt('You observe grids.\n', { ...base, hasEnvData: true });
  assert.ok(prompt.startsWith('You observe grids.\n\n## System Context\n'));
  assert.ok(prompt.length < 1200, `the block is sent on every call (${prompt.length} characters)`);
});
