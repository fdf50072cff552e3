import type { Pool } from 'pg';
import type { Queryable } from './threads';
import { inTransaction } from './transaction';

/** The world every thread runs in unless it names another. */
export const DEFAULT_WORLD = 'default';

/** A world's raw variables text, or `undefined` when the world has none (or does not exist yet). */
export async function getWorldVariablesText(db: Queryable, world: string): Promise<string | undefined> {
  const { rows } = await db.query<{ variables: string | null }>('SELECT variables FROM worlds WHERE name = $1', [
    world,
  ]);
  return rows[0]?.variables ?? undefined;
}

/** Replaces a world's variables text (creating the world); `undefined` clears it. */
export async function setWorldVariablesText(db: Queryable, world: string, text: string | undefined): Promise<void> {
  await db.query(
    `INSERT INTO worlds (name, variables) VALUES ($1, $2)
     ON CONFLICT (name) DO UPDATE SET variables = EXCLUDED.variables, updated_at = now()`,
    [world, text ?? null],
  );
}

/**
 * Edits a world's variables text under a row lock (creating the world), so two edits at once both land.
 * Returns the new text.
 */
export async function editWorldVariablesText(
  pool: Pool,
  world: string,
  edit: (text: string | undefined) => string | undefined,
): Promise<string | undefined> {
  return inTransaction(pool, async (client) => {
    await client.query('INSERT INTO worlds (name) VALUES ($1) ON CONFLICT (name) DO NOTHING', [world]);
    const { rows } = await client.query<{ variables: string | null }>(
      'SELECT variables FROM worlds WHERE name = $1 FOR UPDATE',
      [world],
    );
    const next = edit(rows[0]?.variables ?? undefined);
    await setWorldVariablesText(client, world, next);
    return next;
  });
}
