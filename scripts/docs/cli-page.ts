/**
 * docs/reference/cli.md: every command, argument and option of the `baton` program, read from the commander program
 * itself (cli/program.ts `describeProgram`), so a command added there is here at the next `npm run docs`.
 */
import type { Argument, Command, Help } from 'commander';
import { describeProgram } from '../../cli/program';
import { GENERATED_NOTICE } from './notice';

export function cliPage(): string {
  const program = describeProgram();
  const help = program.createHelp();
  const lines = [
    GENERATED_NOTICE,
    '',
    '# `baton` command line',
    '',
    `${sentence(program.description())} Run it as \`npx baton\` in a project that has Baton installed.`,
    'The guide [Using the CLI](../guides/cli.md) walks through the commands; this page lists every one of them with',
    'its arguments and options, read from the program itself.',
    '',
    'Every command also takes `-h, --help`, and `baton help <command>` prints the same. Options of the program',
    'come before the command:',
    '',
    ...optionLines(program, help),
    '',
    '## Commands',
    '',
  ];
  const commands = allCommands(program, help);
  for (const command of commands) {
    lines.push(`- [\`${commandPath(command)}\`](#${anchor(commandPath(command))}): ${sentence(command.description())}`);
  }
  for (const command of commands) lines.push('', ...commandSection(command, help));
  return `${lines.join('\n')}\n`;
}

/** Every command below the program, depth first in the program's order, without commander's `help` command. */
function allCommands(command: Command, help: Help): Command[] {
  return help
    .visibleCommands(command)
    .filter((sub) => sub.name() !== 'help')
    .flatMap((sub) => [sub, ...allCommands(sub, help)]);
}

function commandSection(command: Command, help: Help): string[] {
  const lines = [
    `## ${commandPath(command)}`,
    '',
    '```sh',
    `${usage(command)}`,
    '```',
    '',
    sentence(command.description()),
  ];
  const args = help.visibleArguments(command);
  if (args.length > 0) {
    lines.push('', 'Arguments:', '');
    for (const argument of args) {
      lines.push(`- \`${argumentTerm(argument)}\`: ${prose(help.argumentDescription(argument))}`);
    }
  }
  const subcommands = help.visibleCommands(command).filter((sub) => sub.name() !== 'help');
  if (subcommands.length > 0) {
    lines.push('', 'Subcommands:', '');
    for (const sub of subcommands) lines.push(`- [\`${sub.name()}\`](#${anchor(commandPath(sub))})`);
  }
  const options = optionLines(command, help);
  if (options.length > 0) lines.push('', 'Options:', '', ...options);
  return lines;
}

/** The command's options as list items, without `-h, --help` (every command has it). */
function optionLines(command: Command, help: Help): string[] {
  return help
    .visibleOptions(command)
    .filter((option) => option.long !== '--help')
    .map(
      (option) =>
        `- \`${option.flags}\`${option.mandatory ? ' (required)' : ''}: ${prose(help.optionDescription(option))}`,
    );
}

/** `<agent>`, `[key]`, `<sources...>`: an argument as the usage line writes it. */
function argumentTerm(argument: Argument): string {
  const name = `${argument.name()}${argument.variadic ? '...' : ''}`;
  return argument.required ? `<${name}>` : `[${name}]`;
}

/** `baton schedule create`: the command's names from the program down. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let at: Command | null = command; at; at = at.parent) names.unshift(at.name());
  return names.join(' ');
}

/** `baton schedule create [options] <name>`: what commander's help prints after `Usage:`. */
function usage(command: Command): string {
  const parents = commandPath(command).split(' ').slice(0, -1);
  return [...parents, command.name(), command.usage()].join(' ');
}

/** The anchor GitHub and the link checker give the heading `## <text>`. */
function anchor(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, '')
    .replace(/ /g, '-');
}

/** A description as a sentence of markdown: a capital first, a full stop last, `<placeholders>` as code. */
function sentence(text: string): string {
  const trimmed = prose(text.trim());
  const capital = trimmed.charAt(0).toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
}

/** Commander's text as markdown: `<agent>`, `[key]` and `--flag` outside code spans become code, not HTML. */
function prose(text: string): string {
  return text
    .split(/(`[^`]*`)/)
    .map((part, index) => (index % 2 === 1 ? part : part.replace(/(<[a-z][a-z-]*>|--[a-z][a-z-]*|\{[^}]*\})/g, '`$1`')))
    .join('');
}
