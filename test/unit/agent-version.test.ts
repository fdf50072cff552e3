import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agentVersion } from '../../activities/agent-store';
import { parseAgentFile } from '../../worker/agents';

const file = (frontmatter: string, body = 'You check tasks.') =>
  `---\nname: checker\ndescription: Checks tasks.\n${frontmatter}---\n\n${body}\n`;

test('agent version: a change inside a nested setting is a new version', () => {
  const forty = parseAgentFile(file('context:\n  max_messages: 40\n'), 'a.md');
  const fifty = parseAgentFile(file('context:\n  max_messages: 50\n'), 'a.md');
  assert.equal(forty.context?.max_messages, 40);
  assert.equal(fifty.context?.max_messages, 50);
  assert.notEqual(agentVersion(forty), agentVersion(fifty));
});

test('agent version: the same content is one version, whatever its key order or file', () => {
  const one = parseAgentFile(file('max_steps: 7\ncontext:\n  max_messages: 40\n'), 'a.md');
  const other = parseAgentFile(file('context:\n  max_messages: 40\nmax_steps: 7\n'), 'elsewhere/b.md');
  assert.equal(agentVersion(one), agentVersion(other));
  assert.notEqual(
    agentVersion(one),
    agentVersion(parseAgentFile(file('max_steps: 7\ncontext:\n  max_messages: 40\n', 'You check more.'), 'a.md')),
  );
});
