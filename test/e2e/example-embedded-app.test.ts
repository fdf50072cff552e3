/**
 * The example app (examples/embedded-app), run as its README says, with Baton as a user gets it: `npm pack` (of a
 * copy of this checkout, so the build leaves the checkout's dist/ alone), the example copied out of the repository
 * with its `"baton": "file:../.."` changed to that tarball, and `npm install`. Then the README's commands:
 * `npx baton dev --agents agents --model-script agents/model-script.yaml` (its own Postgres and Temporal, the scripted
 * model, and streamed replies, which `baton dev` asks for unless told otherwise) and `npm start`; Chromium opens the page and asks a question, and the test records
 * every change of the page as it is made: the tool calls and the answer's text arrive while the run goes on, then the
 * reply. `npx baton transcript` shows the thread in Baton. Last, the copy type-checks against the tarball's
 * declarations (`npm run typecheck`).
 *
 * Without Chromium the browser test is skipped with a notice saying so; under CI (`isCi`) it fails instead.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { chromium } from 'playwright-core';
import { CHROMIUM_FLAGS, chromiumPath, missingChromium } from '../../testing/chromium';
import { isCi } from '../../testing/ci';
import {
  baton,
  Command,
  COMMAND_TIMEOUT_MS,
  copyExampleProject,
  installExample,
  packedBaton,
  removeUserProject,
  ROOT,
  stopExample,
  succeed,
  userEnv,
} from './user-project';

const EXAMPLE = path.join(ROOT, 'examples', 'embedded-app');
const QUESTION = 'When can I visit with my kids?';
/** The last step of the example's model script. */
const REPLY =
  'The museum is open Tuesday to Sunday from 10:00 to 18:00, and until 21:00 on Thursdays. A ticket costs 12 EUR; ' +
  'children under 12 come in free.';
const UI_TIMEOUT_MS = 120_000;
/** What the README gives `npx baton dev`. */
const DEV_ARGS = ['--agents', 'agents', '--model-script', 'agents/model-script.yaml'];

/** What the page showed after one of its changes: the lines of the run's events, and the reply. */
interface Snapshot {
  events: string[];
  reply: string;
}

if (missingChromium) process.stderr.write(`\n*** embedded-app browser test: ${missingChromium} ***\n\n`);

// Its two tests share only the install, so they run at once: the type check overlaps the stack's start.
describe('the example app (examples/embedded-app), run as its README says', { concurrency: true }, () => {
  let example: string;

  before(
    async () => {
      const readme = fs.readFileSync(path.join(EXAMPLE, 'README.md'), 'utf8');
      // The commands below are the README's: a change to either shows here.
      for (const command of ['npm install', `npx baton dev ${DEV_ARGS.join(' ')}`, 'npm start']) {
        assert.ok(readme.includes(command), `the README runs ${command}`);
      }
      // The run's one tarball, packed from a copy of the checkout (its build never touches the checkout's dist/).
      const tarball = await packedBaton();
      example = copyExampleProject('embedded-app', [], `file:${tarball.file}`);
      await installExample(example);
    },
    { timeout: 3 * COMMAND_TIMEOUT_MS },
  );

  after(() => {
    if (example !== undefined) removeUserProject(example);
  });

  test(
    'the page streams the tool calls and the text as they happen, then shows the reply; the thread is in Baton',
    { skip: isCi() ? false : missingChromium, timeout: 3 * COMMAND_TIMEOUT_MS },
    async (t) => {
      assert.ok(chromiumPath, `under CI the browser test must run. ${missingChromium ?? ''}`);
      // The README's two commands, each in its own terminal.
      // No BATON_MODEL_STREAM: `baton dev` streams by default, which the page's live text proves.
      const devEnv = userEnv();
      delete devEnv.BATON_MODEL_STREAM;
      const dev = new Command('npx baton dev', 'npx', ['--no', '--', 'baton', 'dev', ...DEV_ARGS], {
        cwd: example,
        env: devEnv,
      });
      t.after(() => stopExample('baton dev', dev, undefined));
      await dev.waitFor(/Baton is up/);
      // Port 0: a free one, which the server prints as the address to open.
      const app = new Command('npm start', 'npm', ['start'], { cwd: example, env: userEnv({ PORT: '0' }) });
      t.after(() => stopExample('npm start', app, undefined));
      const [, url] = await app.waitFor(/^Open (http:\/\/127\.0\.0\.1:\d+\/)$/m);
      assert.ok(url);
      assert.match(app.stdout, /^Baton: the baton dev in .*\.baton/m, 'connect() found the baton dev of the project');

      const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: CHROMIUM_FLAGS });
      t.after(() => browser.close());
      const page = await browser.newPage();
      await page.goto(url);
      // Every change the page makes, recorded as it is made: what it showed between two events.
      await page.evaluate(`
        window.snapshots = [];
        new MutationObserver(() => window.snapshots.push({
          events: [...document.querySelectorAll('#events li')].map((li) => li.textContent),
          reply: document.getElementById('reply').textContent,
        })).observe(document.body, { subtree: true, childList: true, characterData: true });
      `);
      await page.fill('#message', QUESTION);
      await page.click('button');
      await page.locator('#reply').filter({ hasText: REPLY }).waitFor({ timeout: UI_TIMEOUT_MS });

      const shown = await page.locator('#events li').allTextContents();
      const threadId = /^thread (web-[0-9a-f]{8})$/.exec((await page.locator('#thread').textContent()) ?? '')?.[1];
      assert.ok(threadId, `the page shows the thread id\n${shown.join('\n')}`);
      assert.deepEqual(
        shown.map((line) => line.replace(/^(← \w+): .*$/s, '$1: …')),
        [
          `You: ${QUESTION}`,
          '→ list_files {"path":"data"}',
          '← list_files: …',
          '→ read_file {"path":"data/museum.md"}',
          '← read_file: …',
          REPLY,
        ],
      );
      assert.equal(shown[2], '← list_files: data/museum.md', 'the tool results come through');
      assert.equal(shown[4], '← read_file: # The town museum');

      // The events came while the run went on: the tool calls were on the page before any of the answer's text, and
      // the text grew a few words at a time, each state shown before the reply was there.
      const snapshots = await page.evaluate<Snapshot[]>('window.snapshots');
      const beforeReply = snapshots.filter((snapshot) => snapshot.reply === '');
      const partial = new Set(
        beforeReply
          .map((snapshot) => snapshot.events[5] ?? '')
          .filter((text) => text !== '' && text !== REPLY && REPLY.startsWith(text)),
      );
      assert.ok(
        partial.size >= 3,
        `the answer's text was shown in pieces before the reply (${partial.size} partial texts seen)`,
      );
      assert.ok(
        beforeReply.some((snapshot) => snapshot.events.length === 5 && snapshot.events[3]?.startsWith('→ read_file')),
        'the tool calls were shown before the text began',
      );

      // The thread is Baton's like any other: the CLI reads it back from the project directory.
      const transcript = JSON.parse((await baton(example, ['transcript', threadId, '--json'])).stdout) as {
        role: string;
        agent: string;
        content: string | null;
        toolCalls: { name: string }[] | null;
      }[];
      assert.deepEqual(
        transcript.map((message) => [message.role, message.agent, message.toolCalls?.map((call) => call.name)]),
        [
          ['user', 'guide', undefined],
          ['assistant', 'guide', ['list_files']],
          ['tool', 'guide', undefined],
          ['assistant', 'guide', ['read_file']],
          ['tool', 'guide', undefined],
          ['assistant', 'guide', undefined],
        ],
      );
      assert.equal(transcript[0]?.content, QUESTION);
      assert.equal(transcript.at(-1)?.content, REPLY);
    },
  );

  test('copied out with the packed Baton, it type-checks (npm run typecheck)', async () => {
    await succeed('npm run typecheck', 'npm', ['run', 'typecheck'], { cwd: example });
  });
});
