/**
 * docs/reference/run-events.md: the run events, read by the TypeScript compiler from the `RunEvent` union of
 * common/run-events.ts (each member's fields, their types and their doc comments), with a sentence for each kind from
 * {@link KIND_SUMMARIES} below. A kind added to the union without a summary fails the type check here.
 */
import path from 'node:path';
import ts from 'typescript';
import type { RunEvent } from '../../common/run-events';
import { GENERATED_NOTICE } from './notice';

const ROOT = path.resolve(__dirname, '..', '..');
const SOURCE = path.join(ROOT, 'common', 'run-events.ts');

/** What each kind of event says happened. */
const KIND_SUMMARIES: Readonly<Record<RunEvent['type'], string>> = {
  turn_started: 'A turn of a thread began: a root turn, a delegated call, a fork task or a wake-up.',
  turn_ended: 'A turn ended, with its status (`completed`, `failed`, `max_steps`, …).',
  message: 'A human or calling agent sent the thread a message.',
  model_call_started: 'A model call began (one attempt of one step); `stream` names the deltas of this attempt.',
  model_call_waiting:
    'A model call waits for room under a limit every worker shares (`BATON_MODEL_LIMITS`), once per scope and reason.',
  model_call_ended: 'A model call ended, with its token usage.',
  assistant_message: "The model's reply was stored (its text; its tool calls follow as `tool_call` events).",
  tool_call: 'The model asked for a tool call.',
  tool_result: "A tool call's result was stored (its content cut to 1,000 characters).",
  wait_started: 'A `wait` tool call began waiting.',
  wait_ended: 'A `wait` ended (its time came, or it was woken).',
  delegation_started: 'The turn called another agent: a delegated turn in a child thread.',
  delegation_ended: 'A delegated turn ended.',
  fork_started: 'A fork began: parallel tasks writing to a store.',
  fork_ended: 'A fork ended.',
  fork_task_started: "A fork's task began.",
  fork_task_ended: "A fork's task ended (`reclaimed`: its turn was taken over after its worker was lost).",
  question_asked: 'An agent asked a person a question (`ask_human`).',
  question_closed: 'A question was answered, expired or cancelled.',
  approval_requested: "A tool call waits for a person's approval.",
  approval_decided: 'An approval was approved, rejected, expired or cancelled.',
  env_written: 'A key of the shared environment data was written or deleted.',
  env_refused: 'A write to the shared data was refused.',
  write_refused: 'A write of a turn that had lost its claim (a later run of the turn took over) was refused.',
  watcher_changed: 'A watcher was added, paused, resumed, removed or stopped.',
  watch_woke: 'A watcher woke: a committed change to a key it watches started a turn of its agent.',
  watch_finished: "A watcher's wake-up turn ended.",
  watch_skipped: 'A change did not wake a watcher: the chain of wake-ups was already `maxDepth` deep.',
  delta: 'Streamed output of one model call attempt: a piece of its text or tool calls. Not stored: no `seq`.',
  stream_abandoned:
    "A stream's partial output will not be completed (its attempt was retried, or its turn ended without storing " +
    'the reply): drop what was shown of it. Not stored: no `seq`.',
};

interface Field {
  name: string;
  type: string;
  optional: boolean;
  doc: string;
}

export function runEventsPage(): string {
  const program = ts.createProgram([SOURCE], { strict: true, noEmit: true, skipLibCheck: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(SOURCE);
  if (!source) throw new Error(`cannot read ${SOURCE}`);
  const declaration = (name: string) => {
    const found = source.statements.find(
      (statement) =>
        (ts.isTypeAliasDeclaration(statement) || ts.isInterfaceDeclaration(statement)) && statement.name.text === name,
    );
    if (!found) throw new Error(`common/run-events.ts declares no ${name}`);
    return found as ts.TypeAliasDeclaration | ts.InterfaceDeclaration;
  };
  const fieldsOf = (type: ts.Type, at: ts.Node): Field[] =>
    checker.getPropertiesOfType(type).map((symbol) => ({
      name: symbol.name,
      type: checker.typeToString(checker.getTypeOfSymbolAtLocation(symbol, at), at, ts.TypeFormatFlags.NoTruncation),
      optional: (symbol.flags & ts.SymbolFlags.Optional) !== 0,
      doc: ts.displayPartsToString(symbol.getDocumentationComment(checker)).replace(/\s+/g, ' ').trim(),
    }));

  const baseNode = declaration('RunEventBase');
  const base = fieldsOf(checker.getTypeAtLocation(baseNode.name), baseNode);
  const baseNames = new Set(base.map((field) => field.name));
  const unionNode = declaration('RunEvent');
  const union = checker.getTypeAtLocation(unionNode.name);
  if (!union.isUnion()) throw new Error('RunEvent is no longer a union');

  const shapes = new Map<string, Field[]>();
  const sections: string[] = [];
  for (const member of union.types) {
    const fields = fieldsOf(member, unionNode);
    const kind = fields.find((field) => field.name === 'type')?.type.replace(/^"|"$/g, '');
    if (!kind || !(kind in KIND_SUMMARIES)) throw new Error(`a RunEvent member has no known \`type\`: ${kind}`);
    const stored = base.every((field) => fields.some((own) => own.name === field.name));
    const own = fields.filter((field) => field.name !== 'type' && !(stored && baseNames.has(field.name)));
    for (const field of own) collectShapes(field.type, shapes, source, checker);
    sections.push(
      `### \`${kind}\``,
      '',
      KIND_SUMMARIES[kind as RunEvent['type']],
      '',
      ...(stored ? ['Stored: the fields of every stored event, and'] : ['Not stored. Its fields:']),
      '',
      ...(own.length === 0 ? ['- no others.'] : own.map(fieldLine)),
      '',
    );
  }

  const lines = [
    GENERATED_NOTICE,
    '',
    '# Run events',
    '',
    "A root thread's run feed: every durable step of its tree as a typed event, in order, and the streamed text of",
    'model replies as they are generated. `thread.events()` yields them (the SDK type `RunEvent`, a union',
    'discriminated by `type`), `baton run --json --stream`, `baton send --json --stream` and `baton watch --json`',
    "print one per line as JSON, and the explorer's `/api/threads/<root>/events` streams them as Server-Sent Events",
    '([Explorer API](explorer-api.md)). [Watching a run](../guides/observing-runs.md) shows them in use.',
    '',
    '## Fields of every stored event',
    '',
    ...base.map(fieldLine),
    '',
    '## Kinds',
    '',
    ...sections,
  ];
  if (shapes.size > 0) {
    lines.push('## Shapes the fields use', '');
    for (const [name, fields] of shapes) lines.push(`### \`${name}\``, '', ...fields.map(fieldLine), '');
  }
  return `${lines.join('\n').trimEnd()}\n`;
}

/** The `- \`name\` (optional, type): doc` line of a field. */
function fieldLine(field: Field): string {
  // An optional field's type is shown without the `undefined` its `?` adds.
  const type = `\`${field.optional ? field.type.replace(/ \| undefined$/, '') : field.type}\``;
  return `- \`${field.name}\` (${field.optional ? `optional ${type}` : type})${field.doc ? `: ${field.doc}` : ''}`;
}

/** Adds the interfaces a field's type names (`WatchChange[]`, `TokenUsageEvent`) to `shapes`, with their fields. */
function collectShapes(typeText: string, shapes: Map<string, Field[]>, source: ts.SourceFile, checker: ts.TypeChecker) {
  for (const [name] of typeText.matchAll(/\b[A-Z][A-Za-z]+\b/g)) {
    if (shapes.has(name)) continue;
    const symbol = checker
      .getSymbolsInScope(source, ts.SymbolFlags.Interface | ts.SymbolFlags.Alias)
      .find((candidate) => candidate.name === name);
    if (!symbol) continue;
    const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
    const node = target.declarations?.[0];
    if (!node || !ts.isInterfaceDeclaration(node)) continue;
    const type = checker.getDeclaredTypeOfSymbol(target);
    shapes.set(
      name,
      checker.getPropertiesOfType(type).map((property) => ({
        name: property.name,
        type: checker.typeToString(
          checker.getTypeOfSymbolAtLocation(property, node),
          node,
          ts.TypeFormatFlags.NoTruncation,
        ),
        optional: (property.flags & ts.SymbolFlags.Optional) !== 0,
        doc: ts.displayPartsToString(property.getDocumentationComment(checker)).replace(/\s+/g, ' ').trim(),
      })),
    );
  }
}
