/**
 * docs/reference/world-variables.md: every world variable Baton reads, from the registry (common/world-variables.ts),
 * in the groups the code reads them in.
 */
import fs from 'node:fs';
import path from 'node:path';
import { GENERATED_NOTICE } from '../notice';
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
  type WorldVariable,
} from '../../../common/world-variables';

/** The page's sections: a title, a sentence, and the variables under it. */
const SECTIONS: readonly { title: string; intro: string; variables: readonly WorldVariable[] }[] = [
  {
    title: 'The shell and the file tools',
    intro: 'Where `shell`, `read_file` and `list_files` work, what a command sees, and its network.',
    variables: [WORKING_DIRECTORY_WORLD_VARIABLE, TOOL_WORLD_VARIABLES, SHELL_NETWORK_WORLD_VARIABLE],
  },
  {
    title: 'Tools and steps',
    intro: 'Which MCP servers the agents see, and where their turns run their steps.',
    variables: [MCP_SERVERS_WORLD_VARIABLE, STEPS_WORLD_VARIABLE],
  },
  {
    title: 'Limits of a conversation',
    intro: 'Delegation, forks and waits. They hold for a whole tree of agents: the root turn reads them as it begins.',
    variables: Object.values(DELEGATION_LIMIT_VARIABLES),
  },
  {
    title: 'Context of model requests',
    intro: "For agents whose frontmatter sets no `context` limit; the agent's own limit wins.",
    variables: Object.values(CONTEXT_LIMIT_VARIABLES),
  },
  {
    title: 'Watchers',
    intro: 'Limits every watcher of the world runs under.',
    variables: Object.values(WATCH_LIMIT_VARIABLES),
  },
];

export async function pages(): Promise<Record<string, string>> {
  return Promise.resolve({ 'world-variables.md': worldVariablesPage() });
}

export function worldVariablesPage(): string {
  const listed = SECTIONS.flatMap((section) => section.variables);
  const missing = WORLD_VARIABLES.filter((variable) => !listed.includes(variable));
  if (missing.length > 0 || listed.length !== WORLD_VARIABLES.length) {
    throw new Error(`world variables in no section, or in two: ${missing.map((v) => v.name).join(', ')}`);
  }
  const lines = [
    GENERATED_NOTICE,
    '',
    '# World variables',
    '',
    'Every world variable Baton itself reads, from the registry in `common/world-variables.ts`. A world holds any',
    'other variables you like, for `{{ name }}` placeholders in prompts; [Worlds](../guides/worlds.md) explains',
    'worlds, the syntax and the commands. Set one with `npx baton world set NAME=value` (`--world NAME` for a world',
    'other than `default`); a change holds from the next time the variable is read, as each entry says.',
    '',
  ];
  for (const section of SECTIONS) {
    lines.push(`## ${section.title}`, '', section.intro, '');
    for (const variable of section.variables) lines.push(...entry(variable), '');
  }
  return `${lines.join('\n').trimEnd()}\n`;
}

const DOCS = path.resolve(__dirname, '..', '..', '..', 'docs');

/** A guide's title: its first heading up to a colon (`# Worlds: variables, …` is "Worlds"). */
function guideTitle(guide: string): string {
  const heading = /^# (.+)$/m.exec(fs.readFileSync(path.join(DOCS, guide), 'utf8'))?.[1];
  if (heading === undefined) throw new Error(`docs/${guide} has no title`);
  return heading.split(':')[0]?.trim() ?? heading;
}

function entry(variable: WorldVariable): string[] {
  // A number is a value to type: shown as code, as the other defaults are.
  const shownDefault = variable.default.replace(/^([0-9]+)\b/, '`$1`');
  return [
    `### \`${variable.name}\``,
    '',
    variable.meaning,
    '',
    `- Values: ${variable.values}.`,
    `- Default: ${shownDefault}.`,
    `- Read by: ${variable.readBy}.`,
    `- Guide: [${guideTitle(variable.guide)}](../${variable.guide}).`,
  ];
}
