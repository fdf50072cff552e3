/**
 * The shell's sandbox end to end: real `baton worker` processes, started with secrets in their launch environment
 * (what `/proc/<pid>/environ` shows), run an agent whose shell commands try what an attacker would: walk up to the
 * worker through /proc, read its environment and working directory, look at the repository, reach the Postgres port
 * on the host's loopback (with the network on or off). Then the same worker where bwrap cannot run (it says so at
 * start, and the shell refuses), without slirp4netns (it says so at start, and worlds with the network on are
 * refused) and with BATON_SHELL_SANDBOX=none (it warns at start, and the secrets and the loopback are in reach: what
 * the sandbox prevents).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { connect, type BatonClient } from '../../client';
import { parseScript, startScriptedModelServer, type ScriptedModelServer } from '../../scripted-model';
import { ANCESTRY_PROBE, probedAncestors } from '../../testing/shell-probe';
import { readTestEnv, uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { startScriptedWorker, type WorkerProcess } from '../../testing/worker-process';

const env = readTestEnv();
const ROOT = path.resolve(__dirname, '..', '..');
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'shell-sandbox-'));
const agentsDir = path.join(workDir, 'agents');
/** The worlds' working directory; the running worker's pid is written here for the commands to aim at. */
const project = path.join(workDir, 'project');
const database = new URL(env.databaseUrl);
const databasePort = database.port || '5432';
const databasePassword = decodeURIComponent(database.password);
const apiKey = `sk-launch-${randomBytes(8).toString('hex')}`;
/** The key the worker checks approvals' decisions with: a command that read it could sign its own. */
const decisionKey = `decision-key-${randomBytes(16).toString('hex')}`;

/** Everything a command could reach of its worker: ancestors, every visible process, the worker by its pid. */
const PROBE = [
  ...ANCESTRY_PROBE,
  'worker=$(cat worker.pid); tr "\\0" "\\n" < /proc/$worker/environ; ls -l /proc/$worker/cwd/',
  // The world's directory lies under the repository here (the test run's state directory): of the path to it, bwrap
  // makes empty directories; nothing of the repository itself is there.
  `cat ${ROOT}/package.json; ls ${ROOT}/agents`,
  'true',
].join('\n');
const CONNECT = `bash -c 'exec 3<>/dev/tcp/${database.hostname}/${databasePort} && echo connected'`;

const script = parseScript(
  `
agents:
  prober:
    - call: shell
      args: { command: ${JSON.stringify(PROBE)} }
    - call: shell
      args: { command: ${JSON.stringify(CONNECT)} }
    - say: "Probed."
`,
  'shell-sandbox',
);

/** A worker start-up (a few seconds with the stack's bundle) and up to three short conversations. */
const TEST_TIMEOUT_MS = 240_000;

let model: ScriptedModelServer;
let client: BatonClient;
const taskQueue = uniqueTaskQueue('shell-sandbox');

before(async () => {
  fs.mkdirSync(agentsDir);
  fs.mkdirSync(project);
  fs.writeFileSync(
    path.join(agentsDir, 'prober.md'),
    '---\nname: prober\ndescription: Probes its sandbox.\ncapabilities: [shell]\n---\nYou probe.\n',
  );
  model = await startScriptedModelServer({ script });
  client = await connect({ address: env.temporalAddress, taskQueue, databaseUrl: env.databaseUrl });
});

after(async () => {
  await client.close();
  await model.close();
});

/** A `baton worker` on the test stack with secrets in its launch environment and `settings` on top. */
async function startWorker(name: string, settings: Record<string, string> = {}): Promise<WorkerProcess> {
  const worker = await startScriptedWorker(name, {
    taskQueue,
    modelBaseUrl: model.baseURL,
    agentsDir,
    env: { OPENAI_API_KEY: apiKey, BATON_DECISION_KEY: decisionKey, ...settings },
  });
  fs.writeFileSync(path.join(project, 'worker.pid'), String(worker.child.pid));
  return worker;
}

/** Runs the prober in a world of its own with `variables`; returns its two shell results. */
async function probe(variables: Record<string, string>): Promise<{ probed: string; connected: string }> {
  const world = `sandbox-${randomBytes(4).toString('hex')}`;
  await client.world(world).set({ working_directory: project, ...variables });
  const thread = await client.startThread({ agent: 'prober', threadId: uniqueThreadId('shell-sandbox'), world });
  try {
    const result = await thread.send('Probe.');
    assert.equal(result.status, 'completed');
    assert.equal(result.reply, 'Probed.');
    const tools = (await thread.transcript()).filter((message) => message.role === 'tool');
    assert.equal(tools.length, 2);
    return { probed: tools[0]?.content ?? '', connected: tools[1]?.content ?? '' };
  } finally {
    await thread.end();
  }
}

test(
  'shell sandbox: a worker started with secrets runs commands that cannot reach them, its files or the Postgres on its loopback',
  { timeout: TEST_TIMEOUT_MS },
  async () => {
    assert.ok(databasePassword !== '', 'the test stack’s database has a password to keep');
    assert.match(database.hostname, /^(127\.0\.0\.1|localhost)$/, 'the test stack’s Postgres listens on loopback');
    const worker = await startWorker('sandboxed worker');
    try {
      assert.match(
        worker.output(),
        /^baton worker: shell: commands run in a bubblewrap sandbox \(\/.*bwrap\); their network is egress only, through \/.*slirp4netns, never this host's loopback$/m,
      );
      for (const network of ['on', 'off']) {
        const { probed, connected } = await probe({ BATON_SHELL_NETWORK: network });
        assert.match(probed, /^exit code: 0\n/);
        assert.ok(!probed.includes(apiKey), `the API key leaked:\n${probed}`);
        assert.ok(!probed.includes(decisionKey), `the decision key leaked:\n${probed}`);
        assert.ok(!probed.includes(databasePassword), `the database password leaked:\n${probed}`);
        assert.doesNotMatch(probed, /DATABASE_URL|OPENAI|TEMPORAL_|BATON_TASK_QUEUE/);
        // What it reached were the shell and bwrap's PID 1, in the world's directory; the worker is not there.
        assert.deepEqual(
          probedAncestors(probed).map((ancestor) => ancestor.pid),
          [2, 1],
        );
        assert.match(probed, new RegExp(`cannot open /proc/${worker.child.pid}/environ: No such file`));
        assert.match(probed, new RegExp(`cat: ${ROOT}/package\\.json: No such file or directory`));
        assert.match(probed, new RegExp(`ls: cannot access '${ROOT}/agents': No such file or directory`));
        // On or off, 127.0.0.1 in there is the command's own loopback: the host's Postgres is not on it.
        assert.match(connected, /^exit code: 1\n/);
        assert.match(connected, /Connection refused/);
        assert.doesNotMatch(connected, /connected/);
      }
    } finally {
      await worker.kill();
    }
  },
);

test(
  'shell sandbox: a worker that cannot run bwrap says so at start, and its shell refuses every command',
  { timeout: TEST_TIMEOUT_MS },
  async () => {
    const missing = path.join(workDir, 'no-such-bwrap');
    const worker = await startWorker('worker without bwrap', { BATON_BWRAP: missing });
    try {
      const reason = `BATON_BWRAP ${missing} cannot be run (ENOENT)`;
      assert.ok(
        worker.output().includes(`baton worker: warning: the shell tool will refuse every command: ${reason}.`),
        worker.output(),
      );
      const { probed, connected } = await probe({});
      for (const result of [probed, connected]) {
        assert.ok(
          result.startsWith(
            `Error: Shell commands run only inside a bubblewrap sandbox, and this worker cannot make one: ${reason}. ` +
              'To enable it: install bubblewrap',
          ),
          result,
        );
        assert.match(result, /BATON_SHELL_SANDBOX=none .*No command was run\.$/s);
      }
    } finally {
      await worker.kill();
    }
  },
);

test(
  'shell sandbox: a worker without slirp4netns says so at start, and refuses commands of worlds that keep the network on',
  { timeout: TEST_TIMEOUT_MS },
  async () => {
    const missing = path.join(workDir, 'no-such-slirp4netns');
    const worker = await startWorker('worker without slirp4netns', { BATON_SLIRP4NETNS: missing });
    try {
      const reason = `BATON_SLIRP4NETNS ${missing} cannot be run (ENOENT)`;
      assert.match(
        worker.output(),
        /^baton worker: shell: commands run in a bubblewrap sandbox \(\/.*bwrap\); warning: /m,
      );
      assert.ok(
        worker
          .output()
          .includes(
            `warning: commands of worlds with BATON_SHELL_NETWORK on (the default) will be refused: ${reason}. ` +
              'To enable it: install slirp4netns',
          ),
        worker.output(),
      );
      const { probed, connected } = await probe({});
      for (const result of [probed, connected]) {
        assert.ok(
          result.startsWith(
            "Error: This world keeps the shell's network on (BATON_SHELL_NETWORK, on by default), and this worker " +
              `cannot give a command a network of its own: ${reason}. To enable it: install slirp4netns`,
          ),
          result,
        );
        assert.match(result, /BATON_SHELL_NETWORK=off.*No command was run\.$/s);
      }
      // A world without the network runs its commands as before.
      const offline = await probe({ BATON_SHELL_NETWORK: 'off' });
      assert.match(offline.probed, /^exit code: 0\n/);
      assert.match(offline.connected, /^exit code: 1\n[^]*Connection refused/);
    } finally {
      await worker.kill();
    }
  },
);

test(
  'shell sandbox: with BATON_SHELL_SANDBOX=none the worker warns at start, and its secrets are in reach',
  { timeout: TEST_TIMEOUT_MS },
  async () => {
    const worker = await startWorker('unsandboxed worker', { BATON_SHELL_SANDBOX: 'none' });
    try {
      assert.match(
        worker.output(),
        /^baton worker: warning: BATON_SHELL_SANDBOX=none: shell commands run without a sandbox/m,
      );
      const { probed, connected } = await probe({});
      // What the sandbox prevents: the same command walks up to the worker and prints what it was started with, and
      // reaches the host's loopback (where Postgres, and any server deciding approvals, listens).
      assert.ok(probed.includes(apiKey) && probed.includes(databasePassword) && probed.includes(decisionKey), probed);
      assert.equal(connected, 'exit code: 0\nconnected\n');
    } finally {
      await worker.kill();
    }
  },
);
