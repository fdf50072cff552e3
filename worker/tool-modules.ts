/**
 * Loading users' tool modules (`baton dev --tools FILE`, `BATON_TOOLS`): a JavaScript or TypeScript file whose
 * default export, or named `tools` export, is an array of tools made with `defineTool`. TypeScript is loaded through
 * tsx, the loader the `baton` CLI itself ships with, so a user project needs no build step for its tools.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { prepareUserTools, ToolDefinitionError, type UserTool } from '../activities/tools/user-tools';

const TYPESCRIPT = /\.(?:[cm]?ts|tsx)$/;

/**
 * Loads and checks every module, in order.
 * @throws ToolDefinitionError naming the file and the reason: not found, failed to load, no tools exported, a bad
 * tool definition
 */
export async function loadToolModules(files: readonly string[]): Promise<UserTool[]> {
  const loaded: UserTool[] = [];
  for (const file of files) loaded.push(...(await loadToolModule(file)));
  return loaded;
}

async function loadToolModule(file: string): Promise<UserTool[]> {
  const source = path.resolve(file);
  if (!fs.existsSync(source) || !fs.statSync(source).isFile()) {
    throw new ToolDefinitionError(source, 'tool module not found');
  }
  let namespace: unknown;
  try {
    namespace = await importModule(source);
  } catch (error) {
    const reason = error instanceof Error ? (error.message.split('\n')[0] ?? error.name) : String(error);
    throw new ToolDefinitionError(source, `the module failed to load: ${reason}`);
  }
  const exported = exportedList(namespace, 'tools');
  if (exported === undefined) {
    throw new ToolDefinitionError(
      source,
      'the module exports no tools: export an array of tools made with defineTool, as its default export ' +
        '(export default [ … ]) or as `tools` (export const tools = [ … ])',
    );
  }
  return prepareUserTools(exported, source);
}

/** Imports a user's JavaScript or TypeScript module (tools, scorers). */
export function importModule(file: string): Promise<unknown> {
  const url = pathToFileURL(file).href;
  if (!TYPESCRIPT.test(file)) return import(url);
  // tsx's scoped loader: it compiles this import (and what it imports) without hooking the whole process.
  return import('tsx/esm/api').then(({ tsImport }) => tsImport(url, __filename));
}

/**
 * The array a module namespace exports as `name` (`tools`, `scorers`), else as its default export. A CommonJS module
 * (or TypeScript compiled to it) arrives with its `module.exports` as the default, so the same names are looked up
 * there too.
 */
export function exportedList(namespace: unknown, name: string): unknown {
  const record = (value: unknown) =>
    typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  const module = record(namespace);
  const inner = record(module?.default);
  return module?.[name] ?? inner?.[name] ?? (Array.isArray(module?.default) ? module?.default : inner?.default);
}

/** `, tools a, b from <file>` for the ready line, or nothing without user tools. */
export function describeUserTools(userTools: readonly UserTool[]): string {
  if (userTools.length === 0) return '';
  const sources = [...new Set(userTools.map((entry) => entry.source))];
  return `; tools ${userTools.map((entry) => entry.tool.name).join(', ')} from ${sources.join(', ')}`;
}
