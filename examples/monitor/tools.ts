/**
 * The monitor's one tool: the cold room's thermometer, which this example reads from `data/cold-room.json` (edit the
 * file to change the reading). Loaded by `baton dev --tools tools.ts` (see package.json) or
 * `BATON_TOOLS=tools.ts baton worker`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { defineTool, ToolError } from 'baton';
import { z } from 'zod';

/** The sensor: `baton dev` and `baton worker` run in the project directory (`npm start` does). */
const SENSOR = path.resolve('data', 'cold-room.json');

const reading = z.object({ celsius: z.number(), limit_celsius: z.number() });

const readTemperature = defineTool({
  name: 'read_temperature',
  description: "The cold room's temperature now, in degrees Celsius, with the limit it must stay under.",
  parameters: z.object({}),
  // Read-only: retried when it throws, and run again if its worker dies.
  run: () => {
    const parsed = reading.safeParse(JSON.parse(fs.readFileSync(SENSOR, 'utf8')));
    // A ToolError is an answer the model can act on: it reads "Error: …" and the turn goes on.
    if (!parsed.success) throw new ToolError('the thermometer gave no reading: try again in a minute');
    const { celsius, limit_celsius } = parsed.data;
    return { celsius, limit_celsius, over_limit: celsius > limit_celsius, at: new Date().toISOString() };
  },
});

export default [readTemperature];
