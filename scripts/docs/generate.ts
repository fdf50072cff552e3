/**
 * `npm run docs`: writes the generated reference, docs/reference/, from the code (scripts/docs/reference.ts).
 * `npm run docs -- --check` writes nothing: it exits 1 naming each stale, missing or extra file.
 */
import { compareReference, describeDifferences, generateReference, readReference, writeReference } from './reference';

async function main(args: readonly string[]): Promise<number> {
  const unknown = args.filter((arg) => arg !== '--check');
  if (unknown.length > 0) {
    process.stderr.write(`npm run docs: unknown argument ${unknown.join(' ')} (only --check)\n`);
    return 2;
  }
  const generated = await generateReference();
  const differences = describeDifferences(compareReference(generated, readReference()));
  if (args.includes('--check')) {
    if (differences.length === 0) {
      process.stdout.write(`docs/reference/ is up to date (${generated.size} files)\n`);
      return 0;
    }
    process.stderr.write(`${differences.join('\n')}\nRun \`npm run docs\` and commit docs/reference/.\n`);
    return 1;
  }
  writeReference(generated);
  process.stdout.write(
    differences.length === 0
      ? `docs/reference/ was up to date (${generated.size} files)\n`
      : `docs/reference/: ${differences.length} files written or removed (${generated.size} in all)\n`,
  );
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`npm run docs: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
