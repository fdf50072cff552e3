/**
 * The Chromium our browser tests drive (through playwright-core): `BATON_CHROMIUM` when set (only there), else
 * Debian's and other distributions' paths, with the flags a root user in a container needs.
 */
import fs from 'node:fs';

/**
 * Where the browser tests look for Chromium: `BATON_CHROMIUM` when set (only there), else Debian's and other
 * distributions' paths. `npm test`'s system-tools step (system-tools.ts) looks at the same ones.
 */
export function chromiumCandidates(env: Readonly<Record<string, string | undefined>> = process.env): string[] {
  return env.BATON_CHROMIUM
    ? [env.BATON_CHROMIUM]
    : ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];
}

const CANDIDATES = chromiumCandidates();

/** The executable found, or undefined. */
export const chromiumPath: string | undefined = CANDIDATES.find((candidate) => fs.existsSync(candidate));

export const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];

/** Why the browser tests cannot run here, or undefined when they can. */
export const missingChromium: string | undefined = chromiumPath
  ? undefined
  : `Chromium not found (looked at ${CANDIDATES.join(', ')}): install it (apt-get install chromium) or set BATON_CHROMIUM`;
