/**
 * The Chromium our browser tests drive (through playwright-core): `BATON_CHROMIUM` when set (only there), else
 * Debian's and other distributions' paths, with the flags a root user in a container needs.
 */
import fs from 'node:fs';

const CANDIDATES = process.env.BATON_CHROMIUM
  ? [process.env.BATON_CHROMIUM]
  : ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

/** The executable found, or undefined. */
export const chromiumPath: string | undefined = CANDIDATES.find((candidate) => fs.existsSync(candidate));

export const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];

/** Why the browser tests cannot run here, or undefined when they can. */
export const missingChromium: string | undefined = chromiumPath
  ? undefined
  : `Chromium not found (looked at ${CANDIDATES.join(', ')}): install it (apt-get install chromium) or set BATON_CHROMIUM`;
