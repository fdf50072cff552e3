/**
 * docs/reference/sdk/: the package's three entries (`baton`, `baton/worker`, `baton/testing`) as markdown, by TypeDoc
 * and typedoc-plugin-markdown through TypeDoc's Node API, in this process. Nothing in the pages depends on when or
 * where they were made (no dates, no links to a revision's sources), so the same code gives the same pages.
 */
import fs from 'node:fs';
import path from 'node:path';
import type * as TypeDoc from 'typedoc';
import type { DeclarationReflection, ProjectReflection, TypeDocOptions } from 'typedoc';
import type { MarkdownPageEvent, PluginOptions } from 'typedoc-plugin-markdown';
import { GENERATED_NOTICE } from './notice';

const ROOT = path.resolve(__dirname, '..', '..');

/** The package's entries (package.json `exports`), by the name a user imports. */
const ENTRIES: Readonly<Record<string, string>> = {
  baton: 'index.ts',
  'baton/worker': 'worker/index.ts',
  'baton/testing': 'testing/index.ts',
};

/**
 * The pages, by path relative to docs/reference/ (`sdk/README.md`, …). TypeDoc's markdown renderer writes files; it
 * writes them into a scratch directory under node_modules/.cache, which is read and removed.
 */
export async function sdkPages(): Promise<Record<string, string>> {
  // TypeDoc is an ES module.
  const typedoc = await import('typedoc');
  const markdown = await import('typedoc-plugin-markdown');
  const scratch = path.join(ROOT, 'node_modules', '.cache', 'baton-docs', `sdk-${process.pid}-${Date.now()}`);
  const pages: Record<string, string> = {};
  try {
    const options: Partial<TypeDocOptions & PluginOptions> = {
      name: 'Baton SDK',
      entryPoints: Object.values(ENTRIES).map((file) => path.join(ROOT, file)),
      entryPointStrategy: 'resolve',
      tsconfig: path.join(ROOT, 'tsconfig.build.json'),
      plugin: ['typedoc-plugin-markdown'],
      out: scratch,
      readme: 'none',
      // The same pages wherever they are made: no links into a revision's sources, no dates.
      disableSources: true,
      disableGit: true,
      sourceLinkTemplate: undefined,
      hideGenerator: true,
      // `npm run typecheck` checks the code; TypeDoc only reads it.
      skipErrorChecking: true,
      excludePrivate: true,
      excludeInternal: true,
      logLevel: 'Error',
      // Lists, not tables: a table of members is wider than a page.
      parametersFormat: 'list',
      interfacePropertiesFormat: 'list',
      classPropertiesFormat: 'list',
      typeAliasPropertiesFormat: 'list',
      enumMembersFormat: 'list',
      propertyMembersFormat: 'list',
      typeDeclarationFormat: 'list',
      indexFormat: 'list',
      outputFileStrategy: 'modules',
      entryFileName: 'README.md',
      hidePageHeader: true,
      hideBreadcrumbs: true,
    };
    const app = await typedoc.Application.bootstrapWithPlugins(options, [new typedoc.TSConfigReader()]);
    app.renderer.on(markdown.MarkdownPageEvent.END, (event) => {
      const page = event as MarkdownPageEvent;
      page.preWriteAsyncJobs.push((written: MarkdownPageEvent) => {
        pages[path.posix.join('sdk', written.url)] = `${GENERATED_NOTICE}\n\n${headingLinks(written.contents ?? '')}`;
        return Promise.resolve();
      });
    });
    const project = await app.convert();
    if (!project || app.logger.hasErrors()) throw new Error('TypeDoc could not read the package entries');
    withoutInheritedExternals(typedoc, project);
    // Each entry's page is named as it is imported, not after its file (`index`, `worker/index`).
    const byFile = new Map(Object.entries(ENTRIES).map(([name, file]) => [file.replace(/(^|\/)index\.ts$/, ''), name]));
    for (const entry of project.children ?? [])
      entry.name = byFile.get(entry.name === 'index' ? '' : entry.name) ?? entry.name;
    await app.generateOutputs(project);
    if (app.logger.hasErrors()) throw new Error('TypeDoc could not write the SDK pages');
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  return pages;
}

/**
 * Removes the members a class or interface inherits from outside the package (an error's `stack`, `cause`,
 * `captureStackTrace`…), directly or through a class of the package: they are Node's to document, not Baton's.
 */
function withoutInheritedExternals(typedoc: typeof TypeDoc, project: ProjectReflection) {
  type Declaration = DeclarationReflection;
  /** Whether a type `owner` extends declares `name` itself, somewhere up the chain within the package. */
  const declaredInPackage = (owner: Declaration, name: string): boolean =>
    (owner.extendedTypes ?? []).some((type) => {
      const base = type instanceof typedoc.ReferenceType ? type.reflection : undefined;
      if (!(base instanceof typedoc.DeclarationReflection)) return false;
      const member = base.getChildByName(name);
      if (!(member instanceof typedoc.DeclarationReflection)) return false;
      return !member.inheritedFrom || declaredInPackage(base, member.name);
    });
  const external = Object.values(project.reflections).filter(
    (reflection): reflection is Declaration =>
      reflection instanceof typedoc.DeclarationReflection &&
      reflection.inheritedFrom !== undefined &&
      reflection.parent instanceof typedoc.DeclarationReflection &&
      !declaredInPackage(reflection.parent, reflection.name),
  );
  for (const reflection of external) project.removeReflection(reflection);
  // The groups (Properties, Methods, …) were made before, and still list them.
  const removed = new Set(external);
  for (const reflection of Object.values(project.reflections)) {
    if (!(reflection instanceof typedoc.ContainerReflection)) continue;
    for (const group of reflection.groups ?? []) {
      group.children = group.children.filter((child) => !removed.has(child as Declaration));
      for (const category of group.categories ?? []) {
        category.children = category.children.filter((child) => !removed.has(child as Declaration));
      }
    }
    reflection.groups = reflection.groups?.filter((group) => group.children.length > 0);
  }
}

/**
 * The links of a page to its own headings, pointed at the anchors GitHub makes of them. The markdown plugin numbers an
 * anchor among every member of the page, headed or not (`Watcher.origin` takes `watcherorigin`, so the type
 * `WatcherOrigin` gets `watcherorigin-1`), while GitHub numbers the headings only. A link `[\`Name\`](#…)` is
 * pointed at the heading `Name`; when a name heads several sections, its links' anchors, in their numbers' order,
 * go to those sections in the page's order.
 */
export function headingLinks(markdown: string): string {
  const headings: { text: string; anchor: string }[] = [];
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const text = (heading[1] ?? '').replace(/`/g, '');
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    headings.push({ text: text.replace(/\(\)$/, ''), anchor: count === 0 ? base : `${base}-${count}` });
  }
  const link = /\[`([^`\]]+)`\]\(#([^)\s]+)\)/g;
  const used = new Map<string, Set<string>>();
  for (const [, name = '', anchor = ''] of markdown.matchAll(link)) {
    used.set(name, (used.get(name) ?? new Set()).add(anchor));
  }
  const target = new Map<string, string>();
  for (const [name, anchors] of used) {
    const sections = headings.filter((heading) => heading.text === name);
    const ordered = [...anchors].sort((a, b) => suffix(a) - suffix(b));
    if (sections.length !== ordered.length) continue;
    ordered.forEach((anchor, index) => target.set(`${name}#${anchor}`, sections[index]?.anchor ?? anchor));
  }
  return markdown.replace(link, (whole, name: string, anchor: string) => {
    const to = target.get(`${name}#${anchor}`);
    return to === undefined ? whole : `[\`${name}\`](#${to})`;
  });
}

/** The number GitHub and the plugin append to a repeated anchor (`name-2`: 2), 0 for none. */
function suffix(anchor: string): number {
  return Number(/-(\d+)$/.exec(anchor)?.[1] ?? 0);
}
