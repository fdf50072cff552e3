import { randomBytes } from 'node:crypto';

/**
 * A new root thread id: a base-36 timestamp and random suffix, short because every workflow id of the tree
 * embeds it, and sortable by creation time.
 */
export function newThreadId(now = Date.now()): string {
  return `t${now.toString(36)}${randomBytes(3).toString('hex')}`;
}
